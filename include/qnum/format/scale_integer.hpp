// Per-row dynamically scaled integer (`scale_integer`): s = 2^(W-1) / max|row| (MASE) and
// k = round(x * s) clamped, value k / s. MASE's `scale_integer_quantizer`.
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

struct ScaleIntegerSpec {
  static constexpr std::string_view name = "scale_integer";
  int width = 8;
  bool is_signed = true;
  std::optional<double> quantile;  // accepted and ignored (as MASE does)

  friend bool operator==(const ScaleIntegerSpec&, const ScaleIntegerSpec&) = default;
  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "bits W"},
            {"is_signed", "true", "signed [-2^(W-1), 2^(W-1)-1] or unsigned [0, 2^W-1]"},
            {"quantile", "none", "accepted for MASE compatibility; ignored"}};
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

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const ScaleIntegerSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const ScaleIntegerSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
