// residual_sign (several outputs per element, stacked [L, ...shape]): the reference's element
// in vector lanes — exact: double lanes, mase: float lanes — threaded over elements.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>

#include "qnum/format/residual_sign.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// residual_sign (both bundles): the reference's element (binary.hpp residual_sign_element)
/// in vector lanes — exact: double lanes, mase: float lanes — threaded over elements; each
/// level's outputs go to their own [n] slice of `out`.
template <class A>
void residual_sign_kernel(const ResidualSignSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                          const Shape& shape) {
  const auto means = qnum::detail::residual_sign_prepare(s, p, in.size(), out.size(), shape);
  const auto n = static_cast<std::int64_t>(in.size());
  const auto L = static_cast<std::int64_t>(means.size());
  const bool mase = p.is_mase();
  const float* src = in.data();
  float* dst = out.data();
  auto lanes = [&]<class T>(T, std::int64_t b, std::int64_t e) -> std::int64_t {
    using bt = xsimd::batch<T, A>;
    constexpr std::int64_t N = bt::size;
    const bt ONE(T(1)), MONE(T(-1)), ZERO(T(0));
    std::array<bt, 8> mag;  // |mu_l| as the reference's element takes it (levels <= 8)
    for (std::int64_t l = 0; l < L; ++l) {
      const double mu = means[static_cast<std::size_t>(l)];
      mag[static_cast<std::size_t>(l)] = bt(mase ? T(std::fabs(static_cast<float>(mu))) : T(std::fabs(mu)));
    }
    std::int64_t i = b;
    for (; i + N <= e; i += N) {
      bt r = bt::load_unaligned(src + i);  // float -> T lanes (exact)
      for (std::int64_t l = 0; l < L; ++l) {
        const bt& m = mag[static_cast<std::size_t>(l)];
        bt sg = xsimd::select(r > ZERO, ONE, xsimd::select(r < ZERO, MONE, ZERO));
        sg = xsimd::select(xsimd::isnan(r), r, sg);
        bt o = sg * m;
        if (!mase || L == 1) o = mase ? ZERO + o : o + ZERO;  // exact: + 0.0; MASE L = 1: 0 + out
        r = r - o;
        o.store_unaligned(dst + l * n + i);  // T -> float (exact: one rounding, as the reference)
      }
    }
    return i;
  };
  parallel_for(n, kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
    std::int64_t i = mase ? lanes(float{}, b, e) : lanes(double{}, b, e);
    for (; i < e; ++i) qnum::detail::residual_sign_element(means, mase, src[i], dst + i, static_cast<std::size_t>(n));
  });
}

/// ResidualSignSpec's row of the kernel table.
template <>
struct FamilyKernel<ResidualSignSpec> {
  template <class A>
  static QuantizePlan plan(const ResidualSignSpec& s, const Policy& p, const QuantizeCall& c) {
    return {QuantizePath::simd, [&s, &p, shape = &c.shape](std::span<const float> in, std::span<float> out) {
              residual_sign_kernel<A>(s, p, in, out, *shape);
            }};
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
