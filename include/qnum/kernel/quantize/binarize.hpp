// binarize: the scalar reference per element, keyed by the flat index, threaded.
#pragma once

#include <cstdint>

#include "qnum/format/binarize.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// BinarizeSpec's row of the kernel table.
template <>
struct FamilyKernel<BinarizeSpec> {
  template <class A>
  static QuantizePlan plan(const BinarizeSpec& s, const Policy& p, const QuantizeCall&) {
    return elementwise_scalar([&s, &p](float x, std::uint64_t i) { return qnum::quantize(s, p, x, i); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
