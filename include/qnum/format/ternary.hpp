// Ternary (`ternary`): {-1, 0, +1} or {-alpha_i, 0, +alpha_i} per output channel, with a
// threshold Delta. MASE's `ternary_quantizer`.
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

struct TernarySpec {
  static constexpr std::string_view name = "ternary";
  bool scaling_factor = false;
  std::optional<double> threshold;  // exact: absolute threshold if set; MASE ignores it
  std::optional<double> mean, median, maximum;  // MASE statistics (ignored by MASE's rule)

  friend bool operator==(const TernarySpec&, const TernarySpec&) = default;
  void validate() const {
    detail::require(!threshold || *threshold >= 0, name, ": threshold ", threshold.value_or(0), " must be >= 0");
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

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const TernarySpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const TernarySpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
