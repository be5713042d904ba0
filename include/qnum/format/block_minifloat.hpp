// Block minifloat (`block_minifloat`): minifloat_ieee elements with a shared exponent bias
// per block (bw bits). MASE's `block_minifloat_quantizer`.
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

struct BlockMinifloatSpec {
  static constexpr std::string_view name = "block_minifloat";
  int width = 8;
  int exponent_width = 4;
  int exponent_bias_width = 8;
  std::vector<int> block_size{16};

  friend bool operator==(const BlockMinifloatSpec&, const BlockMinifloatSpec&) = default;

  constexpr int mantissa_bits() const { return width - exponent_width - 1; }

  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width < width, name, ": exponent_width ", exponent_width,
                    " must be in [1, width-1] (width ", width, ")");
    detail::require(exponent_width <= 6, name, ": exponent_width ", exponent_width, " must be <= 6");
    detail::require(exponent_bias_width >= 1 && exponent_bias_width <= 8, name, ": exponent_bias_width ",
                    exponent_bias_width, " must be in [1, 8]");
    detail::require(!block_size.empty() && block_size.size() <= 3, name, ": block_size must have 1 to 3 entries");
    for (int b : block_size)
      detail::require(b >= 1 || b == -1, name, ": block_size ", b, " must be >= 1 (or -1 for a whole dim)");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total element bits W"},
            {"exponent_width", "4", "element exponent bits E"},
            {"exponent_bias_width", "8", "bits of the shared per-block bias"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims"}};
  }
  static BlockMinifloatSpec from_keys(KeyValues& kv) {
    BlockMinifloatSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    s.exponent_bias_width = kv.take_int({"exponent_bias_width"}, 8);
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias_width", exponent_bias_width);
    w.add("block_size", block_size);
  }
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const BlockMinifloatSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
