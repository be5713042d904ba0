// Fixed point (`integer`, alias `fixed`): k * 2^-F, k in [-2^(W-1), 2^(W-1)-1] (signed) or
// [0, 2^W-1] (unsigned). MASE's `integer_quantizer` / `integer_floor_quantizer`.
//
// Sections: spec and validation, reference quantize, encode/decode, tensor quantize and
// info, value type Fixed<W, F, Signed, P>, numeric_limits, printing.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/format/value_ops.hpp"

namespace qnum {

// ---- spec and validation ---------------------------------------------------------------

/// Fixed-point format: `width` bits in total, `frac_width` of them after the binary point
/// (may be negative or exceed the width: the scale is just 2^-frac_width).
struct FixedSpec {
  static constexpr std::string_view name = "integer";
  static constexpr std::string_view help = "fixed point k*2^-F (alias fixed; integer_floor = rounding=floor)";
  static constexpr std::array<std::string_view, 2> aliases{"fixed", "integer_floor"};
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  static constexpr bool overflow_wrap = true;  // two's-complement wrap-around
  static constexpr bool mase_floor = true;     // MASE's integer_floor
  int width = 8;
  int frac_width = 4;
  bool is_signed = true;

  static constexpr int max_width = 32;
  static constexpr int max_abs_frac = 64;

  friend bool operator==(const FixedSpec&, const FixedSpec&) = default;

  void validate() const {
    detail::require(width >= 1 && width <= max_width, name, ": width ", width, " must be in [1, ", max_width, "]");
    detail::require(frac_width >= -max_abs_frac && frac_width <= max_abs_frac, name, ": frac_width ", frac_width,
                    " must be in [", -max_abs_frac, ", ", max_abs_frac, "]");
  }
  /// Smallest and largest integer mantissa k.
  QNUM_HD constexpr std::int64_t kmin() const { return is_signed ? -(std::int64_t{1} << (width - 1)) : 0; }
  QNUM_HD constexpr std::int64_t kmax() const {
    return is_signed ? (std::int64_t{1} << (width - 1)) - 1 : (std::int64_t{1} << width) - 1;
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total bits W (1..32)"},
            {"frac_width", "width/2", "fraction bits F (-64..64); value = k * 2^-F"},
            {"is_signed", "true", "two's complement (true) or unsigned (false)"},
            {"floor", "false", "round toward -inf (MASE's integer_floor); same as rounding=floor"}};
  }
  /// Parses MASE's keys; `floor=true` sets *floor_rounding.
  static FixedSpec from_keys(KeyValues& kv, bool* floor_rounding = nullptr) {
    FixedSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.frac_width = kv.take_int({"frac_width"}, s.width / 2);
    s.is_signed = kv.take_bool({"is_signed", "signed"}, true);
    const bool fl = kv.take_bool({"floor"}, false);
    if (floor_rounding) *floor_rounding = fl;
    return s;
  }
  /// Format::parse's entry: `floor=true` and the name integer_floor set floor rounding.
  static FixedSpec from_keys(KeyValues& kv, std::string_view name_used, Policy& policy) {
    bool floor_key = false;
    FixedSpec s = from_keys(kv, &floor_key);
    if (floor_key || name_used == "integer_floor") policy.rounding = Rounding::floor;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("frac_width", frac_width);
    if (!is_signed) w.add("is_signed", false);
  }
};

// ---- reference quantize ----------------------------------------------------------------

namespace detail {

/// MASE: clamp(round(x * 2^F), kmin, kmax) / 2^F evaluated in float32, as torch does it
/// (the clamp bounds are converted to float32, so W = 32 saturates at 2^31, not 2^31-1).
QNUM_HD inline float fixed_quantize_mase(const FixedSpec& s, Rounding r, float x) {
  const float scale = pow2f(s.frac_width);
  const float v = x * scale;
  float k = static_cast<float>(round_int(static_cast<double>(v), r));  // exact: v is a float
  if (is_nan(v)) k = v;
  const float lo = static_cast<float>(s.kmin()), hi = static_cast<float>(s.kmax());
  if (k < lo) k = lo;
  if (k > hi) k = hi;
  return k / scale;
}

/// The integer mantissa k of the correctly rounded, overflow-resolved value (x not NaN).
QNUM_HD inline std::int64_t fixed_mantissa(const FixedSpec& s, const Policy& p, float x, std::uint64_t index) {
  const auto lo = static_cast<double>(s.kmin()), hi = static_cast<double>(s.kmax());
  if (is_inf(x)) return x > 0 ? s.kmax() : s.kmin();
  const double v = scale2(static_cast<double>(x), s.frac_width);  // exact
  double k = round_int(v, p.rounding, stochastic_draw(p, index));
  if (k >= lo && k <= hi) return static_cast<std::int64_t>(k);
  if (p.overflow == Overflow::wrap) {
    const double m = pow2(s.width);
    double w = std::fmod(k - lo, m);  // exact
    if (w < 0) w += m;
    return static_cast<std::int64_t>(w + lo);
  }
  return k < lo ? s.kmin() : s.kmax();
}

}  // namespace detail

/// The reference: `x` rounded onto the fixed-point grid under `policy`. NaN stays NaN;
/// +-Inf saturate. `index` keys stochastic rounding (the element's flat position).
QNUM_HD inline float quantize(const FixedSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  if (p.is_mase()) return detail::fixed_quantize_mase(s, p.rounding, x);
  if (detail::is_nan(x)) return x;
  const auto k = detail::fixed_mantissa(s, p, x, index);
  return static_cast<float>(detail::scale2(static_cast<double>(k), -s.frac_width));
}

// ---- encode / decode -------------------------------------------------------------------

/// W-bit code (two's complement when signed) of `x` quantized under `p` (exact by default).
/// NaN has no code: throws.
inline std::uint32_t encode(const FixedSpec& s, float x, const Policy& p = exact) {
  detail::require(!detail::is_nan(x), s.name, ": NaN has no fixed-point code");
  Policy q = p;
  q.semantics = Semantics::exact;
  const auto k = detail::fixed_mantissa(s, q, x, 0);
  const std::uint64_t mask = s.width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << s.width) - 1;
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(k) & mask);
}

/// The value of a W-bit code.
QNUM_HD inline float decode(const FixedSpec& s, std::uint32_t code) {
  std::int64_t k = static_cast<std::int64_t>(code & ((std::uint64_t{1} << s.width) - 1));
  if (s.is_signed && (k >> (s.width - 1)) & 1) k -= std::int64_t{1} << s.width;
  return static_cast<float>(detail::scale2(static_cast<double>(k), -s.frac_width));
}

/// Bits per code.
inline int code_bits(const FixedSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

inline FormatInfo info(const FixedSpec& s, const Policy& p) {
  FormatInfo f;
  f.bits_per_value = s.width;
  f.min_positive = detail::pow2(-s.frac_width);
  double hi = static_cast<double>(s.kmax());
  if (p.is_mase()) hi = static_cast<double>(static_cast<float>(s.kmax()));
  f.max = detail::scale2(hi, -s.frac_width);
  f.distinct_values = detail::pow2(s.width);
  f.value_set = detail::concat("k * 2^", -s.frac_width, ", k in [", s.kmin(), ", ", s.kmax(), "]");
  return f;
}

// ---- value type ------------------------------------------------------------------------

/// Compile-time fixed-point value: holds the integer mantissa, converts through the
/// reference quantizer, and rounds arithmetic results back under policy P.
template <int W, int F, bool Signed = true, Policy P = exact>
class Fixed : public detail::NumberOps<Fixed<W, F, Signed, P>> {
 public:
  static constexpr FixedSpec spec{W, F, Signed};
  static_assert(W >= 1 && W <= FixedSpec::max_width, "Fixed: width must be in [1, 32]");
  static_assert(F >= -FixedSpec::max_abs_frac && F <= FixedSpec::max_abs_frac, "Fixed: frac width out of range");

  constexpr Fixed() = default;
  Fixed(float x) : code_(encode(spec, quantize(spec, P, x), exact)) {}  // NOLINT: implicit like a number
  static constexpr Fixed from_code(std::uint32_t c) {
    Fixed f;
    f.code_ = c & static_cast<std::uint32_t>((std::uint64_t{1} << W) - 1);
    return f;
  }

  constexpr std::uint32_t code() const { return code_; }
  float value() const { return decode(spec, code_); }

  Fixed operator-() const { return Fixed(-value()); }

 private:
  std::uint32_t code_ = 0;
};

/// Bits of a fixed-point value with the binary point shown: Fixed<8,4> 1.5 -> "0001.1000".
template <int W, int F, bool S, Policy P>
std::string to_binary(const Fixed<W, F, S, P>& v) {
  std::string bits = detail::bit_string(v.code(), W);
  if (F > 0 && F < W) bits.insert(static_cast<std::size_t>(W - F), ".");
  return "0b" + bits;
}

}  // namespace qnum

template <int W, int F, bool S, qnum::Policy P>
class std::numeric_limits<qnum::Fixed<W, F, S, P>> {
  using T = qnum::Fixed<W, F, S, P>;
  static constexpr qnum::FixedSpec spec_{W, F, S};

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = S;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = P.overflow == qnum::Overflow::wrap;
  static constexpr int radix = 2;
  static constexpr int digits = S ? W - 1 : W;
  static constexpr std::float_round_style round_style =
      P.rounding == qnum::Rounding::nearest_even || P.rounding == qnum::Rounding::nearest_away
          ? std::round_to_nearest
          : (P.rounding == qnum::Rounding::toward_zero ? std::round_toward_zero
             : P.rounding == qnum::Rounding::floor     ? std::round_toward_neg_infinity
             : P.rounding == qnum::Rounding::ceil      ? std::round_toward_infinity
                                                       : std::round_indeterminate);
  /// Smallest positive value (as for floating types): 2^-F.
  static constexpr T min() noexcept { return T::from_code(1); }
  static constexpr T max() noexcept { return T::from_code(static_cast<std::uint32_t>(spec_.kmax())); }
  static constexpr T lowest() noexcept { return T::from_code(static_cast<std::uint32_t>(spec_.kmin())); }
  static constexpr T epsilon() noexcept { return T::from_code(1); }
  static constexpr T round_error() noexcept { return T::from_code(0); }
  static constexpr T denorm_min() noexcept { return T::from_code(1); }
};
