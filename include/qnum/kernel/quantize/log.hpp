// log on vector lanes. exact: nearest_even / nearest_away, bias <= 126 — the log-domain
// midpoint test r*r >= 2 is a mantissa threshold (r >= sqrt 2). mase: bias <= 126, round(log2)
// from the bits. Other policies: the scalar reference per element, threaded.
#pragma once

#include <cstdint>

#include "qnum/format/log.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// log, both semantics (Mase = p.is_mase(): a compile-time choice, so that the vector loop
/// holds one of them with its constants in registers).
template <bool Mase>
struct LogKernel {
  static constexpr bool mase = Mase;
  LogSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float eps;

  LogKernel(const LogSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(s.emin()),
        emax(s.emax()),
        eps(static_cast<float>(qnum::detail::pow2(s.emin()) * 0.1)) {
    if (mase) lk = Log2Lookup(Log2Op::nearest, emin, emax);
  }
  static bool supported(const LogSpec& s, const Policy& p) {
    return s.emin() >= -126 &&
           (p.is_mase() || p.rounding == Rounding::nearest_even || p.rounding == Rounding::nearest_away);
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    if constexpr (mase) {
      const bi<A> f = log2_exponent_field<A>(xsimd::abs(x) + bf<A>(eps), lk);
      return xsimd::select(xsimd::isnan(x), x, signed_pow2_field_i<A>(x + bf<A>(eps), f));
    }
    const bi<A> bits = as_int<A>(x);
    const bi<A> a = bits & bi<A>(0x7fffffff);
    const bi<A> up = select_i<A>((a & bi<A>(0x7fffff)) >= bi<A>(kSqrt2Mantissa), bi<A>(1), bi<A>(0));
    // field 0 (zero, subnormals) gives e <= -126 <= emin: clamped to emin as the reference.
    const bi<A> e = clamp_i<A>((a >> 23) - bi<A>(127) + up, emin, emax);
    const bf<A> r = as_float<A>(((e + bi<A>(127)) << 23) | (bits & bi<A>(static_cast<std::int32_t>(0x80000000u))));
    return xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// LogSpec's row of the kernel table.
template <>
struct FamilyKernel<LogSpec> {
  template <class A>
  static QuantizePlan plan(const LogSpec& s, const Policy& p, const QuantizeCall&) {
    if (LogKernel<true>::supported(s, p))
      return p.is_mase() ? elementwise_simd<A>(LogKernel<true>(s, p)) : elementwise_simd<A>(LogKernel<false>(s, p));
    return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
