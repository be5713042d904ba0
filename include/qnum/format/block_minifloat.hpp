// Block minifloat (`block_minifloat`): minifloat_ieee elements (1 sign, E exponent, M = W-E-1
// mantissa bits, subnormals, no Inf/NaN) with a shared exponent bias per block (bw bits).
// MASE's `block_minifloat_quantizer`.
//
// exact: the paper's orientation: b = (2^E-1) - floor(log2 max), a signed bw-bit field
//   clamped to [-2^(bw-1), 2^(bw-1)-1], so the block max sits in the top binade; each element
//   is the correctly rounded (carry, policy rounding, saturating) minifloat_ieee value with
//   bias b. NaN in a block -> NaN block; +-Inf -> the block takes the bias of a max of 2^127
//   and the Inf saturates. All-zero block: b = 2^(bw-1)-1.
// mase: spec §2.7 in float32: b = clamp(floor(log2 max), 0, 2^bw-1) (inverted), elements by
//   MASE's minifloat_ieee rule (+1e-9, no carry, |x| <= 1e-8 passed through).
//
// Sections: spec and validation, MASE emulation, exact block codec, tensor quantize and
// info, encode_block/decode_block.
#pragma once

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
#include "qnum/format/block.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

// ---- spec and validation ---------------------------------------------------------------

struct BlockMinifloatSpec {
  static constexpr std::string_view name = "block_minifloat";
  static constexpr std::string_view help = "minifloat elements, shared bias per block";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"block_size", "16"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;
  int exponent_width = 4;
  int exponent_bias_width = 8;
  std::vector<int> block_size{16};

  friend bool operator==(const BlockMinifloatSpec&, const BlockMinifloatSpec&) = default;

  constexpr int mantissa_bits() const { return width - exponent_width - 1; }
  /// Range of the shared bias: exact (signed field) or MASE ([0, 2^bw-1]).
  constexpr int bias_min(bool mase) const { return mase ? 0 : -(1 << (exponent_bias_width - 1)); }
  constexpr int bias_max(bool mase) const {
    return mase ? (1 << exponent_bias_width) - 1 : (1 << (exponent_bias_width - 1)) - 1;
  }

  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width < width, name, ": exponent_width ", exponent_width,
                    " must be in [1, width-1] (width ", width, ")");
    detail::require(exponent_width <= 6, name, ": exponent_width ", exponent_width, " must be <= 6");
    detail::require(exponent_bias_width >= 1 && exponent_bias_width <= 8, name, ": exponent_bias_width ",
                    exponent_bias_width, " must be in [1, 8]");
    detail::validate_block_size(name, block_size);
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total element bits W"},
            {"exponent_width", "4", "element exponent bits E"},
            {"exponent_bias_width", "8", "bits of the shared per-block bias"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims"}};
  }
  static BlockMinifloatSpec from_keys(KeyValues& kv) {
    BlockMinifloatSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    s.exponent_bias_width = kv.take_int({"exponent_bias_width"}, 8);
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias_width", exponent_bias_width);
    w.add("block_size", block_size);
  }
};

namespace detail {

// ---- MASE emulation ----------------------------------------------------------------------

/// MASE's minifloat_ieee element with a float32 (per-block) bias `bias`, step for step
/// (spec §2.4): exponent from floor(log2(|x|+1e-9)) clamped to [-b, 2^E-1-b], no carry,
/// subnormal slot at e = -b, |x| <= 1e-8 passed through.
QNUM_HD inline float minifloat_ieee_mase_element(int W, int E, float bias, float x) {
  const int M = W - E - 1;
  const float emax = static_cast<float>((1 << E) - 1) - bias, emin = -bias;
  const float shift = pow2f(M), kmax = shift - 1.0f;
  const float sign = mase_sign(x + 1e-9f);
  const float value = std::fabs(x);
  const float e = mase_clamp(std::floor(mase_log2(value + 1e-9f)), emin, emax);
  const float mant = value / mase_exp2(e);
  const float normal = e == -bias ? 0.0f : 1.0f;  // torch.isclose on integers is ==
  const float kn = mase_clamp(mase_round(mant * shift - shift), 0.0f, kmax);
  const float ks = mase_clamp(mase_round(mant * shift / 2.0f), 0.0f, kmax);
  const float k = normal * kn + (1.0f - normal) * ks;
  const float m = normal * (1.0f + k / shift) + (1.0f - normal) * (k / shift * 2.0f);
  const float c = mase_close_to_zero(value) ? 1.0f : 0.0f;
  return (1.0f - c) * (sign * mase_exp2(e) * m) + c * x;
}

/// MASE's shared bias of a block from its (zero-rule) max: clamp(floor(log2 max), 0, bmax).
QNUM_HD inline float mase_block_minifloat_bias(float block_max, float bmax) {
  return mase_clamp(std::floor(mase_log2(block_max)), 0.0f, bmax);
}

/// MASE's block_minifloat on a whole tensor (spec §2.7).
inline void block_minifloat_quantize_mase(const BlockMinifloatSpec& s, std::span<const float> in, std::span<float> out,
                                          const Shape& shape, Role role) {
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const auto maxima = mase_block_maxima(L, in);
  const float bmax = static_cast<float>(s.bias_max(true));
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    const float bias = mase_block_minifloat_bias(maxima[static_cast<std::size_t>(b)], bmax);
    for (auto i : idx) {
      const float q = minifloat_ieee_mase_element(s.width, s.exponent_width, bias, in[static_cast<std::size_t>(i)]);
      out[static_cast<std::size_t>(i)] = mase_fold_add(q, L.mase_fold);
    }
  });
}

// ---- exact block codec -------------------------------------------------------------------

// The per-block steps are QNUM_HD functions of a trivially copyable parameter struct, so the
// CUDA kernels (one warp per block) run the same definitions as block_minifloat_encode_exact.

/// What exact mode needs of a BlockMinifloatSpec: element widths and the signed bias range.
struct BlockMinifloatExact {
  int width = 0, exponent_width = 0, M = 0, bias_min = 0, bias_max = 0;
};
inline BlockMinifloatExact block_minifloat_exact_params(const BlockMinifloatSpec& s) {
  return {s.width, s.exponent_width, s.mantissa_bits(), s.bias_min(false), s.bias_max(false)};
}

/// The grid of minifloat_ieee(W, E) with bias b: precision M+1, smallest normal binade 1-b,
/// max 2^(2^E-1-b) * (2 - 2^-M).
QNUM_HD inline FloatGrid block_minifloat_grid(const BlockMinifloatExact& k, int b, const Policy& p) {
  FloatGrid g;
  g.precision = k.M + 1;
  g.emin = 1 - b;
  g.max = (2.0 - pow2(-k.M)) * pow2((1 << k.exponent_width) - 1 - b);
  g.subnormals = p.subnormals == Subnormals::keep;
  return g;
}
inline FloatGrid block_minifloat_grid(const BlockMinifloatSpec& s, int b, const Policy& p) {
  return block_minifloat_grid(block_minifloat_exact_params(s), b, p);
}

/// The paper-orientation shared bias of a block (exact mode), clamped to the signed field.
QNUM_HD inline int block_minifloat_bias_exact(const BlockMinifloatExact& k, const BlockScan& scan) {
  const int top = (1 << k.exponent_width) - 1;
  int b = k.bias_max;  // all zeros: finest grid
  if (scan.has_inf)
    b = top - 127;
  else if (scan.max > 0)
    b = top - ilog2(scan.max);
  return std::clamp(b, k.bias_min, k.bias_max);
}
inline int block_minifloat_bias_exact(const BlockMinifloatSpec& s, const BlockScan& scan) {
  return block_minifloat_bias_exact(block_minifloat_exact_params(s), scan);
}

/// Exact minifloat code (sign, exponent field, mantissa) of an on-grid magnitude q.
QNUM_HD inline std::uint32_t block_minifloat_code(const BlockMinifloatExact& k, int b, bool neg, double q) {
  const int M = k.M;
  std::uint32_t field = 0, mant = 0;
  if (q < pow2(1 - b)) {
    mant = static_cast<std::uint32_t>(scale2(q, b - 1 + M));
  } else {
    const int e = ilog2(q);
    field = static_cast<std::uint32_t>(e + b);
    mant = static_cast<std::uint32_t>(scale2(q, M - e) - pow2(M));
  }
  return (static_cast<std::uint32_t>(neg) << (k.width - 1)) | (field << M) | mant;
}

/// Code of one element on the block's grid g (bias b): rounded under the policy, Inf and
/// overflow saturating.
QNUM_HD inline std::uint32_t block_minifloat_element_code(const BlockMinifloatExact& k, const FloatGrid& g, int b,
                                                          const Policy& p, float x, std::uint64_t index) {
  const bool neg = sign_bit(x);
  double q = g.max;
  if (!is_inf(x)) q = round_to_grid(g, abs(static_cast<double>(x)), neg, p.rounding, stochastic_draw(p, index));
  return block_minifloat_code(k, b, neg, q < g.max ? q : g.max);
}

QNUM_HD inline float block_minifloat_decode_exact(const BlockMinifloatExact& k, int b, std::uint32_t code) {
  const int M = k.M;
  const std::uint32_t mant = code & ((1u << M) - 1u);
  const int field = static_cast<int>((code >> M) & ((1u << k.exponent_width) - 1u));
  const double v = field == 0 ? scale2(mant, 1 - b - M) : scale2(pow2(M) + mant, field - b - M);
  return static_cast<float>((code >> (k.width - 1)) & 1u ? -v : v);
}
inline float block_minifloat_decode_exact(const BlockMinifloatSpec& s, int b, std::uint32_t code) {
  return block_minifloat_decode_exact(block_minifloat_exact_params(s), b, code);
}

/// Exact codes of one gathered block (no NaN); returns the shared bias.
inline int block_minifloat_encode_exact(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> x,
                                        std::span<const std::int64_t> index, std::span<std::uint32_t> codes) {
  const auto k = block_minifloat_exact_params(s);
  const int b = block_minifloat_bias_exact(k, scan_block(x));
  const auto g = block_minifloat_grid(k, b, p);
  for (std::size_t j = 0; j < x.size(); ++j)
    codes[j] = block_minifloat_element_code(k, g, b, p, x[j], static_cast<std::uint64_t>(index[j]));
  return b;
}

}  // namespace detail

// ---- tensor quantize and info ----------------------------------------------------------

/// Quantizes a C-order tensor of `shape` block by block; `role` matters only under MASE
/// semantics (it selects MASE's blocking path, spec §1.2).
inline void quantize(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::block_minifloat_quantize_mase(s, in, out, shape, role);
  detail::quantize_blocks_exact<BlockMinifloatSpec, detail::block_minifloat_encode_exact,
                                detail::block_minifloat_decode_exact>(s, p, in, out, shape);
}

/// Facts: W + bw/B bits per element; 2^W - 1 distinct values per element for a fixed bias;
/// global range over the shared bias range (exact: capped to what float32 inputs reach).
inline FormatInfo info(const BlockMinifloatSpec& s, const Policy& p) {
  const bool mase = p.is_mase();
  const int M = s.mantissa_bits(), top = (1 << s.exponent_width) - 1;
  int emax = top - s.bias_min(mase);
  if (!mase) emax = std::min(emax, 127);  // a block max < 2^128 never needs more
  FormatInfo f;
  f.bits_per_value = s.width + s.exponent_bias_width / detail::elements_per_block(s.block_size);
  f.min_positive = detail::pow2(1 - s.bias_max(mase) - M);
  f.max = (2.0 - detail::pow2(-M)) * detail::pow2(emax);
  f.distinct_values = detail::pow2(s.width) - 1;
  f.value_set = detail::concat("minifloat_ieee E", s.exponent_width, "M", M, " with shared bias b in [",
                               s.bias_min(mase), ", ", s.bias_max(mase), "]: normals 2^e(1+k/2^", M, "), e in [1-b, ",
                               top, "-b]; subnormals k*2^(1-b-", M, ")");
  return f;
}

// ---- encode_block / decode_block ---------------------------------------------------------

/// Exact codes of one 1-D block: shared = bias b as a two's-complement bw-bit field, codes =
/// W-bit minifloat (sign, E-bit exponent field, M-bit mantissa). NaN has no code: throws.
inline BlockCodes encode_block(const BlockMinifloatSpec& s, std::span<const float> x, const Policy& p = exact) {
  s.validate();
  detail::require(!detail::scan_block(x).has_nan, s.name, ": NaN has no block_minifloat code");
  std::vector<std::int64_t> index(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) index[j] = static_cast<std::int64_t>(j);
  BlockCodes c;
  c.codes.resize(x.size());
  const int b = detail::block_minifloat_encode_exact(s, p, x, index, c.codes);
  c.shared = static_cast<std::uint32_t>(b) & ((1u << s.exponent_bias_width) - 1u);
  return c;
}

/// Values of a block's codes.
inline std::vector<float> decode_block(const BlockMinifloatSpec& s, const BlockCodes& c) {
  const int bw = s.exponent_bias_width;
  int b = static_cast<int>(c.shared & ((1u << bw) - 1u));
  if (b >= (1 << (bw - 1))) b -= 1 << bw;
  std::vector<float> out(c.codes.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = detail::block_minifloat_decode_exact(s, b, c.codes[j]);
  return out;
}

}  // namespace qnum
