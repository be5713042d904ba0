// IEEE-like minifloat with implicit bit and subnormals (`minifloat_ieee`), plus the OCP FP8
// presets E4M3 (`fp8_e4m3`: NaN only at S.1111.111, max 448) and E5M2 (`fp8_e5m2`: IEEE
// Inf/NaN, max 57344). MASE's `minifloat_ieee_quantizer` has no special values (`specials=none`).
//
// Sections: spec and validation, reference quantize, encode/decode, tensor quantize and
// info, value type Minifloat<E, M, Bias, P>, numeric_limits, printing.
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

/// Which codes of a minifloat are special values.
enum class Specials : std::uint8_t {
  none,  // every code is a finite number (MASE; OCP FP6/FP4)
  ieee,  // all-ones exponent: Inf (zero mantissa) and NaN (OCP E5M2)
  fn,    // finite + NaN: only S.1..1.1..1 is NaN, no Inf (OCP E4M3)
};

inline std::string_view to_string(Specials s) {
  switch (s) {
    case Specials::none: return "none";
    case Specials::ieee: return "ieee";
    case Specials::fn: return "fn";
  }
  return "?";
}
inline Specials parse_specials(std::string_view s, std::string_view family) {
  if (s == "none") return Specials::none;
  if (s == "ieee") return Specials::ieee;
  if (s == "fn") return Specials::fn;
  detail::fail(family, ": specials '", s, "' unknown (allowed: none, ieee, fn)");
}

// ---- spec and validation ---------------------------------------------------------------

/// Minifloat with implicit leading bit: 1 sign, E exponent, M = W-E-1 mantissa bits,
/// exponent bias b (default 2^(E-1)-1), subnormals at the lowest exponent field.
struct MinifloatSpec {
  static constexpr std::string_view name = "minifloat_ieee";
  int width = 8;
  int exponent_width = 4;
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1
  Specials specials = Specials::none;

  friend bool operator==(const MinifloatSpec&, const MinifloatSpec&) = default;

  constexpr int mantissa_bits() const { return width - exponent_width - 1; }
  constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }

  /// OCP FP8 E4M3 (max 448, NaN = S.1111.111, no Inf).
  static MinifloatSpec fp8_e4m3() { return {8, 4, 7, Specials::fn}; }
  /// OCP FP8 E5M2 (max 57344, IEEE Inf and NaN).
  static MinifloatSpec fp8_e5m2() { return {8, 5, 15, Specials::ieee}; }

  void validate() const {
    detail::require(width >= 2 && width <= 32, name, ": width ", width, " must be in [2, 32]");
    detail::require(exponent_width >= 1 && exponent_width < width, name, ": exponent_width ", exponent_width,
                    " must be in [1, width-1] (width ", width, ")");
    detail::require(exponent_width <= 8, name, ": exponent_width ", exponent_width, " must be <= 8");
    detail::require(mantissa_bits() <= 23, name, ": mantissa bits ", mantissa_bits(), " must be <= 23");
    const int b = bias();
    const int emax = (1 << exponent_width) - 1 - b;
    detail::require(emax <= 127 && 1 - b - mantissa_bits() >= -149, name, ": exponent_bias ", b,
                    " puts the range outside float32");
    detail::require(specials == Specials::none || mantissa_bits() >= (specials == Specials::fn ? 1 : 0), name,
                    ": specials need mantissa bits");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total bits W"},
            {"exponent_width", "4", "exponent bits E (mantissa M = W-E-1)"},
            {"exponent_bias", "none", "bias b; none = 2^(E-1)-1"},
            {"specials", "none", "none (all codes finite), ieee (Inf/NaN), fn (NaN only at all-ones)"}};
  }
  static MinifloatSpec from_keys(KeyValues& kv) {
    MinifloatSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    s.exponent_bias = kv.take_opt_int32({"exponent_bias"});
    if (auto sp = kv.take({"specials"})) s.specials = parse_specials(*sp, name);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias", exponent_bias);
    if (specials != Specials::none) w.add("specials", to_string(specials));
  }
};

// ---- reference quantize ----------------------------------------------------------------

/// The reference: exact = nearest value of the grid under the policy's rounding, carrying
/// into the next binade, saturating (or Inf where the format has it and overflow=infinity);
/// mase = MASE's float32 arithmetic (see docs/formats.md).
inline float quantize(const MinifloatSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  (void)s; (void)p; (void)x; (void)index;
  detail::fail(s.name, ": not implemented yet");
}

// ---- encode / decode -------------------------------------------------------------------

inline std::uint32_t encode(const MinifloatSpec& s, float x, const Policy& p = exact) {
  (void)x; (void)p;
  detail::fail(s.name, ": encode not implemented yet");
}
inline float decode(const MinifloatSpec& s, std::uint32_t code) {
  (void)code;
  detail::fail(s.name, ": decode not implemented yet");
}
inline int code_bits(const MinifloatSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

inline void quantize(const MinifloatSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  detail::quantize_each(in, out, [&](float x, std::uint64_t i) { return quantize(s, p, x, i); });
}

inline FormatInfo info(const MinifloatSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
