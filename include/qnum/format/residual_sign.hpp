// `residual_sign`: multi-level residual binarization (Ghasemzadeh et al.; MASE's
// residual_sign_quantizer): level l binarizes the residual left by levels 1..l-1 and scales it
// by |mu_l|; the levels are stacked [L, ...shape].
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/binarize.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

/// Residual sign: L levels with means mu_l; output stacked [L, ...input shape].
struct ResidualSignSpec {
  static constexpr std::string_view name = "residual_sign";
  static constexpr std::string_view help = "multi-level residual binarization, stacked [L, ...]";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::stacked; }
  int levels = 2;
  std::vector<double> means;  // empty: (L, L-1, ..., 1) / sum

  friend bool operator==(const ResidualSignSpec&, const ResidualSignSpec&) = default;

  std::vector<double> effective_means() const {
    if (!means.empty()) return means;
    std::vector<double> m;
    const double sum = levels * (levels + 1) / 2.0;
    for (int l = levels; l >= 1; --l) m.push_back(l / sum);
    return m;
  }
  void validate() const {
    detail::require(levels >= 1 && levels <= 8, name, ": levels ", levels, " must be in [1, 8]");
    detail::require(means.empty() || static_cast<int>(means.size()) == levels, name, ": means has ", means.size(),
                    " entries, levels is ", levels);
    for (double m : means) detail::require(std::isfinite(m), name, ": means entry ", m, " must be finite");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"levels", "2", "number of residual levels L"},
            {"means", "none", "per-level means (e.g. 0.7x0.3); none = (L..1)/sum"},
            {"x_quantizer", "none", "accepted for MASE compatibility; ignored by MASE"}};
  }
  static ResidualSignSpec from_keys(KeyValues& kv) {
    ResidualSignSpec s;
    s.levels = kv.take_int({"levels"}, 2);
    if (auto m = kv.take_double_list({"means"})) s.means = *m;
    if (auto xq = kv.take({"x_quantizer"}))
      detail::require(KeyValues::is_none(*xq), name, ": x_quantizer must be none (MASE ignores it)");
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("levels", levels);
    if (!means.empty()) w.add("means", means);
  }
};

// ---- residual_sign ------------------------------------------------------------------------

namespace detail {

/// residual_sign's checks (spec, shapes, output size L·n, MASE's level limit); returns the
/// effective means.
inline std::vector<double> residual_sign_prepare(const ResidualSignSpec& s, const Policy& p, std::size_t in_size,
                                                 std::size_t out_size, const Shape& shape) {
  s.validate();
  for (auto d : shape) require(d >= 0, s.name, ": negative dimension in shape ", to_string(shape));
  require(static_cast<std::int64_t>(in_size) == numel(shape), s.name, ": input has ", in_size, " elements but shape ",
          to_string(shape), " needs ", numel(shape));
  const auto L = static_cast<std::size_t>(s.levels);
  require(out_size == in_size * L, s.name, ": output has ", out_size, " elements, needs ", in_size * L, " (levels ",
          s.levels, " x ", in_size, ")");
  if (p.is_mase())
    require(s.levels <= 3, s.name, ": MASE's residual_sign_quantizer handles levels 1..3 (it returns 0 for ", s.levels,
            "); use exact mode");
  return s.effective_means();
}

/// The L outputs of one element x, written to out[0], out[stride], ... (the definition).
/// exact: double residuals, o_l = sign(r) |mu_l| + 0 (no -0 levels), NaN stays NaN.
/// mase: float32, means |float(mu_l)|; L = 1: MASE's `0 + out` turns -0 into +0.
QNUM_HD inline void residual_sign_element(const double* means, std::size_t L, bool mase, float x, float* out,
                                          std::size_t stride) {
  if (mase) {
    float r = x;
    for (std::size_t l = 0; l < L; ++l) {
      const float o = binarize_value(r) * std::fabs(static_cast<float>(means[l]));
      r = r - o;
      out[l * stride] = L == 1 ? 0.0f + o : o;
    }
    return;
  }
  double r = x;
  for (std::size_t l = 0; l < L; ++l) {
    const double b = r != r ? r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0));
    const double o = b * std::fabs(means[l]) + 0.0;
    r -= o;
    out[l * stride] = static_cast<float>(o);
  }
}
inline void residual_sign_element(const std::vector<double>& means, bool mase, float x, float* out,
                                  std::size_t stride) {
  residual_sign_element(means.data(), means.size(), mase, x, out, stride);
}

}  // namespace detail

/// Residual binarization: r_0 = x, o_l = binarize(r_{l-1}) * |mu_l|, r_l = r_{l-1} - o_l;
/// `out` (output_shape elements) holds the o_l stacked [L, ...shape] (their sum is x-hat).
/// MASE mode: float32 arithmetic, float32 means, levels 1..3, L = 1 unstacked.
inline void quantize(const ResidualSignSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  const auto means = detail::residual_sign_prepare(s, p, in.size(), out.size(), shape);
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) detail::residual_sign_element(means, p.is_mase(), in[i], out.data() + i, n);
}

inline FormatInfo info(const ResidualSignSpec& s, const Policy&) {
  const auto means = s.effective_means();
  // x-hat = sum_l s_l |mu_l|, s_l in {-1, 0, +1} (0 only for an exactly zero residual)
  std::vector<double> sums{0.0};
  for (double m : means) {
    std::vector<double> next;
    for (double v : sums)
      for (double t : {-1.0, 0.0, 1.0}) next.push_back(v + t * std::fabs(m));
    sums.swap(next);
  }
  std::sort(sums.begin(), sums.end());
  sums.erase(std::unique(sums.begin(), sums.end()), sums.end());
  FormatInfo f;
  f.bits_per_value = s.levels;
  f.distinct_values = static_cast<double>(sums.size());
  for (double v : sums)
    if (v > 0 && (f.min_positive == 0 || v < f.min_positive)) f.min_positive = v;
  f.max = sums.back();
  std::string ms;
  for (double m : means) ms += (ms.empty() ? "" : ", ") + detail::format_double(m);
  f.value_set = detail::concat("levels o_l in {-|mu_l|, 0, +|mu_l|} stacked [", s.levels,
                               ", ...]; x-hat = sum o_l; mu = (", ms, ")");
  return f;
}

/// residual_sign stacks its levels: [L, ...shape] (MASE returns the plain shape for L = 1).
inline Shape output_shape(const ResidualSignSpec& s, const Policy& p, const Shape& in) {
  if (p.is_mase() && s.levels == 1) return in;
  Shape out{s.levels};
  out.insert(out.end(), in.begin(), in.end());
  return out;
}

}  // namespace qnum
