// Base-2 logarithmic format (`log`): +-2^e, e in [-b, 2^(W-1)-1-b], 1 sign + W-1 exponent
// bits, no zero code. MASE's `log_quantizer`.
//
// Sections: spec and validation, reference quantize, encode/decode, tensor quantize and
// info, value type Log<W, Bias, P>, numeric_limits, printing.
#pragma once

#include <array>
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/minifloat.hpp"  // MASE float32 primitives
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/format/value_ops.hpp"

namespace qnum {

// ---- spec and validation ---------------------------------------------------------------

/// Sign + (W-1)-bit exponent field f: value +-2^(f - b); no zero and no special codes.
struct LogSpec {
  static constexpr std::string_view name = "log";
  static constexpr std::string_view help = "sign + power of two";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  int width = 8;
  std::optional<int> exponent_bias;  // none: 2^(W-2)-1

  friend bool operator==(const LogSpec&, const LogSpec&) = default;

  QNUM_HD constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (width - 2)) - 1; }
  QNUM_HD constexpr int emin() const { return -bias(); }
  QNUM_HD constexpr int emax() const { return (1 << (width - 1)) - 1 - bias(); }

  void validate() const {
    detail::require(width >= 2 && width <= 9, name, ": width ", width, " must be in [2, 9]");
    const long long b = bias();  // 64-bit: the bias key accepts any int32
    const long long lo = -b, hi = (1LL << (width - 1)) - 1 - b;
    detail::require(lo >= -149 && hi <= 127, name, ": exponent_bias ", b, " gives exponents [", lo, ", ", hi,
                    "] outside float32's [-149, 127]");
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

namespace detail {

/// MASE's `_log_quantize` on one float32 element: eps = 0.1 * 2^emin (a Python double,
/// rounded once to float32 by torch), sign = sign(x + eps), e = clamp(round(log2(|x| + eps))).
template <class Log2 = torchf::Log2Direct>
QNUM_HD inline float log_quantize_mase(float x, int emin, int emax, const Log2& l2 = {}) {
  const auto eps = static_cast<float>(pow2(emin) * 0.1);
  const float sign = torchf::sign(x + eps);
  const float value = std::fabs(x) + eps;
  const float e = torchf::clamp(l2.round_log2(value), static_cast<float>(emin), static_cast<float>(emax));
  return sign * torchf::exp2(e);
}

/// Exact semantics: the exponent of the result for a finite magnitude `mag` (> 0 or 0).
QNUM_HD inline int log_exponent(const LogSpec& s, const Policy& p, double mag, bool negative, std::uint64_t index) {
  if (mag == 0) return s.emin();  // no zero code: the smallest magnitude
  const int k = ilog2(mag);
  const double r = scale2(mag, -k);  // in [1, 2), exact
  int up = 0;
  if (p.rounding == Rounding::nearest_even || p.rounding == Rounding::nearest_away)
    up = r * r >= 2.0 ? 1 : 0;  // log-domain midpoint 2^(k+0.5); r*r is exact (48 bits), never a tie
  else                          // directed and stochastic: position between 2^k and 2^(k+1), linear
    up = static_cast<int>(round_magnitude(r - 1.0, negative, p.rounding, stochastic_draw(p, index)));
  const int e = k + up;
  return e < s.emin() ? s.emin() : (e > s.emax() ? s.emax() : e);
}

}  // namespace detail

/// The reference: exact = +-2^e with e the log-domain nearest exponent (nearest_even:
/// threshold at the geometric mean 2^(k+0.5)), sign from x's sign bit (+-0 -> +-2^emin),
/// saturating; Inf -> +-2^emax. mase = MASE's float32 arithmetic (0 and tiny negatives ->
/// +2^emin).
QNUM_HD inline float quantize(const LogSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  if (p.is_mase()) return detail::log_quantize_mase(x, s.emin(), s.emax());
  if (detail::is_nan(x)) return x;
  const bool neg = detail::sign_bit(x);
  const int e =
      detail::is_inf(x) ? s.emax() : detail::log_exponent(s, p, detail::abs(static_cast<double>(x)), neg, index);
  const float r = detail::pow2f(e);
  return neg ? -r : r;
}

// ---- encode / decode -------------------------------------------------------------------

/// W-bit code (sign | exponent field e + b) of `x` quantized under `p` with exact semantics.
/// NaN has no code: throws.
inline std::uint32_t encode(const LogSpec& s, float x, const Policy& p = exact) {
  detail::require(!detail::is_nan(x), s.name, ": NaN has no code");
  Policy q = p;
  q.semantics = Semantics::exact;
  const float v = quantize(s, q, x);
  const auto field = static_cast<std::uint32_t>(detail::ilog2(v) + s.bias());
  return (static_cast<std::uint32_t>(detail::sign_bit(v)) << (s.width - 1)) | field;
}

/// The value of a W-bit code: +-2^(field - b).
QNUM_HD inline float decode(const LogSpec& s, std::uint32_t code) {
  const std::uint32_t c = code & ((1u << s.width) - 1);
  const int field = static_cast<int>(c & ((1u << (s.width - 1)) - 1));
  const float r = detail::pow2f(field - s.bias());
  return (c >> (s.width - 1)) ? -r : r;
}

/// Bits per code.
inline int code_bits(const LogSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

/// Facts about the grid (the same for both semantics).
inline FormatInfo info(const LogSpec& s, const Policy& p) {
  FormatInfo f;
  f.bits_per_value = s.width;
  f.min_positive = detail::pow2(s.emin());
  f.max = detail::pow2(s.emax());
  f.distinct_values = detail::pow2(s.width);
  f.value_set = detail::concat("+-2^e, e in [", s.emin(), ", ", s.emax(), "]; no zero");
  if (p.is_mase()) f.value_set += " (0 and tiny negatives -> +2^" + std::to_string(s.emin()) + ")";
  return f;
}

// ---- value type ------------------------------------------------------------------------

/// Compile-time log value: 1 sign + (W-1) exponent bits, bias Bias. Holds the code,
/// converts through the reference under P, rounds arithmetic (in double) back under P.
template <int W, int Bias = (1 << (W - 2)) - 1, Policy P = exact>
class Log : public detail::NumberOps<Log<W, Bias, P>> {
 public:
  static constexpr LogSpec spec{W, Bias};
  static_assert(W >= 2 && W <= 9, "Log: width must be in [2, 9]");
  static_assert(-Bias >= -149 && (1 << (W - 1)) - 1 - Bias <= 127, "Log: bias puts the range outside float32");

  constexpr Log() = default;
  Log(float x) : code_(encode(spec, quantize(spec, P, x), exact)) {}  // NOLINT: implicit like a number
  static constexpr Log from_code(std::uint32_t c) {
    Log f;
    f.code_ = c & ((1u << W) - 1);
    return f;
  }

  constexpr std::uint32_t code() const { return code_; }
  float value() const { return decode(spec, code_); }

  Log operator-() const { return from_code(code_ ^ (1u << (W - 1))); }

 private:
  std::uint32_t code_ = 0;
};

/// Bits with the sign separated: Log<8> 1.0 -> "0b0.0111111".
template <int W, int B, Policy P>
std::string to_binary(const Log<W, B, P>& v) {
  return "0b" + detail::bit_string(v.code() >> (W - 1), 1) + "." + detail::bit_string(v.code(), W - 1);
}

}  // namespace qnum

template <int W, int B, qnum::Policy P>
class std::numeric_limits<qnum::Log<W, B, P>> {
  using T = qnum::Log<W, B, P>;
  static constexpr std::uint32_t max_field = (1u << (W - 1)) - 1;
  static constexpr int emax_ = static_cast<int>(max_field) - B;
  static constexpr std::uint32_t one_code =
      (B >= 0 && B <= static_cast<int>(max_field)) ? static_cast<std::uint32_t>(B) : 0;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = std::denorm_absent;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr int digits = 1;
  static constexpr int min_exponent = 1 - B;  // C++ convention: values are 0.1b * 2^exp
  static constexpr int max_exponent = emax_ + 1;
  static constexpr std::float_round_style round_style =
      P.rounding == qnum::Rounding::nearest_even || P.rounding == qnum::Rounding::nearest_away
          ? std::round_to_nearest
          : (P.rounding == qnum::Rounding::toward_zero ? std::round_toward_zero
             : P.rounding == qnum::Rounding::floor     ? std::round_toward_neg_infinity
             : P.rounding == qnum::Rounding::ceil      ? std::round_toward_infinity
                                                       : std::round_indeterminate);
  /// Smallest positive value 2^-b (there is no zero).
  static constexpr T min() noexcept { return T::from_code(0); }
  static constexpr T max() noexcept { return T::from_code(max_field); }
  static constexpr T lowest() noexcept { return T::from_code((1u << (W - 1)) | max_field); }
  /// 1 (the gap from 1 to 2), or min() when 1 is out of range.
  static constexpr T epsilon() noexcept { return T::from_code(one_code); }
  static constexpr T round_error() noexcept { return T::from_code(one_code); }
  static constexpr T infinity() noexcept { return T::from_code(0); }
  static constexpr T quiet_NaN() noexcept { return T::from_code(0); }
  static constexpr T signaling_NaN() noexcept { return T::from_code(0); }
  static constexpr T denorm_min() noexcept { return T::from_code(0); }
};
