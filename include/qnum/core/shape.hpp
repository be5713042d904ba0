// Tensor shapes and operand roles shared by the format layer and above.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"

namespace qnum {

/// Dimensions of a row-major (C order) tensor, outermost first.
using Shape = std::vector<std::int64_t>;

inline std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Number of elements of a shape (1 for a scalar shape {}). Shapes come from files written by
/// strangers, so the product is overflow-checked: `what` names the source, and the message
/// names the dimension at which the count leaves int64.
inline std::int64_t numel(const Shape& s, std::string_view what = "shape") {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (__builtin_mul_overflow(n, s[i], &n))
      detail::fail(what, ": shape ", to_string(s), " has too many elements (the count overflows 64 bits at dimension ",
                   i, ", of size ", s[i], ")");
  return n;
}

/// Whether `in` broadcast to `out` is `in` repeated: its shape, leading 1s dropped, equals
/// out's trailing dimensions (element i of out reads element i mod numel(in)).
inline bool repeats_as_suffix(const Shape& in, const Shape& out) {
  std::size_t lead = 0;
  while (lead < in.size() && in[lead] == 1) ++lead;
  const std::size_t k = in.size() - lead;
  if (k > out.size()) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (in[lead + i] != out[out.size() - k + i]) return false;
  return true;
}

/// What an operand is to its layer. MASE's block formats infer block shapes from it
/// (activation = skip_first_dim); qnum's exact semantics block along the last axis for all.
enum class Role : std::uint8_t { weight, activation, bias };

inline std::string_view to_string(Role r) {
  switch (r) {
    case Role::weight:
      return "weight";
    case Role::activation:
      return "activation";
    case Role::bias:
      return "bias";
  }
  return "?";
}

inline Role parse_role(std::string_view s) {
  if (s == "weight") return Role::weight;
  if (s == "activation") return Role::activation;
  if (s == "bias") return Role::bias;
  detail::fail("unknown role '", s, "' (allowed: weight, activation, bias)");
}

}  // namespace qnum
