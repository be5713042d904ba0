// Minifloat without implicit bit (`minifloat_denorm`): +-k * 2^(e-M), k in [0, 2^M-1],
// e in [-b, 2^E-1-b]. MASE's `minifloat_denorm_quantizer`.
//
// Sections: spec and validation, reference quantize, encode/decode, tensor quantize and info.
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

// ---- spec and validation ---------------------------------------------------------------

/// 1 sign, E exponent, M = W-E-1 mantissa bits with no implicit leading one.
struct MinifloatDenormSpec {
  static constexpr std::string_view name = "minifloat_denorm";
  int width = 8;
  int exponent_width = 4;
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1

  friend bool operator==(const MinifloatDenormSpec&, const MinifloatDenormSpec&) = default;

  constexpr int mantissa_bits() const { return width - exponent_width - 1; }
  constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }

  void validate() const {
    detail::require(width >= 3 && width <= 32, name, ": width ", width, " must be in [3, 32]");
    detail::require(exponent_width >= 1 && exponent_width < width - 1, name, ": exponent_width ", exponent_width,
                    " must be in [1, width-2] (width ", width, "; at least one mantissa bit)");
    detail::require(exponent_width <= 8, name, ": exponent_width ", exponent_width, " must be <= 8");
    detail::require(mantissa_bits() <= 23, name, ": mantissa bits ", mantissa_bits(), " must be <= 23");
    const int b = bias();
    detail::require((1 << exponent_width) - 1 - b <= 127 && -b - mantissa_bits() >= -149, name, ": exponent_bias ",
                    b, " puts the range outside float32");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total bits W"},
            {"exponent_width", "4", "exponent bits E (mantissa M = W-E-1, no implicit bit)"},
            {"exponent_bias", "none", "bias b; none = 2^(E-1)-1"}};
  }
  static MinifloatDenormSpec from_keys(KeyValues& kv) {
    MinifloatDenormSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    s.exponent_bias = kv.take_opt_int32({"exponent_bias"});
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias", exponent_bias);
  }
};

// ---- reference quantize ----------------------------------------------------------------

inline float quantize(const MinifloatDenormSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  (void)p; (void)x; (void)index;
  detail::fail(s.name, ": not implemented yet");
}

// ---- encode / decode -------------------------------------------------------------------

inline std::uint32_t encode(const MinifloatDenormSpec& s, float x, const Policy& p = exact) {
  (void)x; (void)p;
  detail::fail(s.name, ": encode not implemented yet");
}
inline float decode(const MinifloatDenormSpec& s, std::uint32_t code) {
  (void)code;
  detail::fail(s.name, ": decode not implemented yet");
}
inline int code_bits(const MinifloatDenormSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

inline void quantize(const MinifloatDenormSpec& s, const Policy& p, std::span<const float> in,
                     std::span<float> out, const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  detail::quantize_each(in, out, [&](float x, std::uint64_t i) { return quantize(s, p, x, i); });
}

inline FormatInfo info(const MinifloatDenormSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
