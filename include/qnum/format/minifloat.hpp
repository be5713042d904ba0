// IEEE-like minifloat with implicit bit and subnormals (`minifloat_ieee`), plus the OCP FP8
// presets E4M3 (`fp8_e4m3`: NaN only at S.1111.111, max 448) and E5M2 (`fp8_e5m2`: IEEE
// Inf/NaN, max 57344). MASE's `minifloat_ieee_quantizer` has no special values (`specials=none`).
//
// Sections: spec and validation, MASE float32 primitives (shared with minifloat_denorm and
// log), reference quantize, encode/decode, tensor quantize and info, value type
// Minifloat<E, M, Bias, P, S>, printing, numeric_limits.
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
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/format/value_ops.hpp"

namespace qnum {

/// Which codes of a minifloat are special values.
enum class Specials : std::uint8_t {
  none,  // every code is a finite number (MASE; OCP FP6/FP4)
  ieee,  // all-ones exponent: Inf (zero mantissa) and NaN (OCP E5M2)
  fn,    // finite + NaN: only S.1..1.1..1 is NaN, no Inf (OCP E4M3)
};

inline std::string_view to_string(Specials s) {
  switch (s) {
    case Specials::none:
      return "none";
    case Specials::ieee:
      return "ieee";
    case Specials::fn:
      return "fn";
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
  static constexpr std::string_view help = "IEEE-like minifloat with subnormals (presets fp8_e4m3, fp8_e5m2)";
  static constexpr std::array<std::string_view, 1> aliases{"minifloat"};
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"exponent_bias", "none"}}};
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  int width = 8;
  int exponent_width = 4;
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1
  Specials specials = Specials::none;

  friend bool operator==(const MinifloatSpec&, const MinifloatSpec&) = default;

  QNUM_HD constexpr int mantissa_bits() const { return width - exponent_width - 1; }
  QNUM_HD constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }

  /// OCP FP8 E4M3 (max 448, NaN = S.1111.111, no Inf).
  static MinifloatSpec fp8_e4m3() { return {8, 4, 7, Specials::fn}; }
  /// OCP FP8 E5M2 (max 57344, IEEE Inf and NaN).
  static MinifloatSpec fp8_e5m2() { return {8, 5, 15, Specials::ieee}; }

  /// overflow=infinity needs an Inf code (specials=ieee).
  bool has_inf_code() const { return specials == Specials::ieee; }
  /// MASE's minifloat_ieee has no special values.
  void check_policy(const Policy& p) const {
    if (p.is_mase())
      detail::require(specials == Specials::none, name,
                      ": MASE's minifloat_ieee has no special values; specials=", qnum::to_string(specials),
                      " is exact-mode only");
  }

  void validate() const {
    detail::require(width >= 2 && width <= 32, name, ": width ", width, " must be in [2, 32]");
    detail::require(exponent_width >= 1 && exponent_width < width, name, ": exponent_width ", exponent_width,
                    " must be in [1, width-1] (width ", width, ")");
    detail::require(exponent_width <= 8, name, ": exponent_width ", exponent_width, " must be <= 8");
    detail::require(mantissa_bits() <= 23, name, ": mantissa bits ", mantissa_bits(), " must be <= 23");
    const long long b = bias();  // 64-bit: the bias key accepts any int32
    const long long emax = (1LL << exponent_width) - (specials == Specials::ieee ? 2 : 1) - b;  // top finite binade
    detail::require(emax <= 127 && 1 - b - mantissa_bits() >= -149, name, ": exponent_bias ", b, " gives exponents [",
                    1 - b, ", ", emax, "] with ", mantissa_bits(),
                    " mantissa bits, outside float32 (max exponent 127, smallest step 2^-149)");
    detail::require(specials == Specials::none || (exponent_width >= 2 && mantissa_bits() >= 1), name,
                    ": specials=", to_string(specials),
                    " needs exponent_width >= 2 and at least one mantissa bit (got ", exponent_width, " and ",
                    mantissa_bits(), ")");
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total bits W"},
            {"exponent_width", "4", "exponent bits E (mantissa M = W-E-1)"},
            {"exponent_bias", "none", "bias b; none = 2^(E-1)-1"},
            {"specials", "none", "none (all codes finite), ieee (Inf/NaN), fn (NaN only at all-ones)"}};
  }
  static std::vector<SpecPreset<MinifloatSpec>> presets() {
    return {{"fp8_e4m3", fp8_e4m3(), "OCP FP8 E4M3: max 448, NaN at S.1111.111, no Inf"},
            {"fp8_e5m2", fp8_e5m2(), "OCP FP8 E5M2: max 57344, IEEE Inf and NaN"}};
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

// ---- MASE float32 primitives -----------------------------------------------------------
// torch's elementwise ops on float32 tensors, one element at a time. Every product below
// is by 0, 1, +-1 or a power of two, so FMA contraction cannot change a result.

namespace detail::torchf {

/// torch.sign: -1, 0 or +1 (0 for +-0 and NaN).
QNUM_HD inline float sign(float v) { return static_cast<float>((v > 0.0f) - (v < 0.0f)); }

/// torch.round: round half to even, -0 kept, NaN/Inf unchanged.
QNUM_HD inline float round(float v) {
  if (!(std::fabs(v) < 8388608.0f)) return v;  // |v| >= 2^23, Inf, NaN: already integral
#if defined(__CUDA_ARCH__)
  return rintf(v);  // the same value: RNE to an integer, the sign of a zero result kept
#else
  return static_cast<float>(round_int(static_cast<double>(v), Rounding::nearest_even));
#endif
}

/// torch.clamp with scalar bounds: NaN propagates.
QNUM_HD inline float clamp(float v, float lo, float hi) {
  if (v != v) return v;
  return v < lo ? lo : (v > hi ? hi : v);
}

/// torch.log2 on float32, correctly rounded (spec 0.3; torch's SLEEF log2f is within 1 ulp).
QNUM_HD inline float log2(float v) { return static_cast<float>(std::log2(static_cast<double>(v))); }

/// torch.pow(2, e) for an integral float exponent: exact, 0 below 2^-149, Inf above 2^127.
QNUM_HD inline float exp2(float e) {
  if (e != e) return e;
  if (e > 200.0f) return kInf;
  if (e < -200.0f) return 0.0f;
  return pow2f(static_cast<int>(e));
}

/// v / d for a divisor d that MASE computes as a power of two. On the GPU, when 1/d is a
/// normal float too, v * (1/d): the same exact quotient, rounded once, so the same float
/// (a multiply instead of CUDA's IEEE division sequence); anything else divides.
QNUM_HD inline float div_pow2(float v, float d) {
#if defined(__CUDA_ARCH__)
  const std::uint32_t b = float_bits(d), field = (b >> 23) & 0xFFu;
  if ((b & 0x807FFFFFu) == 0 && field >= 1 && field <= 253) return v * bits_float((254u - field) << 23);
#endif
  return v / d;
}

/// floor / round of torchf::log2, the only two uses MASE's float formats make of log2. The
/// default evaluates log2; the CUDA kernels pass a lookup from the bits that gives the same
/// floats (kernel/log2_thresholds.hpp), as the CPU's SIMD kernels do.
struct Log2Direct {
  QNUM_HD float floor_log2(float v) const { return std::floor(log2(v)); }
  QNUM_HD float round_log2(float v) const { return round(log2(v)); }
};

/// torch.isclose(|x|, 0) with default tolerances: |x| <= float32(1e-8), finite.
QNUM_HD inline bool isclose0(float mag) { return mag <= 1e-8f; }

/// MASE's final select `(~close) * q + close * x` (so -0 -> +0, +-Inf -> NaN via 0 * Inf).
QNUM_HD inline float passthrough(float q, float x) {
  const float c = torchf::isclose0(std::fabs(x)) ? 1.0f : 0.0f;
  return (1.0f - c) * q + c * x;
}

}  // namespace detail::torchf

namespace detail {

/// MASE's `_minifloat_ieee_quantize` on one float32 element (bias may be any integer:
/// block_minifloat passes per-block biases; out-of-range powers behave as in float32).
/// `l2` decides floor(log2(.)) (torchf::Log2Direct or an equal lookup).
template <class Log2 = torchf::Log2Direct>
QNUM_HD inline float minifloat_ieee_mase(float x, int exponent_width, int mantissa_bits, int bias,
                                         const Log2& l2 = {}) {
  const float emin = static_cast<float>(-bias);
  const float emax = static_cast<float>((1LL << exponent_width) - 1 - bias);
  const float shift = pow2f(mantissa_bits);
  const float kmax = shift - 1.0f;
  const float sign = torchf::sign(x + 1e-9f);
  const float value = std::fabs(x);
  const float e = torchf::clamp(l2.floor_log2(value + 1e-9f), emin, emax);
  const float p2e = torchf::exp2(e);
  const float m = torchf::div_pow2(value, p2e);
  // Both branches are evaluated and selected by multiplying with 0/1, as MASE does.
  const float normal = e == emin ? 0.0f : 1.0f;
  const float k = normal * torchf::clamp(torchf::round(m * shift - shift), 0.0f, kmax) +
                  (1.0f - normal) * torchf::clamp(torchf::round(m * shift / 2.0f), 0.0f, kmax);
  const float mant =
      normal * (1.0f + torchf::div_pow2(k, shift)) + (1.0f - normal) * (torchf::div_pow2(k, shift) * 2.0f);
  return torchf::passthrough(sign * p2e * mant, x);
}

}  // namespace detail

// ---- reference quantize ----------------------------------------------------------------

namespace detail {

/// Exponent of the top finite binade (the all-ones field is Inf/NaN for specials=ieee).
QNUM_HD constexpr int minifloat_emax(const MinifloatSpec& s) {
  return (1 << s.exponent_width) - (s.specials == Specials::ieee ? 2 : 1) - s.bias();
}

/// Largest finite magnitude: 2^emax (2 - 2^-M), one step less for fn (its top code is NaN).
QNUM_HD constexpr double minifloat_max(const MinifloatSpec& s) {
  const int m = s.mantissa_bits();
  const double top = pow2(m + 1) - (s.specials == Specials::fn ? 2.0 : 1.0);  // significand * 2^M
  return scale2(top, minifloat_emax(s) - m);
}

/// The format as an IEEE-like grid: precision M+1, smallest normal binade 2^(1-b).
QNUM_HD constexpr FloatGrid minifloat_grid(const MinifloatSpec& s, Subnormals sub) {
  return FloatGrid{s.mantissa_bits() + 1, 1 - s.bias(), minifloat_max(s), sub == Subnormals::keep};
}

/// Whether rounding under `r` moves a value of this sign away from zero at the top of the
/// range (IEEE: overflow gives Inf for these, the largest finite value otherwise).
QNUM_HD constexpr bool rounds_outward(Rounding r, bool negative) {
  switch (r) {
    case Rounding::toward_zero:
      return false;
    case Rounding::floor:
      return negative;
    case Rounding::ceil:
      return !negative;
    default:
      return true;
  }
}

/// Exact semantics on the grid `g` (finite `max`); `inf_code`: the format has +-Inf.
QNUM_HD inline float float_grid_quantize(const FloatGrid& g, bool inf_code, const Policy& p, float x,
                                         std::uint64_t index) {
  if (is_nan(x)) return x;
  const bool neg = sign_bit(x);
  const float maxf = static_cast<float>(g.max);
  if (is_inf(x)) return inf_code ? x : (neg ? -maxf : maxf);
  double q = round_to_grid(g, abs(static_cast<double>(x)), neg, p.rounding, stochastic_draw(p, index));
  if (q > g.max) {
    if (inf_code && p.overflow == Overflow::infinity && rounds_outward(p.rounding, neg)) return neg ? -kInf : kInf;
    q = g.max;
  }
  const float r = static_cast<float>(q);  // exact: q is on a grid inside float32
  return neg ? -r : r;
}

}  // namespace detail

/// The reference: exact = nearest value of the grid under the policy's rounding, carrying
/// into the next binade, saturating (or Inf where the format has it and overflow=infinity);
/// mase = MASE's float32 arithmetic (see docs/formats.md). Exact keeps the sign of zero.
QNUM_HD inline float quantize(const MinifloatSpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  if (p.is_mase()) return detail::minifloat_ieee_mase(x, s.exponent_width, s.mantissa_bits(), s.bias());
  return detail::float_grid_quantize(detail::minifloat_grid(s, p.subnormals), s.specials == Specials::ieee, p, x,
                                     index);
}

// ---- encode / decode -------------------------------------------------------------------

namespace detail {

/// Code of a value already on the grid (or +-Inf / NaN where the format has them).
inline std::uint32_t minifloat_code(const MinifloatSpec& s, float v) {
  const int m = s.mantissa_bits(), b = s.bias();
  const std::uint64_t ones = (std::uint64_t{1} << s.exponent_width) - 1, mmask = (std::uint64_t{1} << m) - 1;
  if (is_nan(v)) {
    require(s.specials != Specials::none, s.name, ": NaN has no code with specials=none");
    return static_cast<std::uint32_t>((ones << m) | mmask);
  }
  const std::uint64_t sign = static_cast<std::uint64_t>(sign_bit(v)) << (s.width - 1);
  if (is_inf(v)) return static_cast<std::uint32_t>(sign | (ones << m));  // only reachable with specials=ieee
  const double mag = abs(static_cast<double>(v));
  std::uint64_t field = 0, k = 0;
  if (mag < pow2(1 - b)) {
    k = static_cast<std::uint64_t>(scale2(mag, b - 1 + m));
  } else {
    const int e = ilog2(mag);
    field = static_cast<std::uint64_t>(e + b);
    k = static_cast<std::uint64_t>(scale2(mag, m - e)) - (std::uint64_t{1} << m);
  }
  return static_cast<std::uint32_t>(sign | (field << m) | k);
}

}  // namespace detail

/// W-bit code (sign | exponent field | mantissa) of `x` quantized under `p` with exact
/// semantics. NaN gives the all-ones NaN code, or throws for specials=none.
inline std::uint32_t encode(const MinifloatSpec& s, float x, const Policy& p = exact) {
  Policy q = p;
  q.semantics = Semantics::exact;
  return detail::minifloat_code(s, quantize(s, q, x));
}

/// The value of a W-bit code: subnormal k 2^(1-b-M) at field 0, else (1 + k/2^M) 2^(field-b).
QNUM_HD inline float decode(const MinifloatSpec& s, std::uint32_t code) {
  const int m = s.mantissa_bits(), b = s.bias();
  const std::uint64_t c = code & ((std::uint64_t{1} << s.width) - 1);
  const bool neg = (c >> (s.width - 1)) & 1;
  const std::uint64_t ones = (std::uint64_t{1} << s.exponent_width) - 1, mmask = (std::uint64_t{1} << m) - 1;
  const std::uint64_t field = (c >> m) & ones, k = c & mmask;
  if (s.specials == Specials::ieee && field == ones)
    return k == 0 ? (neg ? -detail::kInf : detail::kInf) : detail::kNaN;
  if (s.specials == Specials::fn && field == ones && k == mmask) return detail::kNaN;
  const double mag =
      field == 0 ? detail::scale2(static_cast<double>(k), 1 - b - m)
                 : detail::scale2(static_cast<double>((std::uint64_t{1} << m) + k), static_cast<int>(field) - b - m);
  const float r = static_cast<float>(mag);
  return neg ? -r : r;
}

/// Bits per code.
inline int code_bits(const MinifloatSpec& s) { return s.width; }

// ---- tensor quantize and info ----------------------------------------------------------

/// Facts about the grid. mase semantics has no special values (MASE's grid is specials=none)
/// and passes |x| <= 1e-8 through unquantized.
inline FormatInfo info(const MinifloatSpec& spec, const Policy& p) {
  MinifloatSpec s = spec;
  if (p.is_mase()) s.specials = Specials::none;
  const int m = s.mantissa_bits(), b = s.bias();
  FormatInfo f;
  f.bits_per_value = s.width;
  f.min_positive = detail::pow2(1 - b - m);
  f.max = detail::minifloat_max(s);
  const double special_codes = s.specials == Specials::ieee ? detail::pow2(m + 1)
                               : s.specials == Specials::fn ? 2.0
                                                            : 0.0;
  f.distinct_values = detail::pow2(s.width) - special_codes - 1;  // +-0 are one value
  f.value_set =
      detail::concat("+-(1 + k/2^", m, ") * 2^e, e in [", 1 - b, ", ", detail::minifloat_emax(s),
                     "]; subnormals +-k * 2^", 1 - b - m, "; k < 2^", m, "; specials ", to_string(s.specials));
  if (p.is_mase()) f.value_set += "; |x| <= 1e-8 passes through unquantized";
  return f;
}

// ---- value type ------------------------------------------------------------------------

/// Compile-time minifloat: 1 sign, E exponent, M mantissa bits, bias Bias, special values S.
/// Holds the code, converts through the reference quantizer under P, and rounds arithmetic
/// results (computed in double) back under P.
template <int E, int M, int Bias = (1 << (E - 1)) - 1, Policy P = exact, Specials S = Specials::none>
class Minifloat : public detail::NumberOps<Minifloat<E, M, Bias, P, S>> {
 public:
  static constexpr int width = 1 + E + M;
  static constexpr MinifloatSpec spec{width, E, Bias, S};
  static_assert(E >= 1 && E <= 8, "Minifloat: exponent bits must be in [1, 8]");
  static_assert(M >= 0 && M <= 23, "Minifloat: mantissa bits must be in [0, 23]");
  static_assert((1 << E) - 1 - Bias <= 127 && 1 - Bias - M >= -149, "Minifloat: bias puts the range outside float32");
  static_assert(S == Specials::none || (E >= 2 && M >= 1), "Minifloat: specials need E >= 2 and M >= 1");
  static_assert(!P.is_mase() || S == Specials::none, "Minifloat: MASE's minifloat has no special values");

  constexpr Minifloat() = default;
  Minifloat(float x) : code_(encode(spec, quantize(spec, P, x), exact)) {}  // NOLINT: implicit like a number
  static constexpr Minifloat from_code(std::uint32_t c) {
    Minifloat f;
    f.code_ = c & static_cast<std::uint32_t>((std::uint64_t{1} << width) - 1);
    return f;
  }

  constexpr std::uint32_t code() const { return code_; }
  float value() const { return decode(spec, code_); }

  Minifloat operator-() const { return Minifloat(-value()); }

 private:
  std::uint32_t code_ = 0;
};

/// OCP FP8 E4M3 (saturating, NaN at S.1111.111, max 448).
using FP8E4M3 = Minifloat<4, 3, 7, exact, Specials::fn>;
/// OCP FP8 E5M2 (IEEE Inf/NaN, max 57344); saturating like OCP's conversion default.
using FP8E5M2 = Minifloat<5, 2, 15, exact, Specials::ieee>;
/// OCP FP8 E5M2 with IEEE overflow to Inf.
using FP8E5M2Inf = Minifloat<5, 2, 15, exact.with(Overflow::infinity), Specials::ieee>;

/// Bits with the fields separated: Minifloat<4,3> 1.0 -> "0b0.0111.000".
template <int E, int M, int B, Policy P, Specials S>
std::string to_binary(const Minifloat<E, M, B, P, S>& v) {
  std::string bits = detail::bit_string(v.code(), 1 + E + M);
  bits.insert(1, ".");
  if (M > 0) bits.insert(static_cast<std::size_t>(2 + E), ".");
  return "0b" + bits;
}

namespace detail {
/// Code of +2^e in a minifloat (0 when 2^e is not representable), for numeric_limits.
constexpr std::uint32_t minifloat_pow2_code(int m, int bias, int e, int emax) {
  if (e >= 1 - bias && e <= emax) return static_cast<std::uint32_t>(e + bias) << m;
  if (e < 1 - bias && e >= 1 - bias - m) return std::uint32_t{1} << (e - (1 - bias - m));
  return 0;
}
}  // namespace detail

}  // namespace qnum

template <int E, int M, int B, qnum::Policy P, qnum::Specials S>
class std::numeric_limits<qnum::Minifloat<E, M, B, P, S>> {
  using T = qnum::Minifloat<E, M, B, P, S>;
  static constexpr std::uint32_t ones = (1u << E) - 1, mmask = (1u << M) - 1;
  static constexpr int emax_ = (1 << E) - (S == qnum::Specials::ieee ? 2 : 1) - B;
  static constexpr std::uint32_t max_code = S == qnum::Specials::ieee ? ((ones - 1) << M) | mmask
                                            : S == qnum::Specials::fn ? (ones << M) | (mmask - 1)
                                                                      : (ones << M) | mmask;
  static constexpr std::uint32_t sign = 1u << (E + M);

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = S == qnum::Specials::ieee;
  static constexpr bool has_quiet_NaN = S != qnum::Specials::none;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = M > 0 ? std::denorm_present : std::denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr int digits = M + 1;
  static constexpr int min_exponent = 2 - B;  // C++ convention: normals are 0.1xxx * 2^exp
  static constexpr int max_exponent = emax_ + 1;
  static constexpr std::float_round_style round_style =
      P.rounding == qnum::Rounding::nearest_even || P.rounding == qnum::Rounding::nearest_away
          ? std::round_to_nearest
          : (P.rounding == qnum::Rounding::toward_zero ? std::round_toward_zero
             : P.rounding == qnum::Rounding::floor     ? std::round_toward_neg_infinity
             : P.rounding == qnum::Rounding::ceil      ? std::round_toward_infinity
                                                       : std::round_indeterminate);
  /// Smallest positive normal 2^(1-b).
  static constexpr T min() noexcept { return T::from_code(1u << M); }
  static constexpr T max() noexcept { return T::from_code(max_code); }
  static constexpr T lowest() noexcept { return T::from_code(sign | max_code); }
  /// 2^-M (0 when not representable).
  static constexpr T epsilon() noexcept { return T::from_code(qnum::detail::minifloat_pow2_code(M, B, -M, emax_)); }
  static constexpr T round_error() noexcept { return T::from_code(qnum::detail::minifloat_pow2_code(M, B, -1, emax_)); }
  static constexpr T infinity() noexcept { return T::from_code(has_infinity ? ones << M : 0); }
  static constexpr T quiet_NaN() noexcept { return T::from_code(has_quiet_NaN ? (ones << M) | mmask : 0); }
  static constexpr T signaling_NaN() noexcept { return T::from_code(0); }
  /// Smallest positive value 2^(1-b-M) (the smallest normal when M = 0).
  static constexpr T denorm_min() noexcept { return T::from_code(1); }
};
