// binary on vector lanes: bipolar deterministic (both semantics). Bipolar stochastic (exact:
// Philox keyed by the flat index) runs the scalar reference per element, threaded; scaled
// binary (per-channel mean) and MASE's stochastic (torch's rand stream) the tensor reference.
#pragma once

#include <cstdint>

#include "qnum/format/binary.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// binary, bipolar deterministic: x >= 0 -> +1 else -1; NaN stays NaN (exact) or -1 (mase).
struct BinaryKernel {
  BinarySpec spec;
  Policy policy;
  bool mase;
  BinaryKernel(const BinarySpec& s, const Policy& p) : spec(s), policy(p), mase(p.is_mase()) {}
  static bool supported(const BinarySpec& s) { return s.bipolar && !s.stochastic; }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> r = xsimd::select(x >= bf<A>(0.0f), bf<A>(1.0f), bf<A>(-1.0f));
    return mase ? r : xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// BinarySpec's row of the kernel table.
template <>
struct FamilyKernel<BinarySpec> {
  template <class A>
  static QuantizePlan plan(const BinarySpec& s, const Policy& p, const QuantizeCall&) {
    if (BinaryKernel::supported(s)) return elementwise_simd<A>(BinaryKernel(s, p));
    if (s.bipolar && !(p.is_mase() && s.stochastic))
      return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
    return {};  // scaled (per-channel mean) or torch's rand stream
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
