// MX element types (the per-element part of mxint / mxfp), in units of the shared scale:
// OCP MX v1.0 INT8-style integers and the FP8/FP6/FP4 minifloats with their code layouts,
// plus MASE's internal minifloat codec (`_minifloat_mx`) reproduced with its quirks.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

/// One MX element type. INT (`is_int`): `width`-bit two's complement k, value k * 2^-(width-2)
/// (OCP MXINT8: [-2, 1.984375]). FP: sign | exponent_width | frac_width, IEEE-like with
/// subnormals; E4M3 reserves S.1111.111 for NaN, E5M2 has IEEE Inf/NaN, FP6/FP4 are finite.
struct MXElement {
  bool is_int = false;
  int exponent_width = 0;  // FP only
  int frac_width = 0;      // FP: mantissa bits; INT: width - 2
  int width = 8;           // total bits incl. sign

  friend constexpr bool operator==(const MXElement&, const MXElement&) = default;

  static constexpr MXElement integer(int w) { return {true, 0, w - 2, w}; }
  static constexpr MXElement fp(int e, int m) { return {false, e, m, 1 + e + m}; }

  QNUM_HD constexpr bool is_e4m3() const { return !is_int && exponent_width == 4 && frac_width == 3; }
  QNUM_HD constexpr bool is_e5m2() const { return !is_int && exponent_width == 5 && frac_width == 2; }
  /// One of OCP MX v1.0's element types (INT8 generalised to any width).
  QNUM_HD constexpr bool is_ocp() const {
    if (is_int) return true;
    const int e = exponent_width, m = frac_width;
    return (e == 4 && m == 3) || (e == 5 && m == 2) || (e == 3 && m == 2) || (e == 2 && m == 3) || (e == 2 && m == 1);
  }
  QNUM_HD constexpr int bias() const { return is_int ? 0 : (1 << (exponent_width - 1)) - 1; }
  /// Exponent of the largest binade (OCP's emax_elem): INT 0, E4M3 8, E5M2 15, E3M2 4, E2M3/E2M1 2.
  QNUM_HD constexpr int emax() const {
    if (is_int) return 0;
    const int top_field = is_e5m2() ? (1 << exponent_width) - 2 : (1 << exponent_width) - 1;
    return top_field - bias();
  }
  QNUM_HD constexpr int emin() const { return is_int ? 0 : 1 - bias(); }
  QNUM_HD constexpr std::int64_t kmin() const { return -(std::int64_t{1} << (width - 1)); }
  QNUM_HD constexpr std::int64_t kmax() const { return (std::int64_t{1} << (width - 1)) - 1; }
  /// Largest finite magnitude (E4M3 448, E5M2 57344, E3M2 28, E2M3 7.5, E2M1 6, INT8 1.984375).
  QNUM_HD constexpr double max() const {
    if (is_int) return detail::scale2(static_cast<double>(kmax()), -frac_width);
    const double top_mant = is_e4m3() ? 2.0 - detail::pow2(1 - frac_width) : 2.0 - detail::pow2(-frac_width);
    return top_mant * detail::pow2(emax());
  }
  /// Smallest positive magnitude (INT: 2^-(w-2); FP: the smallest subnormal).
  QNUM_HD constexpr double min_positive() const {
    return is_int ? detail::pow2(-frac_width) : detail::pow2(emin() - frac_width);
  }
  /// Distinct finite real values (one zero; NaN/Inf codes excluded).
  constexpr double distinct_values() const {
    const double codes = detail::pow2(width);
    if (is_int) return codes;
    if (is_e4m3()) return codes - 2 - 1;                      // 2 NaN codes, -0
    if (is_e5m2()) return codes - 2 * (1 << frac_width) - 1;  // Inf/NaN binade, -0
    return codes - 1;                                         // -0
  }
  std::string name() const {
    if (is_int) return "INT" + std::to_string(width);
    return "E" + std::to_string(exponent_width) + "M" + std::to_string(frac_width);
  }
  QNUM_HD constexpr detail::FloatGrid grid(bool subnormals = true) const {
    return {frac_width + 1, emin(), max(), subnormals};
  }
};

/// The value of an element code (in units of the shared scale). NaN/Inf codes decode to NaN/Inf.
QNUM_HD constexpr float decode(const MXElement& e, std::uint32_t code) {
  code &= static_cast<std::uint32_t>((std::uint64_t{1} << e.width) - 1);
  if (e.is_int) {
    std::int64_t k = code;
    if (k >> (e.width - 1)) k -= std::int64_t{1} << e.width;
    return static_cast<float>(detail::scale2(static_cast<double>(k), -e.frac_width));
  }
  const int m = e.frac_width;
  const bool neg = (code >> (e.width - 1)) & 1u;
  const std::uint32_t field = (code >> m) & ((1u << e.exponent_width) - 1);
  const std::uint32_t frac = code & ((1u << m) - 1);
  const std::uint32_t top = (1u << e.exponent_width) - 1;
  double v = 0;
  if (e.is_e4m3() && field == top && frac == (1u << m) - 1)
    v = detail::kNaN;
  else if (e.is_e5m2() && field == top)
    v = frac == 0 ? std::numeric_limits<double>::infinity() : detail::kNaN;
  else if (field == 0)
    v = detail::scale2(static_cast<double>(frac), e.emin() - m);
  else
    v = detail::scale2(static_cast<double>((1u << m) + frac), static_cast<int>(field) - e.bias() - m);
  return static_cast<float>(neg ? -v : v);
}

/// `y` (in units of the scale) rounded onto the element grid under p.rounding (u: the
/// stochastic draw), saturating at +-max. NaN stays NaN; a negative value rounding to 0 gives -0.
QNUM_HD inline float quantize_element(const MXElement& e, const Policy& p, float y, float u = 0.0f) {
  if (detail::is_nan(y)) return y;
  const bool neg = detail::sign_bit(y);
  if (detail::is_inf(y)) {
    if (neg && e.is_int) return static_cast<float>(detail::scale2(static_cast<double>(e.kmin()), -e.frac_width));
    return static_cast<float>(neg ? -e.max() : e.max());
  }
  double q;
  if (e.is_int) {
    const double k = detail::round_int(detail::scale2(static_cast<double>(y), e.frac_width), p.rounding, u);
    const double lo = static_cast<double>(e.kmin()), hi = static_cast<double>(e.kmax());
    q = detail::scale2(k < lo ? lo : (k > hi ? hi : k), -e.frac_width);
    if (q == 0.0 && neg) q = -0.0;
  } else {
    q = detail::round_to_grid(e.grid(p.subnormals == Subnormals::keep), detail::abs(static_cast<double>(y)), neg,
                              p.rounding, u);
    if (q > e.max()) q = e.max();
    if (neg) q = -q;
  }
  return static_cast<float>(q);
}

/// Same as quantize_element; `index` keys the stochastic draw (the conformance interface).
QNUM_HD inline float quantize(const MXElement& e, const Policy& p, float y, std::uint64_t index = 0) {
  return quantize_element(e, p, y, detail::stochastic_draw(p, index));
}

namespace detail {
QNUM_HD inline std::uint32_t mx_element_code(const MXElement& e, float q);
}

/// The code of `y` after quantize_element under `p` (exact RNE by default). NaN: E4M3 S.1111.111,
/// E5M2 S.11111.11; other element types have no NaN code (throws).
inline std::uint32_t encode(const MXElement& e, float y, const Policy& p = exact) {
  const std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << e.width) - 1);
  if (detail::is_nan(y)) {
    detail::require(e.is_e4m3() || e.is_e5m2(), "mx element ", e.name(), ": NaN has no code");
    return mask >> 1;  // positive, all exponent and mantissa bits set
  }
  return detail::mx_element_code(e, quantize(e, p, y, 0));
}

namespace detail {
/// The code of a non-NaN element value `q` already on e's grid (encode without the NaN case).
QNUM_HD inline std::uint32_t mx_element_code(const MXElement& e, float q) {
  const std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << e.width) - 1);
  if (e.is_int) {
    const auto k = static_cast<std::int64_t>(detail::scale2(static_cast<double>(q), e.frac_width));
    return static_cast<std::uint32_t>(k) & mask;
  }
  const bool neg = detail::sign_bit(q);
  const double a = detail::abs(static_cast<double>(q));
  std::uint32_t mag = 0;
  if (a != 0.0) {
    const int m = e.frac_width;
    const int ex = detail::ilog2(a);
    if (ex < e.emin()) {
      mag = static_cast<std::uint32_t>(detail::scale2(a, m - e.emin()));  // subnormal: field 0
    } else {
      const auto sig = static_cast<std::uint32_t>(detail::scale2(a, m - ex));  // in [2^m, 2^(m+1))
      mag = (static_cast<std::uint32_t>(ex + e.bias()) << m) | (sig - (1u << m));
    }
  }
  return (neg ? 1u << (e.width - 1) : 0u) | mag;
}
}  // namespace detail

namespace detail {

// ---- MASE's `_minifloat_mx` codec (finite mode, round-to-nearest), float32 faithfully -----

/// MASE's exponent bias for the MX element codec: 2^(E-1) - 1 (0 for E1M2).
QNUM_HD constexpr int mase_mx_bias(int ebits) { return (1 << (ebits - 1)) - 1; }

/// a / b as x86-64 SSE divides, NaN payloads included (a GPU's NaN results are canonical): a
/// NaN operand comes back quieted (a's first); Inf / Inf and 0 / 0 give the default NaN
/// 0xFFC00000. The MASE codec below reads a NaN's mantissa bits, so they must be the CPU's.
QNUM_HD inline float mase_x86_div(float a, float b) {
  if (is_nan(a)) return bits_float(float_bits(a) | 0x00400000u);
  if (is_nan(b)) return bits_float(float_bits(b) | 0x00400000u);
  if ((is_inf(a) && is_inf(b)) || (a == 0.0f && b == 0.0f)) return bits_float(0xFFC00000u);
  return a / b;
}

/// MASE's `extract_minifloat_component` (is_finite, "rn"): code = (biased_exp << M) OR frac,
/// with its carry-by-OR, one-binade truncated subnormals and float32 flush of subnormal inputs.
/// NaN/Inf inputs follow the arithmetic on x86-64 / glibc: frexp gives exponent 0 and keeps
/// the (quieted) payload, whose top mantissa bits become the fraction. Read from the bits,
/// which is what frexp(|x|) * 2 computes for the zero, normal, Inf and NaN inputs reaching it.
QNUM_HD inline std::uint32_t mase_mx_minifloat_encode(int ebits, int mbits, float x) {
  const int bias = mase_mx_bias(ebits);
  const int exp_max = (1 << ebits) - 1;
  const int exp_max_biased = exp_max - bias, exp_min_biased = -bias;
  const bool sign = x < 0;
  const std::uint32_t b = float_bits(x) & 0x7FFFFFFFu;
  const std::uint32_t biased = b >> 23;
  const bool flush = biased == 0;  // zero and subnormal inputs
  const bool special = biased == 0xFFu;
  const int xe = flush || special ? -1 : static_cast<int>(biased) - 127;  // frexp's exponent - 1
  const std::uint32_t mant = flush ? 0u : (is_nan(x) ? b | 0x00400000u : b) & 0x7FFFFFu;
  const bool underflow = xe<exp_min_biased, overflow = xe> exp_max_biased;
  int ye = xe + bias;
  const auto top15 = static_cast<std::int32_t>(mant >> 8);
  const float t = static_cast<float>(top15) / static_cast<float>(1 << (15 - mbits));  // exact
  auto yf = static_cast<std::int32_t>(std::nearbyint(t));                             // RNE, |t| < 2^15
  if (ye == 0 && yf != 0) yf = (yf | (1 << mbits)) >> 1;
  if (underflow) yf = 0, ye = 0;
  if (overflow) yf = (1 << mbits) - 1, ye = exp_max;
  if (flush) yf = 0, ye = 0;
  std::uint32_t code = (static_cast<std::uint32_t>(ye) << mbits) | static_cast<std::uint32_t>(yf);
  if (sign) code += 1u << (ebits + mbits);
  return code;
}

/// MASE's `compose_minifloat_component` (finite): value of a code in float32.
QNUM_HD inline float mase_mx_minifloat_decode(int ebits, int mbits, std::uint32_t code) {
  const std::uint32_t sign_mask = 1u << (ebits + mbits);
  const bool neg = (code & sign_mask) != 0;
  const std::uint32_t c = code & 0x7FFFu;
  const int xe = static_cast<int>((c >> mbits) & ((1u << ebits) - 1));
  const int xf = static_cast<int>(c & ((1u << mbits) - 1));
  const bool sub = xe == 0 && xf != 0, zero = xe == 0 && xf == 0;
  const float p = pow2f(xe - mase_mx_bias(ebits) + (sub ? 1 : 0));
  float f = static_cast<float>(xf) / static_cast<float>(1 << mbits);
  if (!sub) f += 1.0f;
  float y = zero ? 0.0f : p * f;
  return neg ? -y : y;
}

/// MASE's finite-mode emax of an element: (2^E - 1) - bias (E4M3 8, E5M2 16, E2M1 2, E1M2 1).
QNUM_HD constexpr int mase_mx_emax(int ebits) { return (1 << ebits) - 1 - mase_mx_bias(ebits); }

}  // namespace detail
}  // namespace qnum
