// Minifloat without implicit bit (`minifloat_denorm`): +-k * 2^(e-M), k in [0, 2^M-1],
// e in [-b, 2^E-1-b]. MASE's `minifloat_denorm_quantizer`.
//
// The value set equals an IEEE-like grid of precision M whose smallest normal binade is
// 2^(-b-1), with subnormal step 2^(-b-M) and max 2^emax (1 - 2^-M); codes alias (k even at
// e equals k/2 at e+1) and encode returns the canonical (largest-k) code.
//
// Sections: spec and validation, reference quantize, encode/decode, tensor quantize and info.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
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

namespace qnum {

// ---- spec and validation ---------------------------------------------------------------

/// 1 sign, E exponent, M = W-E-1 mantissa bits with no implicit leading one.
struct MinifloatDenormSpec {
  static constexpr std::string_view name = "minifloat_denorm";
  static constexpr std::string_view help = "minifloat without implicit bit";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"exponent_bias", "none"}}};
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  int width = 8;
  int exponent_width = 4;
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1

  friend bool operator==(const MinifloatDenormSpec&, const MinifloatDenormSpec&) = default;

  QNUM_HD constexpr int mantissa_bits() const { return width - exponent_width - 1; }
  QNUM_HD constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }

  /// Exact semantics needs at least one mantissa bit; MASE accepts M = 0 (every value
  /// rounds to zero), so mase_compat does too.
  void validate(const Policy& p = exact) const {
    detail::require(width >= 2 && width <= 32, name, ": width ", width, " must be in [2, 32]");
    if (p.is_mase())
      detail::require(exponent_width >= 1 && exponent_width < width, name, ": exponent_width ", exponent_width,
                      " must be in [1, width-1] (width ", width, ")");
    else
      detail::require(exponent_width >= 1 && exponent_width < width - 1, name, ": exponent_width ", exponent_width,
                      " must be in [1, width-2] (width ", width, "; at least one mantissa bit)");
    detail::require(exponent_width <= 8, name, ": exponent_width ", exponent_width, " must be <= 8");
    detail::require(mantissa_bits() <= 23, name, ": mantissa bits ", mantissa_bits(), " must be <= 23");
    const long long b = bias();  // 64-bit: the bias key accepts any int32
    const long long emax = (1LL << exponent_width) - 1 - b;
    detail::require(emax <= 127 && -b - mantissa_bits() >= -149, name, ": exponent_bias ", b, " gives exponents [", -b,
                    ", ", emax, "] with ", mantissa_bits(),
                    " mantissa bits, outside float32 (max exponent 127, smallest step 2^-149)");
  }
  QNUM_HD constexpr int emin() const { return -bias(); }
  QNUM_HD constexpr int emax() const { return (1 << exponent_width) - 1 - bias(); }

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

namespace detail {

/// MASE's `_minifloat_denorm_quantize` on one float32 element: exponent = ceil(log2(v+1e-9)),
/// mantissa clamped to 2^M-1 (no carry, so powers of two come out one step low).
QNUM_HD inline float minifloat_denorm_mase(float x, int exponent_width, int mantissa_bits, int bias) {
  const float emin = static_cast<float>(-bias);
  const float emax = static_cast<float>((1LL << exponent_width) - 1 - bias);
  const float shift = pow2f(mantissa_bits);
  const float sign = torchf::sign(x + 1e-9f);
  const float value = std::fabs(x);
  const float e = torchf::clamp(std::ceil(torchf::log2(value + 1e-9f)), emin, emax);
  const float p2e = torchf::exp2(e);
  const float k = torchf::clamp(torchf::round(value / p2e * shift), 0.0f, shift - 1.0f);
  return torchf::passthrough(sign * p2e * (k / shift), x);
}

/// The value set as an IEEE-like grid (M >= 1): precision M, smallest normal binade
/// 2^(-b-1), subnormal step 2^(-b-M), max 2^emax (1 - 2^-M).
QNUM_HD constexpr FloatGrid minifloat_denorm_grid(const MinifloatDenormSpec& s, Subnormals sub) {
  const int m = s.mantissa_bits();
  return FloatGrid{m, s.emin() - 1, scale2(pow2(m) - 1.0, s.emax() - m), sub == Subnormals::keep};
}

}  // namespace detail

/// The reference: exact = nearest value of the grid under the policy's rounding (with carry,
/// so powers of two are exact), saturating at +-max, sign of zero kept; subnormals=flush
/// flushes results below 2^(-b-1). mase = MASE's float32 arithmetic.
QNUM_HD inline float quantize(const MinifloatDenormSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  if (p.is_mase()) return detail::minifloat_denorm_mase(x, s.exponent_width, s.mantissa_bits(), s.bias());
  if (s.mantissa_bits() == 0) return detail::is_nan(x) ? x : (detail::sign_bit(x) ? -0.0f : 0.0f);  // only zero
  return detail::float_grid_quantize(detail::minifloat_denorm_grid(s, p.subnormals), false, p, x, index);
}

// ---- encode / decode -------------------------------------------------------------------

/// W-bit code (sign | exponent field | k) of `x` quantized under `p` with exact semantics;
/// the canonical code uses the smallest exponent field (largest k). NaN has no code: throws.
inline std::uint32_t encode(const MinifloatDenormSpec& s, float x, const Policy& p = exact) {
  detail::require(!detail::is_nan(x), s.name, ": NaN has no code");
  Policy q = p;
  q.semantics = Semantics::exact;
  const float v = quantize(s, q, x);
  const int m = s.mantissa_bits();
  const std::uint64_t sign = static_cast<std::uint64_t>(detail::sign_bit(v)) << (s.width - 1);
  const double mag = detail::abs(static_cast<double>(v));
  if (mag == 0) return static_cast<std::uint32_t>(sign);
  const int e = std::max(s.emin(), detail::ilog2(mag) + 1);  // mag < 2^e: k < 2^M
  const auto k = static_cast<std::uint64_t>(detail::scale2(mag, m - e));
  return static_cast<std::uint32_t>(sign | (static_cast<std::uint64_t>(e - s.emin()) << m) | k);
}

/// The value of a W-bit code: +-k * 2^(field - b - M).
QNUM_HD inline float decode(const MinifloatDenormSpec& s, std::uint32_t code) {
  const int m = s.mantissa_bits();
  const std::uint64_t c = code & ((std::uint64_t{1} << s.width) - 1);
  const bool neg = (c >> (s.width - 1)) & 1;
  const auto field = static_cast<int>((c >> m) & ((std::uint64_t{1} << s.exponent_width) - 1));
  const auto k = static_cast<double>(c & ((std::uint64_t{1} << m) - 1));
  const auto r = static_cast<float>(detail::scale2(k, field - s.bias() - m));
  return neg ? -r : r;
}

/// Bits per code.
inline int code_bits(const MinifloatDenormSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

/// Facts about the grid (the same for both semantics; mase passes |x| <= 1e-8 through).
inline FormatInfo info(const MinifloatDenormSpec& s, const Policy& p) {
  const int m = s.mantissa_bits();
  FormatInfo f;
  f.bits_per_value = s.width;
  f.min_positive = m == 0 ? 0.0 : detail::pow2(s.emin() - m);
  f.max = m == 0 ? 0.0 : detail::scale2(detail::pow2(m) - 1.0, s.emax() - m);
  // positive values: 2^E binades of 2^(M-1) values each, plus 2^(M-1)-1 below them
  f.distinct_values = m == 0 ? 1.0 : 2.0 * (detail::pow2(s.exponent_width + m - 1) + detail::pow2(m - 1) - 1) + 1;
  f.value_set = detail::concat("+-k * 2^(e-", m, "), k in [0, ", (std::int64_t{1} << m) - 1, "], e in [", s.emin(),
                               ", ", s.emax(), "] (no implicit bit)");
  if (p.is_mase()) f.value_set += "; |x| <= 1e-8 passes through unquantized";
  return f;
}

}  // namespace qnum
