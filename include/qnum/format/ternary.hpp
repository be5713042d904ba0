// Ternary (`ternary`): {-1, 0, +1} or {-alpha_i, 0, +alpha_i} per output channel, with a
// threshold Delta. MASE's `ternary_quantizer`.
//
// Sections: spec, per-channel threshold and scale (exact and MASE), tensor quantize,
// encode/decode, info, value type Ternary and numeric_limits.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/lane_sum.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/channel_reduce.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

struct TernarySpec {
  static constexpr std::string_view name = "ternary";
  static constexpr std::string_view help = "{-1,0,+1} or {-alpha,0,+alpha} per channel";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"scaling_factor", "false"}}};
  static constexpr Grouping grouping() { return Grouping::per_channel; }
  bool scaling_factor = false;
  std::optional<double> threshold;              // exact: absolute threshold if set; MASE ignores it
  std::optional<double> mean, median, maximum;  // MASE statistics (ignored by MASE's rule)

  friend bool operator==(const TernarySpec&, const TernarySpec&) = default;
  void validate() const {
    detail::require(!threshold || (*threshold >= 0 && std::isfinite(*threshold)), name, ": threshold ",
                    threshold.value_or(0), " must be finite and >= 0 (none = 0.75 * mean|x| per channel)");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"scaling_factor", "false", "scale +-1 by alpha_i = mean |x| above threshold, per output channel"},
            {"threshold", "none", "absolute threshold (exact); none = 0.75 * mean|x| per channel"},
            {"mean", "none", "MASE statistic (accepted, unused by MASE's rule)"},
            {"median", "none", "MASE statistic (accepted, unused)"},
            {"maximum", "none", "MASE statistic (accepted, unused)"},
            {"width", "2", "informational; must be 2"}};
  }
  static TernarySpec from_keys(KeyValues& kv) {
    TernarySpec s;
    s.scaling_factor = kv.take_bool({"scaling_factor"}, false);
    s.threshold = kv.take_opt_double({"threshold"});
    s.mean = kv.take_opt_double({"mean"});
    s.median = kv.take_opt_double({"median"});
    s.maximum = kv.take_opt_double({"maximum", "max"});
    const int w = kv.take_int({"width"}, 2);
    detail::require(w == 2, name, ": width ", w, " must be 2");
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("scaling_factor", scaling_factor);
    if (threshold) w.add("threshold", threshold);
    if (mean) w.add("mean", mean);
    if (median) w.add("median", median);
    if (maximum) w.add("maximum", maximum);
  }
};

// ---- per-channel threshold and scale --------------------------------------------------

/// One channel's threshold and scale: out = +alpha where x > delta, -alpha where x < -delta,
/// else 0 (alpha = 1 without scaling_factor).
struct TernaryChannel {
  double delta = 0;
  double alpha = 1;
};

namespace detail {

/// exact: delta = threshold if given, else 0.75 * mean|x| (double, Σ|x| in lane_sum's order);
/// NaN in the channel -> NaN delta (channel NaN). `abs_sum` = Σ|x| of the n elements.
QNUM_HD inline double ternary_delta_exact(const TernarySpec& s, double abs_sum, std::int64_t n, bool any_nan) {
  if (any_nan) return kNaN;
  return s.threshold ? *s.threshold : 0.75 * (n == 0 ? 0.0 : abs_sum / static_cast<double>(n));
}

/// exact: alpha = mean |x| over |x| > delta (Σ in lane_sum's order, `count` of them, exact in
/// double), 0 when nothing exceeds delta; NaN with a NaN delta.
QNUM_HD inline double ternary_alpha_exact(double delta, double sum_above, double count_above) {
  return delta != delta ? kNaN : (count_above > 0 ? sum_above / count_above : 0.0);
}

/// exact: one channel's threshold and scale over its n elements (the definition the SIMD
/// kernel reproduces; one GPU thread runs it per channel).
QNUM_HD inline TernaryChannel ternary_channel_exact(const TernarySpec& s, const float* g, std::int64_t n) {
  auto at = [g](std::int64_t k) { return static_cast<double>(g[k]); };
  bool any_nan = false;
  for (std::int64_t k = 0; k < n; ++k) any_nan |= g[k] != g[k];
  TernaryChannel c;
  c.delta = ternary_delta_exact(s, lane_sum(n, [&](std::int64_t k) { return std::fabs(at(k)); }), n, any_nan);
  if (!s.scaling_factor) return c;
  const double d = c.delta;
  const double sum = lane_sum(n, [&](std::int64_t k) { return std::fabs(at(k)) > d ? std::fabs(at(k)) : 0.0; });
  const double count = lane_sum(n, [&](std::int64_t k) { return std::fabs(at(k)) > d ? 1.0 : 0.0; });
  c.alpha = ternary_alpha_exact(d, sum, count);
  return c;
}
inline TernaryChannel ternary_channel_exact(const TernarySpec& s, std::span<const float> g) {
  return ternary_channel_exact(s, g.data(), static_cast<std::int64_t>(g.size()));
}

/// MASE's threshold and scale of one sample (float32).
struct TernarySampleMase {
  float delta = 0, alpha = 1;
};

/// MASE's Ternary/TernaryScaled statistics for one sample of n elements, in float32 with
/// torch's sum order: delta = (0.75 * sum|x|) / n; alpha = sum(|x| * [|x| > delta]) / count
/// (0/0 = NaN); alpha = 1 without scaling_factor.
QNUM_HD inline TernarySampleMase ternary_sample_stats_mase(bool scaling_factor, const float* x, std::int64_t n) {
  TernarySampleMase m;
  m.delta = 0.75f * torch_sum_f32_of([x](std::int64_t j) { return std::fabs(x[j]); }, n) / static_cast<float>(n);
  if (scaling_factor) {
    const float d = m.delta;
    const auto truth = [x, d](std::int64_t j) { return std::fabs(x[j]) > d ? 1.0f : 0.0f; };
    const auto kept = [x, truth](std::int64_t j) { return truth(j) * std::fabs(x[j]); };
    m.alpha = torch_sum_f32_of(kept, n) / torch_sum_f32_of(truth, n);
  }
  return m;
}

/// MASE: one element against its sample's statistics.
QNUM_HD inline float ternary_element_mase(bool scaling_factor, float x, const TernarySampleMase& m) {
  const float t = (x > m.delta ? 1.0f : 0.0f) + (x < -m.delta ? -1.0f : 0.0f);
  return scaling_factor ? t * m.alpha : t;
}

/// MASE's Ternary/TernaryScaled on one sample (read fully before it is written).
inline void ternary_sample_mase(const TernarySpec& s, const float* x, float* out, std::int64_t n) {
  const auto m = ternary_sample_stats_mase(s.scaling_factor, x, n);
  for (std::int64_t j = 0; j < n; ++j) out[j] = ternary_element_mase(s.scaling_factor, x[j], m);
}
/// As above (the scratch buffer of an earlier version is no longer needed).
inline void ternary_sample_mase(const TernarySpec& s, const float* x, float* out, std::int64_t n,
                                std::vector<float>& /*scratch*/) {
  ternary_sample_mase(s, x, out, n);
}

/// exact: one element against its channel's threshold and scale (alpha = float(c.alpha)).
QNUM_HD inline float ternary_element_exact(float x, const TernaryChannel& c, float alpha) {
  const double v = x;
  if (v != v || c.delta != c.delta) return kNaN;
  return v > c.delta ? alpha : (v < -c.delta ? -alpha : 0.0f);
}

}  // namespace detail

/// Thresholds and scales per channel (index of dim 0; one channel for rank <= 1) as exact
/// mode computes them. MASE mode ignores `threshold` and needs 4-D (see quantize).
inline std::vector<TernaryChannel> ternary_channels(const TernarySpec& s, std::span<const float> in,
                                                    const Shape& shape) {
  detail::require(static_cast<std::int64_t>(in.size()) == numel(shape), s.name, ": input has ", in.size(),
                  " elements but shape ", to_string(shape), " needs ", numel(shape));
  const auto groups = detail::channel_groups(shape);
  std::vector<TernaryChannel> out;
  for (std::int64_t g = 0; g < groups.count; ++g)
    out.push_back(detail::ternary_channel_exact(
        s, in.subspan(static_cast<std::size_t>(g * groups.size), static_cast<std::size_t>(groups.size))));
  return out;
}

// ---- tensor quantize -------------------------------------------------------------------

/// Quantizes a C-order tensor. exact: per output channel, any rank >= 0, threshold honoured.
/// MASE: 4-D only, delta = 0.75 * mean|x| per sample whatever threshold/mean/median/maximum say.
inline void quantize(const TernarySpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  if (p.is_mase()) {
    detail::require_mase_4d(s.name, "ternary_quantizer", shape);
    if (shape[0] == 0) return;
    const std::int64_t n = numel(shape) / shape[0];
    for (std::int64_t g = 0; g < shape[0]; ++g)
      detail::ternary_sample_mase(s, in.data() + g * n, out.data() + g * n, n);
    return;
  }
  const auto groups = detail::channel_groups(shape);
  for (std::int64_t g = 0; g < groups.count; ++g) {
    const auto off = static_cast<std::size_t>(g * groups.size);
    const auto c = detail::ternary_channel_exact(s, in.subspan(off, static_cast<std::size_t>(groups.size)));
    const auto alpha = static_cast<float>(c.alpha);
    for (std::size_t j = off; j < off + static_cast<std::size_t>(groups.size); ++j)
      out[j] = detail::ternary_element_exact(in[j], c, alpha);
  }
}

// ---- encode / decode -------------------------------------------------------------------

/// 2-bit code of x against threshold `delta`: 0 -> 0, 1 -> +1, 2 -> -1 (code 3 is unused
/// and decodes to 0). NaN has no code: throws.
inline std::uint32_t encode(const TernarySpec& s, float x, double delta = 0.5) {
  detail::require(x == x, s.name, ": NaN has no ternary code");
  return x > delta ? 1u : (x < -delta ? 2u : 0u);
}

/// The value of a 2-bit code times the channel scale `alpha` (1 without scaling).
inline float decode(const TernarySpec&, std::uint32_t code, float alpha = 1.0f) {
  switch (code & 3u) {
    case 1u:
      return alpha;
    case 2u:
      return -alpha;
    default:
      return 0.0f;
  }
}

/// Bits per code (3 values: log2 3 = 1.585 bits of entropy at most).
inline int code_bits(const TernarySpec&) { return 2; }

inline FormatInfo info(const TernarySpec& s, const Policy& p) {
  FormatInfo f;
  f.bits_per_value = 2;
  f.min_positive = 1;
  f.max = 1;
  f.distinct_values = 3;
  const std::string rule = p.is_mase() ? "delta_i = 0.75 * mean|x_i| per sample (4-D only; threshold ignored)"
                                       : (s.threshold ? "delta = " + detail::format_double(*s.threshold)
                                                      : std::string("delta_c = 0.75 * mean|x_c| per output channel"));
  f.value_set =
      (s.scaling_factor ? "{-alpha, 0, +alpha}, alpha = mean|x| over |x| > delta per channel (shown for alpha = 1); "
                        : "{-1, 0, +1}; ") +
      rule + "; 2-bit codes, log2(3) = 1.585 bits of entropy";
  return f;
}

// ---- value type ------------------------------------------------------------------------

/// A ternary value in {-1, 0, +1} held as its 2-bit code. From float: nearest value, ties
/// (|x| = 0.5) to 0; NaN throws. Products stay ternary.
class Ternary {
 public:
  constexpr Ternary() = default;
  Ternary(float x) : code_(encode(TernarySpec{}, x, 0.5)) {}  // NOLINT: implicit like a number
  static constexpr Ternary from_code(std::uint32_t c) {
    Ternary t;
    t.code_ = (c & 3u) == 3u ? 0u : (c & 3u);  // the unused code 3 reads as 0
    return t;
  }
  constexpr std::uint32_t code() const { return code_; }
  constexpr int as_int() const { return code_ == 1u ? 1 : (code_ == 2u ? -1 : 0); }
  constexpr float value() const { return static_cast<float>(as_int()); }
  explicit constexpr operator float() const { return value(); }
  explicit constexpr operator double() const { return value(); }
  explicit constexpr operator int() const { return as_int(); }

  friend constexpr Ternary operator*(Ternary a, Ternary b) { return of_int(a.as_int() * b.as_int()); }
  constexpr Ternary operator-() const { return of_int(-as_int()); }
  friend constexpr bool operator==(Ternary a, Ternary b) { return a.as_int() == b.as_int(); }
  friend constexpr auto operator<=>(Ternary a, Ternary b) { return a.as_int() <=> b.as_int(); }

 private:
  static constexpr Ternary of_int(int v) {
    Ternary t;
    t.code_ = v > 0 ? 1u : (v < 0 ? 2u : 0u);
    return t;
  }
  std::uint32_t code_ = 0;
};

/// The 2-bit code: Ternary(-1) -> "0b10".
inline std::string to_binary(Ternary v) { return "0b" + detail::bit_string(v.code(), 2); }

}  // namespace qnum

template <>
class std::numeric_limits<qnum::Ternary> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = true;  // the values are the integers -1, 0, +1
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr int digits = 1;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr qnum::Ternary min() noexcept { return qnum::Ternary::from_code(1); }
  static constexpr qnum::Ternary max() noexcept { return qnum::Ternary::from_code(1); }
  static constexpr qnum::Ternary lowest() noexcept { return qnum::Ternary::from_code(2); }
  static constexpr qnum::Ternary epsilon() noexcept { return qnum::Ternary::from_code(1); }
  static constexpr qnum::Ternary round_error() noexcept { return qnum::Ternary::from_code(0); }
  static constexpr qnum::Ternary denorm_min() noexcept { return qnum::Ternary::from_code(1); }
};
