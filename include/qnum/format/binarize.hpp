// `binarize`: sign(clamp(x, -1, 1)) in {-1, 0, +1} with the hard-tanh STE (MASE's residual
// binarizer, spec/formats.md 2.9); residual_sign applies it level by level.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

/// binarize: sign(clamp(x, -1, 1)) in {-1, 0, +1}.
struct BinarizeSpec {
  static constexpr std::string_view name = "binarize";
  static constexpr std::string_view help = "sign(clamp(x,-1,1)) in {-1,0,+1}";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  friend bool operator==(const BinarizeSpec&, const BinarizeSpec&) = default;
  void validate() const {}
  static std::vector<KeyDoc> key_docs() { return {}; }
  static BinarizeSpec from_keys(KeyValues&) { return {}; }
  void write_keys(KeyWriter&) const {}
};

namespace detail {

/// MASE's binarize (c = clamp(x,-1,1); c + (sign(c) - c)) in float32: sign(clamp(x)) with
/// NaN -> NaN and -0 -> +0 (the float32 sum is exactly sign(c) for every other input).
QNUM_HD inline float binarize_value(float x) {
  if (x != x) return x;
  return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
}

}  // namespace detail

// ---- binarize -----------------------------------------------------------------------------

/// sign(clamp(x, -1, 1)) in {-1, 0, +1}; NaN stays NaN, -0 gives +0 (same in both modes).
QNUM_HD inline float quantize(const BinarizeSpec&, const Policy&, float x, std::uint64_t = 0) {
  return detail::binarize_value(x);
}

inline FormatInfo info(const BinarizeSpec&, const Policy&) {
  FormatInfo f;
  f.bits_per_value = 2;
  f.min_positive = 1;
  f.max = 1;
  f.distinct_values = 3;
  f.value_set = "{-1, 0, +1} = sign(clamp(x, -1, 1)); backward: hard-tanh STE (gradient 1 for |x| <= 1)";
  return f;
}

}  // namespace qnum
