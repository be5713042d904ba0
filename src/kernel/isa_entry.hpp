// Shared between the per-ISA translation units and the dispatcher: which levels this
// compiler can build, and the entry points each level's translation unit defines.
#pragma once

#include <span>
#include <string_view>

#include "qnum/core/shape.hpp"
#include "qnum/format/format.hpp"
#include "qnum/kernel/quantize_path.hpp"

// The avx2/avx512 levels exist on x86-64 (GCC or Clang: -march=x86-64-v3 / -v4).
#if defined(__x86_64__) && defined(__GNUC__)
#define QNUM_DISPATCH_X86 1
#else
#define QNUM_DISPATCH_X86 0
#endif

namespace qnum::kernel::dispatch::detail {

struct IsaEntry {
  void (*quantize)(const Format&, std::span<const float>, std::span<float>, const Shape&, Role);
  QuantizePath (*path)(const Format&, const Shape&, Role);
  std::string_view (*arch_name)();
};

IsaEntry baseline_entry();
#if QNUM_DISPATCH_X86
IsaEntry avx2_entry();
IsaEntry avx512_entry();
#endif

}  // namespace qnum::kernel::dispatch::detail
