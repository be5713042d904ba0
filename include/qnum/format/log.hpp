// Base-2 logarithmic format (`log`): +-2^e, e in [-b, 2^(W-1)-1-b], 1 sign + W-1 exponent
// bits, no zero code. MASE's `log_quantizer`.
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

struct LogSpec {
  static constexpr std::string_view name = "log";
  int width = 8;
  std::optional<int> exponent_bias;  // none: 2^(W-2)-1

  friend bool operator==(const LogSpec&, const LogSpec&) = default;

  constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (width - 2)) - 1; }
  constexpr int emin() const { return -bias(); }
  constexpr int emax() const { return (1 << (width - 1)) - 1 - bias(); }

  void validate() const {
    detail::require(width >= 2 && width <= 9, name, ": width ", width, " must be in [2, 9]");
    detail::require(emin() >= -149 && emax() <= 127, name, ": exponent_bias ", bias(), " gives exponents [",
                    emin(), ", ", emax(), "] outside float32's [-149, 127]");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total bits W: 1 sign + W-1 exponent bits"},
            {"exponent_bias", "none", "bias b; none = 2^(W-2)-1; exponents [-b, 2^(W-1)-1-b]"}};
  }
  static LogSpec from_keys(KeyValues& kv) {
    LogSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_bias = kv.take_opt_int32({"exponent_bias"});
    return s;
  }
  void write_keys(KeyWriter& w) const { w.add("width", width).add("exponent_bias", exponent_bias); }
};

// ---- reference quantize ----------------------------------------------------------------

inline float quantize(const LogSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  (void)p; (void)x; (void)index;
  detail::fail(s.name, ": not implemented yet");
}

// ---- encode / decode -------------------------------------------------------------------

inline std::uint32_t encode(const LogSpec& s, float x, const Policy& p = exact) {
  (void)x; (void)p;
  detail::fail(s.name, ": encode not implemented yet");
}
inline float decode(const LogSpec& s, std::uint32_t code) {
  (void)code;
  detail::fail(s.name, ": decode not implemented yet");
}
inline int code_bits(const LogSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

inline void quantize(const LogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  detail::quantize_each(in, out, [&](float x, std::uint64_t i) { return quantize(s, p, x, i); });
}

inline FormatInfo info(const LogSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
