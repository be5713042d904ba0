// Which implementation a tensor quantize runs (kernel::quantize_path tells it for a format).
// Kept apart from quantize.hpp because it holds no SIMD code: the run-time dispatch
// (dispatch.hpp) shares this one type across its per-ISA translation units.
#pragma once

#include <cstdint>
#include <string_view>

namespace qnum::kernel {

/// Which implementation `quantize` uses for a format.
enum class QuantizePath : std::uint8_t {
  simd,       // xsimd vector loop, threaded
  scalar,     // the scalar reference per element, threaded
  reference,  // Format::quantize (tensor-level reference), single thread
};

inline std::string_view to_string(QuantizePath p) {
  switch (p) {
    case QuantizePath::simd:
      return "simd";
    case QuantizePath::scalar:
      return "scalar";
    case QuantizePath::reference:
      return "reference";
  }
  return "?";
}

}  // namespace qnum::kernel
