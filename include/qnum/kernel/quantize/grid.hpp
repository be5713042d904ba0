// Exact semantics on an IEEE-like grid in float32 bits, nearest even: minifloat_ieee,
// minifloat_denorm, the MX elements and block_minifloat's per-bias grids. Round to nearest even
// on the float's bits (add half-1+lsb, mask) carries into the next binade like hardware FP8
// conversion; below the smallest normal a magic constant C = 2^(emin - P + 24) makes float
// addition round onto the subnormal step.
#pragma once

#include <cstdint>

#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/kernel/quantize/simd.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Exact semantics on an IEEE-like grid (minifloat_ieee, minifloat_denorm), nearest even.
template <class Spec>
struct GridKernel {
  Spec spec;
  Policy policy;
  std::int32_t shift;      // float mantissa bits dropped in the normal range: 24 - precision
  std::int32_t emin_bits;  // bits of 2^emin
  float magic;             // 2^(emin - precision + 24): rounds onto the subnormal step
  float maxf, min_normal;
  bool inf_code, overflow_inf, flush;

  GridKernel(const Spec& s, const Policy& p, const qnum::detail::FloatGrid& g, bool inf)
      : spec(s),
        policy(p),
        shift(24 - g.precision),
        emin_bits((g.emin + 127) << 23),
        magic(qnum::detail::pow2f(g.emin - g.precision + 24)),
        maxf(static_cast<float>(g.max)),
        min_normal(qnum::detail::pow2f(g.emin)),
        inf_code(inf),
        overflow_inf(inf && p.overflow == Overflow::infinity),
        flush(!g.subnormals) {}

  static bool supported(const Policy& p, const qnum::detail::FloatGrid& g) {
    return !p.is_mase() && p.rounding == Rounding::nearest_even && g.emin >= -126 && g.precision >= 1 &&
           g.precision <= 24;
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bi<A> bits = as_int<A>(x);
    const bi<A> a = bits & bi<A>(0x7fffffff);
    const bi<A> sgn = bits & bi<A>(static_cast<std::int32_t>(0x80000000u));
    bi<A> r = a;
    if (shift > 0) {
      // the kept significand's lowest bit (with precision 1 it is the implicit one)
      const bi<A> lsb = shift >= 23 ? bi<A>(1) : ((a >> shift) & bi<A>(1));
      r = (a + bi<A>((1 << (shift - 1)) - 1) + lsb) & bi<A>(~((1 << shift) - 1));
    }
    const bf<A> mag = as_float<A>(a);
    const bf<A> sub = (mag + bf<A>(magic)) - bf<A>(magic);
    bf<A> q = xsimd::select(to_fmask<A>(a < bi<A>(emin_bits)), sub, as_float<A>(r));
    if (flush) q = xsimd::select(q < bf<A>(min_normal), bf<A>(0.0f), q);
    const bf<A> big = bf<A>(overflow_inf ? qnum::detail::kInf : maxf);
    q = xsimd::select(q > bf<A>(maxf), big, q);
    q = xsimd::select(mag == bf<A>(qnum::detail::kInf), bf<A>(inf_code ? qnum::detail::kInf : maxf), q);
    const bf<A> res = as_float<A>(as_int<A>(q) | sgn);
    return xsimd::select(xsimd::isnan(x), x, res);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
