// minifloat_denorm on vector lanes: as minifloat_ieee (exact needs >= 1 mantissa bit;
// mase: MASE's ceil(log2) exponent, mantissa clamped, pass-through). Other policies: the scalar
// reference per element, threaded.
#pragma once

#include <cstdint>

#include "qnum/format/minifloat_denorm.hpp"
#include "qnum/kernel/quantize/grid.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// MASE's minifloat_denorm (ceil log2 exponent, mantissa clamped, pass-through).
struct DenormMaseKernel {
  MinifloatDenormSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float shift, inv_shift;

  DenormMaseKernel(const MinifloatDenormSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(s.emin()),
        emax(s.emax()),
        lk(Log2Op::ceil, emin, emax),
        shift(qnum::detail::pow2f(s.mantissa_bits())),
        inv_shift(qnum::detail::pow2f(-s.mantissa_bits())) {}
  static bool supported(const MinifloatDenormSpec& s) { return s.emin() >= -126; }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> sign = sign_t<A>(x + bf<A>(1e-9f));
    const bf<A> value = xsimd::abs(x);
    const bi<A> f = log2_exponent_field<A>(value + bf<A>(1e-9f), lk);  // e + 127
    const bf<A> p2e = as_float<A>(f << 23);
    const bf<A> k = clamp_t<A>(xsimd::nearbyint((value * pow2_neg_field_i<A>(f)) * bf<A>(shift)), 0.0f, shift - 1.0f);
    const bf<A> q = sign * p2e * (k * bf<A>(inv_shift));
    const bf<A> c = xsimd::select(value <= bf<A>(1e-8f), bf<A>(1.0f), bf<A>(0.0f));
    return (bf<A>(1.0f) - c) * q + c * x;
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// MinifloatDenormSpec's row of the kernel table.
template <>
struct FamilyKernel<MinifloatDenormSpec> {
  template <class A>
  static QuantizePlan plan(const MinifloatDenormSpec& s, const Policy& p, const QuantizeCall&) {
    if (p.is_mase()) {
      if (DenormMaseKernel::supported(s)) return elementwise_simd<A>(DenormMaseKernel(s, p));
    } else if (s.mantissa_bits() >= 1) {
      const qnum::detail::FloatGrid g = qnum::detail::minifloat_denorm_grid(s, p.subnormals);
      if (GridKernel<MinifloatDenormSpec>::supported(p, g))
        return elementwise_simd<A>(GridKernel<MinifloatDenormSpec>(s, p, g, false));
    }
    return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
