// Binary formats: `binary` ({-1,+1} bipolar, or {0, alpha} scaled per output channel),
// `residual_sign` (multi-level residual binarization, Ghasemzadeh et al.; MASE's
// residual_sign_quantizer) and `binarize` (sign of clamp(x,-1,1) with hard-tanh STE).
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

struct BinarySpec {
  static constexpr std::string_view name = "binary";
  bool stochastic = false;
  bool bipolar = true;

  friend bool operator==(const BinarySpec&, const BinarySpec&) = default;
  void validate() const {}

  static std::vector<KeyDoc> key_docs() {
    return {{"stochastic", "false", "stochastic binarization with p = hard_sigmoid(x)"},
            {"bipolar", "true", "{-1,+1} (true) or {0, alpha} scaled (false)"},
            {"width", "1", "informational; must be 1"}};
  }
  static BinarySpec from_keys(KeyValues& kv) {
    BinarySpec s;
    s.stochastic = kv.take_bool({"stochastic"}, false);
    s.bipolar = kv.take_bool({"bipolar"}, true);
    const int w = kv.take_int({"width"}, 1);
    detail::require(w == 1, name, ": width ", w, " must be 1");
    return s;
  }
  void write_keys(KeyWriter& w) const { w.add("stochastic", stochastic).add("bipolar", bipolar); }
};

/// Residual sign: L levels with means mu_l; output stacked [L, ...input shape].
struct ResidualSignSpec {
  static constexpr std::string_view name = "residual_sign";
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

/// binarize: sign(clamp(x, -1, 1)) in {-1, 0, +1}.
struct BinarizeSpec {
  static constexpr std::string_view name = "binarize";
  friend bool operator==(const BinarizeSpec&, const BinarizeSpec&) = default;
  void validate() const {}
  static std::vector<KeyDoc> key_docs() { return {}; }
  static BinarizeSpec from_keys(KeyValues&) { return {}; }
  void write_keys(KeyWriter&) const {}
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const BinarySpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const BinarySpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

// ---- tensor quantize and info (to be implemented) ---------------------------------------

/// `out` has output_shape(s, p, shape) elements.
inline void quantize(const ResidualSignSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const ResidualSignSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const BinarizeSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const BinarizeSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

/// residual_sign stacks its levels: [L, ...shape] (MASE returns the plain shape for L = 1).
inline Shape output_shape(const ResidualSignSpec& s, const Policy& p, const Shape& in) {
  if (p.is_mase() && s.levels == 1) return in;
  Shape out{s.levels};
  out.insert(out.end(), in.begin(), in.end());
  return out;
}

}  // namespace qnum
