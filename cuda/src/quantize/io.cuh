// The CPU's argument checks for device pointers, shared by the tensor-level families
// (internal; not installed).
#pragma once

#include <cstddef>
#include <string_view>

#include "qnum/core/error.hpp"
#include "qnum/core/shape.hpp"

namespace qnum::cuda::detail {

/// The CPU's check_tensor_io for device pointers: no negative dimension, pointers present when
/// there are elements; returns numel.
inline std::size_t check_io(std::string_view family, const float* in, const float* out, const Shape& shape) {
  for (auto d : shape) qnum::detail::require(d >= 0, family, ": negative dimension in shape ", to_string(shape));
  const auto n = static_cast<std::size_t>(numel(shape));
  qnum::detail::require(n == 0 || (in != nullptr && out != nullptr), family, ": null device pointer for ", n,
                        " elements (shape ", to_string(shape), ")");
  return n;
}

/// numel(shape) after the CPU's shape check (no negative dimension): the binary family and
/// ternary, whose pointer check (require_pointers) comes after their own argument checks.
inline std::size_t checked_numel(std::string_view family, const Shape& shape) {
  for (auto d : shape) qnum::detail::require(d >= 0, family, ": negative dimension in shape ", to_string(shape));
  return static_cast<std::size_t>(numel(shape));
}

inline void require_pointers(std::string_view family, std::size_t n, const float* in, const float* out) {
  qnum::detail::require(n == 0 || (in != nullptr && out != nullptr), "qnum::cuda::quantize(", family,
                        "): null device pointer with ", n, " elements to process");
}

}  // namespace qnum::cuda::detail
