// Block log (`block_log`): log-format elements with a shared exponent bias per block.
// MASE's `block_log_quantizer`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_io.hpp"

namespace qnum {

struct BlockLogSpec {
  static constexpr std::string_view name = "block_log";
  int width = 8;
  int exponent_bias_width = 8;
  std::vector<int> block_size{16};

  friend bool operator==(const BlockLogSpec&, const BlockLogSpec&) = default;

  void validate() const {
    detail::require(width >= 2 && width <= 9, name, ": width ", width, " must be in [2, 9]");
    detail::require(exponent_bias_width >= 1 && exponent_bias_width <= 8, name, ": exponent_bias_width ",
                    exponent_bias_width, " must be in [1, 8]");
    detail::require(!block_size.empty() && block_size.size() <= 3, name, ": block_size must have 1 to 3 entries");
    for (int b : block_size)
      detail::require(b >= 1 || b == -1, name, ": block_size ", b, " must be >= 1 (or -1 for a whole dim)");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total element bits W (1 sign + W-1 exponent bits)"},
            {"exponent_bias_width", "8", "bits of the shared per-block bias"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims"}};
  }
  static BlockLogSpec from_keys(KeyValues& kv) {
    BlockLogSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_bias_width = kv.take_int({"exponent_bias_width"}, 8);
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_bias_width", exponent_bias_width).add("block_size", block_size);
  }
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const BlockLogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const BlockLogSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
