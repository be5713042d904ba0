// integer (fixed point) on vector lanes. exact: nearest_even, nearest_away (any F);
// floor/ceil/toward_zero (F >= 0); saturate. mase: nearest_even and floor. Other policies: the
// scalar reference per element, threaded.
// float32 reproduces the double-precision exact reference: x * 2^F is exact in float unless it
// overflows (then it saturates either way) or underflows below 2^-126 (|v| < 1/2: rounds to 0
// under nearest modes; directed modes need F >= 0, where no underflow happens); clamp bounds
// float(kmin/kmax) give the same output as the reference's exact bounds rounded once.
#pragma once

#include <cstdint>

#include "qnum/format/fixed.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

struct FixedKernel {
  FixedSpec spec;
  Policy policy;
  float scale, inv, lo, hi;
  bool mase;

  FixedKernel(const FixedSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        scale(qnum::detail::pow2f(s.frac_width)),
        inv(qnum::detail::pow2f(-s.frac_width)),
        lo(static_cast<float>(s.kmin())),
        hi(static_cast<float>(s.kmax())),
        mase(p.is_mase()) {}

  static bool supported(const FixedSpec& s, const Policy& p) {
    if (p.is_mase()) return p.rounding == Rounding::nearest_even || p.rounding == Rounding::floor;
    if (p.overflow != Overflow::saturate) return false;
    switch (p.rounding) {
      case Rounding::nearest_even:
      case Rounding::nearest_away:
        return true;
      case Rounding::floor:
      case Rounding::ceil:
      case Rounding::toward_zero:
        return s.frac_width >= 0;  // x * 2^F cannot underflow
      case Rounding::stochastic:
        return false;
    }
    return false;
  }

  /// round_int: a zero result keeps the sign of v (some emulated floor/ceil lose it).
  template <class A>
  bf<A> round(const bf<A>& v) const {
    const bf<A> r = round_raw<A>(v);
    const bf<A> signed_zero = as_float<A>(as_int<A>(v) & bi<A>(static_cast<std::int32_t>(0x80000000u)));
    return xsimd::select(r == bf<A>(0.0f), signed_zero, r);
  }
  template <class A>
  bf<A> round_raw(const bf<A>& v) const {
    switch (policy.rounding) {
      case Rounding::nearest_even:
        return xsimd::nearbyint(v);
      case Rounding::nearest_away: {
        // round half away from zero, exactly: t = trunc(v); +-1 when |v - t| >= 0.5 (exact).
        const bf<A> t = xsimd::trunc(v);
        const bf<A> d = v - t;
        return xsimd::select(d >= bf<A>(0.5f), t + bf<A>(1.0f), xsimd::select(d <= bf<A>(-0.5f), t - bf<A>(1.0f), t));
      }
      case Rounding::floor:
        return xsimd::floor(v);
      case Rounding::ceil:
        return xsimd::ceil(v);
      default:
        return xsimd::trunc(v);
    }
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> v = x * bf<A>(scale);
    const bf<A> k = round<A>(v);
    if (mase) {
      // torch: clamp (NaN passes), then / 2^F (== * 2^-F exactly: both round the same value once).
      return clamp_t<A>(k, lo, hi) * bf<A>(inv);
    }
    // exact: the reference clamps k to [kmin, kmax] in double and rounds k * 2^-F once; k is
    // a float here and float(kmax) is kmax or, for W >= 26, the float kmax rounds to, which
    // is also what the reference's output rounds to (no subnormal outputs for |F| <= 64).
    bf<A> c = xsimd::select(k < bf<A>(lo), bf<A>(lo), k);
    c = xsimd::select(c > bf<A>(hi), bf<A>(hi), c);
    const bf<A> r = c * bf<A>(inv) + bf<A>(0.0f);  // -0 -> +0: the reference has one zero
    return xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// FixedSpec's row of the kernel table.
template <>
struct FamilyKernel<FixedSpec> {
  template <class A>
  static QuantizePlan plan(const FixedSpec& s, const Policy& p, const QuantizeCall&) {
    if (FixedKernel::supported(s, p)) return elementwise_simd<A>(FixedKernel(s, p));
    return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
