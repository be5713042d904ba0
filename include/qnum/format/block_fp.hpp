// Block floating point (`block_fp`, MSFP): a shared exponent per block and sign-magnitude
// mantissas of W-1 bits. MASE's `block_fp_quantizer`.
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

struct BlockFPSpec {
  static constexpr std::string_view name = "block_fp";
  int width = 8;           // sign + mantissa bits (M = W-1)
  int exponent_width = 8;  // shared exponent bits E
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1
  std::vector<int> block_size{16};

  friend bool operator==(const BlockFPSpec&, const BlockFPSpec&) = default;

  constexpr int mantissa_bits() const { return width - 1; }
  constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }

  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width <= 8, name, ": exponent_width ", exponent_width,
                    " must be in [1, 8]");
    const int b = bias();
    detail::require((1 << exponent_width) - 1 - b <= 127 && -b - mantissa_bits() >= -149, name,
                    ": exponent_bias ", b, " puts the range outside float32");
    detail::require(!block_size.empty() && block_size.size() <= 3, name, ": block_size must have 1 to 3 entries");
    for (int b2 : block_size)
      detail::require(b2 >= 1 || b2 == -1, name, ": block_size ", b2, " must be >= 1 (or -1 for a whole dim)");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "sign + mantissa bits W (mantissa M = W-1)"},
            {"exponent_width", "8", "shared exponent bits E"},
            {"exponent_bias", "none", "bias b; none = 2^(E-1)-1"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims (e.g. 1x16)"}};
  }
  static BlockFPSpec from_keys(KeyValues& kv) {
    BlockFPSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 8);
    s.exponent_bias = kv.take_opt_int32({"exponent_bias"});
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias", exponent_bias);
    w.add("block_size", block_size);
  }
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const BlockFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const BlockFPSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
