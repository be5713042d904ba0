// minifloat_ieee on vector lanes. exact: nearest_even, saturate or infinity, keep or flush,
// every `specials` (OCP E4M3/E5M2 included), smallest normal >= 2^-126 (GridKernel).
// mase: bias <= 126 (MinifloatMaseKernel: MASE's floor(log2) exponent from the bits). Other
// policies: the scalar reference per element, threaded.
#pragma once

#include <cstdint>

#include "qnum/format/minifloat.hpp"
#include "qnum/kernel/quantize/grid.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// MASE's minifloat_ieee (floor log2 exponent, no carry, pass-through).
struct MinifloatMaseKernel {
  MinifloatSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float shift, inv_shift, two_inv_shift, kmax, p2emin;

  MinifloatMaseKernel(const MinifloatSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(-s.bias()),
        emax((1 << s.exponent_width) - 1 - s.bias()),
        lk(Log2Op::floor, emin, emax),
        shift(qnum::detail::pow2f(s.mantissa_bits())),
        inv_shift(qnum::detail::pow2f(-s.mantissa_bits())),
        two_inv_shift(2.0f * inv_shift),
        kmax(shift - 1.0f),
        p2emin(qnum::detail::pow2f(emin)) {}
  static bool supported(const MinifloatSpec& s) { return -s.bias() >= -126; }

  // MASE: q = sign(x + 1e-9) * 2^e * mant with mant = 1 + kn / 2^M, or 2 ks / 2^M where
  // 2^e == 2^emin, blended with x as (1 - c) q + c x, c = |x| <= 1e-8. The same floats in
  // fewer operations: every product below is exact (powers of two, integers k < 2^M);
  // c lanes give 0 * q + x = x + 0 (q is finite there); other lanes q + 0 * x, where sign(x)
  // is sign(x + 1e-9) (|x| > 1e-8) and 0 * x is NaN only for infinite or NaN x.
  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> value = xsimd::abs(x);
    const bi<A> f = log2_exponent_field<A>(value + bf<A>(1e-9f), lk);  // e + 127
    const bf<A> p2e = as_float<A>(f << 23);
    const bf<A> ms = (value * pow2_neg_field_i<A>(f)) * bf<A>(shift);  // m * 2^M, m = value / 2^e
    const auto sub = p2e == bf<A>(p2emin);
    // min/max instead of MASE's NaN-keeping clamp: k is NaN only for NaN x, whose lanes the
    // last line makes NaN again
    const bf<A> k =
        xsimd::max(xsimd::min(xsimd::nearbyint(xsimd::select(sub, ms * bf<A>(0.5f), ms - bf<A>(shift))), bf<A>(kmax)),
                   bf<A>(0.0f));
    const bf<A> mant = xsimd::fma(k, xsimd::select(sub, bf<A>(two_inv_shift), bf<A>(inv_shift)),
                                  xsimd::select(sub, bf<A>(0.0f), bf<A>(1.0f)));
    const bf<A> q = as_float<A>(as_int<A>(p2e * mant) | (as_int<A>(x) & bi<A>(static_cast<std::int32_t>(0x80000000u))));
    return xsimd::select(value <= bf<A>(1e-8f), x + bf<A>(0.0f), q + x * bf<A>(0.0f));
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// MinifloatSpec's row of the kernel table.
template <>
struct FamilyKernel<MinifloatSpec> {
  template <class A>
  static QuantizePlan plan(const MinifloatSpec& s, const Policy& p, const QuantizeCall&) {
    if (p.is_mase()) {
      if (MinifloatMaseKernel::supported(s)) return elementwise_simd<A>(MinifloatMaseKernel(s, p));
    } else {
      const qnum::detail::FloatGrid g = qnum::detail::minifloat_grid(s, p.subnormals);
      if (GridKernel<MinifloatSpec>::supported(p, g))
        return elementwise_simd<A>(GridKernel<MinifloatSpec>(s, p, g, s.specials == Specials::ieee));
    }
    return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
