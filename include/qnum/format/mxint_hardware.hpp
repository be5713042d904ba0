// MASE's `mxint_hardware`: p1 x p0 tiles of the last two dims share an ew-bit exponent;
// mantissas are floor-rounded W-bit integers. MASE-only (inference; no gradient).
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

struct MXIntHardwareSpec {
  static constexpr std::string_view name = "mxint_hardware";
  static constexpr std::string_view help = "MASE's hardware MX integer (mase mode only)";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 2> mase_defaults{{{"width", "12"}, {"exponent_width", "6"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;
  int exponent_width = 4;
  std::vector<int> parallelism{1, 16};

  friend bool operator==(const MXIntHardwareSpec&, const MXIntHardwareSpec&) = default;
  /// MASE's format: mase_compat only.
  void check_policy(const Policy& p) const {
    detail::require(p.is_mase(), name,
                    ": mxint_hardware is MASE's format and exists only in mase_compat mode (--mode mase)");
  }
  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width <= 8, name, ": exponent_width ", exponent_width,
                    " must be in [1, 8]");
    detail::require(!parallelism.empty() && parallelism.size() <= 2, name, ": parallelism must have 1 or 2 entries");
    for (int p : parallelism) detail::require(p >= 1, name, ": parallelism ", p, " must be >= 1");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "mantissa bits W"},
            {"exponent_width", "4", "shared exponent bits ew"},
            {"parallelism", "1x16", "tile [p1, p0] over the last two dims"}};
  }
  static MXIntHardwareSpec from_keys(KeyValues& kv) {
    MXIntHardwareSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    if (auto p = kv.take_int_list({"parallelism"})) s.parallelism = *p;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("parallelism", parallelism);
  }
};

// ---- tensor quantize and info ----------------------------------------------------------

namespace detail {
/// The step 2^e of a tile whose max |x| is `amax` (NaN if the tile holds a NaN, as torch.max
/// propagates it), in float32: e = clamp(ceil(log2 amax) - 2^(ew-1), -2^(ew-1), 2^ew - 1 -
/// 2^(ew-1)); an all-zero tile takes the smallest exponent; NaN stays NaN.
QNUM_HD inline float mxint_hardware_step(int exponent_width, float amax) {
  const int bias = 1 << (exponent_width - 1);
  float e = std::ceil(static_cast<float>(std::log2(static_cast<double>(amax)))) - static_cast<float>(bias);
  const float emin = static_cast<float>(-bias), emax = static_cast<float>((1 << exponent_width) - 1 - bias);
  if (e < emin) e = emin;
  if (e > emax) e = emax;
  return is_nan(e) ? e : pow2f(static_cast<int>(e));
}

/// One element of a tile with step p2: p2 * clamp(floor(x / p2), -2^(W-1), 2^(W-1) - 1).
QNUM_HD inline float mxint_hardware_element(int width, float p2, float x) {
  const float lo = -pow2f(width - 1), hi = pow2f(width - 1) - 1.0f;
  float m = std::floor(x / p2);
  if (m < lo) m = lo;
  if (m > hi) m = hi;
  return p2 * m;
}

/// MASE's mxint_quant_block on one tile (mxint_hardware_step, then each element).
inline void mxint_hardware_tile(const MXIntHardwareSpec& s, std::span<float> tile) {
  float amax = 0.0f;
  bool nan = false;
  for (float x : tile) {
    nan |= is_nan(x);
    amax = std::max(amax, std::fabs(x));
  }
  if (nan) amax = kNaN;  // torch.max propagates NaN
  const float p2 = mxint_hardware_step(s.exponent_width, amax);
  for (float& x : tile) x = mxint_hardware_element(s.width, p2, x);
}
}  // namespace detail

/// MASE's mxint_hardware: tiles [p1, p0] of the last two dims (a 1-D tensor is [1, n]; one
/// parallelism entry p means [1, p]); other dims are batched. Same arithmetic in every mode
/// (Format rejects exact mode). Tiles must divide the dims exactly, as MASE asserts.
inline void quantize(const MXIntHardwareSpec& s, const Policy&, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  detail::require(!shape.empty(), s.name, ": needs a tensor of rank >= 1, got a scalar");
  const std::int64_t t0 = shape.back(), t1 = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const std::int64_t p1 = s.parallelism.size() == 2 ? s.parallelism[0] : 1, p0 = s.parallelism.back();
  detail::require(t1 % p1 == 0 && t0 % p0 == 0, s.name, ": parallelism [", p1, ", ", p0,
                  "] does not tile the last two dims [", t1, ", ", t0, "]");
  const std::int64_t n = numel(shape);
  if (n == 0) return;
  const std::int64_t batch = n / (t1 * t0);
  std::vector<float> tile(static_cast<std::size_t>(p1 * p0));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t r = 0; r < t1 / p1; ++r)
      for (std::int64_t c = 0; c < t0 / p0; ++c) {
        auto at = [&](std::int64_t i, std::int64_t j) {
          return static_cast<std::size_t>((b * t1 + r * p1 + i) * t0 + c * p0 + j);
        };
        for (std::int64_t i = 0; i < p1; ++i)
          for (std::int64_t j = 0; j < p0; ++j) tile[static_cast<std::size_t>(i * p0 + j)] = in[at(i, j)];
        detail::mxint_hardware_tile(s, tile);
        for (std::int64_t i = 0; i < p1; ++i)
          for (std::int64_t j = 0; j < p0; ++j) out[at(i, j)] = tile[static_cast<std::size_t>(i * p0 + j)];
      }
}

inline FormatInfo info(const MXIntHardwareSpec& s, const Policy&) {
  s.validate();
  FormatInfo f;
  const int bias = 1 << (s.exponent_width - 1);
  const int tile = s.parallelism.size() == 2 ? s.parallelism[0] * s.parallelism[1] : s.parallelism[0];
  f.bits_per_value = s.width + static_cast<double>(s.exponent_width) / tile;
  f.min_positive = detail::pow2(-bias);
  f.max = detail::scale2(detail::pow2(s.width - 1) - 1.0, (1 << s.exponent_width) - 1 - bias);
  f.distinct_values = detail::pow2(s.width);
  f.value_set = detail::concat("m * 2^e, m in [", -(1LL << (s.width - 1)), ", ", (1LL << (s.width - 1)) - 1,
                               "] (floor), e in [", -bias, ", ", (1 << s.exponent_width) - 1 - bias,
                               "] shared per tile ", s.parallelism.size() == 2 ? s.parallelism[0] : 1, "x",
                               s.parallelism.back(), " of the last two dims");
  return f;
}

}  // namespace qnum
