// Per-row dynamically scaled integer (`scale_integer`): s = 2^(W-1) / max|row| (MASE) and
// k = round(x * s) clamped, value k / s. MASE's `scale_integer_quantizer`.
// Rows are runs along the last dimension (a rank-0 tensor is one row of one element).
//
// Sections: spec, row codes (encode_row / decode_row), tensor quantize, info.
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
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

struct ScaleIntegerSpec {
  static constexpr std::string_view name = "scale_integer";
  static constexpr std::string_view help = "integer with per-row dynamic scale";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"is_signed", "true"}}};
  static constexpr Grouping grouping() { return Grouping::per_row; }
  static constexpr bool saturates = false;  // every row is scaled to its own maximum
  int width = 8;
  bool is_signed = true;
  std::optional<double> quantile;  // accepted and ignored (as MASE does)

  friend bool operator==(const ScaleIntegerSpec&, const ScaleIntegerSpec&) = default;
  void validate() const { detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]"); }
  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "bits W"},
            {"is_signed", "true", "signed [-2^(W-1), 2^(W-1)-1] or unsigned [0, 2^W-1]"},
            {"quantile", "none", "accepted for MASE compatibility; ignored"}};
  }
  /// Smallest and largest integer code k.
  constexpr std::int64_t kmin() const { return is_signed ? -(std::int64_t{1} << (width - 1)) : 0; }
  constexpr std::int64_t kmax() const {
    return is_signed ? (std::int64_t{1} << (width - 1)) - 1 : (std::int64_t{1} << width) - 1;
  }

  static ScaleIntegerSpec from_keys(KeyValues& kv) {
    ScaleIntegerSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.is_signed = kv.take_bool({"is_signed", "signed"}, true);
    s.quantile = kv.take_opt_double({"quantile"});
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width);
    if (!is_signed) w.add("is_signed", false);
    if (quantile) w.add("quantile", quantile);
  }
};

// ---- row codes ----------------------------------------------------------------------------

/// One row in storage form: integer codes k plus the row's scale.
/// exact: value = k * row_max / kmax (row_max = max|x|). MASE: value = k / scale in float32,
/// scale = (1 / (max|x| + 1e-9)) * 2^(W-1) (or 2^W unsigned), as torch evaluates it.
struct ScaleIntegerRow {
  std::vector<std::int32_t> codes;
  float row_max = 0;  // max |x| of the row
  float scale = 0;    // MASE's float32 s (0 in exact mode)
};

namespace detail {

/// MASE's scale: `2 ** (W-1) / x_max` is Tensor.__rtruediv__ = reciprocal(x_max) * 2^(W-1).
QNUM_HD inline float scale_integer_mase_scale(const ScaleIntegerSpec& s, float row_max) {
  const float x_max = row_max + 1e-9f;
  return (1.0f / x_max) * pow2f(s.is_signed ? s.width - 1 : s.width);
}

/// max |x| over a row; NaN if any element is NaN (torch.max propagates NaN).
inline float row_abs_max(std::span<const float> row) {
  float m = 0.0f;
  for (float x : row) {
    if (x != x) return x;
    m = std::max(m, std::fabs(x));
  }
  return m;
}

/// MASE: k = clamp(round(x * s), kmin, kmax) in float32 (NaN stays NaN, -0 stays -0).
QNUM_HD inline float scale_integer_code_mase(const ScaleIntegerSpec& s, float x, float scale) {
  const float v = x * scale;
  if (v != v) return v;
  float k = static_cast<float>(round_int(static_cast<double>(v), Rounding::nearest_even));
  const auto lo = static_cast<float>(s.kmin()), hi = static_cast<float>(s.kmax());
  if (k < lo) k = lo;
  if (k > hi) k = hi;
  return k;
}

/// exact: k = clamp(round(x * kmax / row_max)) under the policy's rounding; row_max > 0, finite.
QNUM_HD inline std::int64_t scale_integer_code_exact(const ScaleIntegerSpec& s, const Policy& p, float x, float row_max,
                                                     std::uint64_t index) {
  const double v = static_cast<double>(x) * static_cast<double>(s.kmax()) / static_cast<double>(row_max);
  const double k = round_int(v, p.rounding, stochastic_draw(p, index));
  return static_cast<std::int64_t>(std::clamp(k, static_cast<double>(s.kmin()), static_cast<double>(s.kmax())));
}

/// exact value of code k: k * row_max / kmax (row max lands exactly on itself).
QNUM_HD inline float scale_integer_value_exact(const ScaleIntegerSpec& s, std::int64_t k, float row_max) {
  return static_cast<float>(static_cast<double>(k) * static_cast<double>(row_max) / static_cast<double>(s.kmax()));
}

/// exact: one element of a row whose max |x| is m (finite); `index` keys stochastic rounding.
QNUM_HD inline float scale_integer_element_exact(const ScaleIntegerSpec& s, const Policy& p, float x, float m,
                                                 std::uint64_t index) {
  if (m == 0.0f) return s.is_signed ? x : 0.0f;  // all-zero row stays zero (signed keeps -0)
  const auto k = scale_integer_code_exact(s, p, x, m, index);
  const float v = scale_integer_value_exact(s, k, m);
  return v == 0.0f && s.is_signed && sign_bit(x) ? -0.0f : v;
}

/// An order-independent key for row_abs_max (for parallel reductions): the bits of |x| order
/// as the magnitudes do and every NaN's lie above +inf's, so the largest key is row_abs_max's
/// value (NaN, of some payload, iff the row holds one).
QNUM_HD constexpr std::uint32_t abs_max_key(float x) { return float_bits(x) & 0x7FFFFFFFu; }

/// One element of a row whose max |x| is m (row_abs_max: NaN if the row holds one) under
/// either bundle; `index` keys stochastic rounding. The CPU rows and the CUDA kernel share it.
QNUM_HD inline float scale_integer_element(const ScaleIntegerSpec& s, const Policy& p, float x, float m,
                                           std::uint64_t index) {
  if (p.is_mase()) {
    // NaN or inf in the row: s is NaN or 0, and k / s is NaN for every element.
    const float scale = scale_integer_mase_scale(s, m);
    return scale_integer_code_mase(s, x, scale) / scale;
  }
  if (!is_finite(m)) return kNaN;  // no finite scale
  return scale_integer_element_exact(s, p, x, m, index);
}

/// Quantizes one row; `first_index` is the row's flat offset (keys stochastic rounding).
inline void scale_integer_row(const ScaleIntegerSpec& s, const Policy& p, std::span<const float> row,
                              std::span<float> out, std::uint64_t first_index) {
  const float m = row_abs_max(row);
  for (std::size_t j = 0; j < row.size(); ++j) out[j] = scale_integer_element(s, p, row[j], m, first_index + j);
}

}  // namespace detail

/// Codes and scale of one row (exact or MASE arithmetic). A row holding NaN or Inf has no
/// codes: throws.
inline ScaleIntegerRow encode_row(const ScaleIntegerSpec& s, const Policy& p, std::span<const float> row) {
  ScaleIntegerRow r;
  r.row_max = detail::row_abs_max(row);
  detail::require(std::isfinite(r.row_max), s.name, ": a row containing NaN or Inf has no codes");
  r.codes.reserve(row.size());
  if (p.is_mase()) {
    r.scale = detail::scale_integer_mase_scale(s, r.row_max);
    for (float x : row) r.codes.push_back(static_cast<std::int32_t>(detail::scale_integer_code_mase(s, x, r.scale)));
    return r;
  }
  for (std::size_t j = 0; j < row.size(); ++j)
    r.codes.push_back(r.row_max == 0.0f ? 0
                                        : static_cast<std::int32_t>(detail::scale_integer_code_exact(
                                              s, p, row[j], r.row_max, static_cast<std::uint64_t>(j))));
  return r;
}

/// Values of a row's codes (matches quantize except for the sign of zeros).
inline std::vector<float> decode_row(const ScaleIntegerSpec& s, const Policy& p, const ScaleIntegerRow& r) {
  std::vector<float> out;
  out.reserve(r.codes.size());
  for (auto k : r.codes) {
    if (p.is_mase())
      out.push_back(static_cast<float>(k) / r.scale);
    else
      out.push_back(r.row_max == 0.0f ? 0.0f : detail::scale_integer_value_exact(s, k, r.row_max));
  }
  return out;
}

// ---- tensor quantize and info -------------------------------------------------------------

/// Quantizes every last-dimension row with its own scale (exact: the row max maps exactly to
/// the top code kmax; MASE: to 2^(W-1) (2^W unsigned), clamped one step in).
inline void quantize(const ScaleIntegerSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  const std::int64_t len = shape.empty() ? 1 : shape.back();
  if (len == 0) return;
  for (std::size_t off = 0; off < in.size(); off += static_cast<std::size_t>(len))
    detail::scale_integer_row(s, p, in.subspan(off, static_cast<std::size_t>(len)),
                              out.subspan(off, static_cast<std::size_t>(len)), off);
}

/// Per element W bits plus a 32-bit scale per row (W + 32/row_length; reported as W since
/// the row length is not part of the spec). Magnitudes are for a row whose max |x| is 1.
inline FormatInfo info(const ScaleIntegerSpec& s, const Policy& p) {
  FormatInfo f;
  f.bits_per_value = s.width;
  f.distinct_values = detail::pow2(s.width);
  if (p.is_mase()) {
    const double scale = detail::scale_integer_mase_scale(s, 1.0f);
    f.min_positive = 1.0 / scale;
    f.max = static_cast<double>(s.kmax()) / scale;
    f.value_set = detail::concat("k / s_row, k in [", s.kmin(), ", ", s.kmax(), "], s_row = 2^",
                                 s.is_signed ? s.width - 1 : s.width,
                                 " / (max|row| + 1e-9) (last-dim rows; shown for max|row| = 1); + 32 bits per row");
  } else {
    f.min_positive = 1.0 / static_cast<double>(s.kmax());
    f.max = 1.0;
    f.value_set = detail::concat("k * max|row| / ", s.kmax(), ", k in [", s.kmin(), ", ", s.kmax(),
                                 "] (last-dim rows; shown for max|row| = 1); + 32 bits per row");
  }
  return f;
}

}  // namespace qnum
