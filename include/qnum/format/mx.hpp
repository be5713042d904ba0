// MX block formats: `mxint` (k-bit integer elements) and `mxfp` (FP8/FP6/FP4 elements), each
// block of `block_size` elements sharing one power-of-two scale.
//
// exact (default) = OCP MX v1.0: blocks of consecutive elements along block_dim that never
//   cross the other axes (the last block is implicitly zero-padded); shared exponent
//   floor(log2 amax) - emax_elem from the bits, E8M0 clamped to [-127, 127]; all-zero block ->
//   2^-127; a NaN or Inf anywhere in a block -> scale code 0xFF (NaN) -> the whole block NaN.
//   Elements rounded under policy.rounding, saturating, subnormals kept.
// mase = MASE's mxint_quantizer / mxfp_quantizer bit for bit (flattened unpadded blocks, ceil
//   scale for mxint, the `_minifloat_mx` codec for mxfp, torch.quantile clip search).
//
// Sections: specs, blocking, exact (OCP) blocks, MASE arithmetic, tensor quantize, info,
// encode/decode of one block. Packed storage and mase-cuda MXINT8 are in mx_packed.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/mx_element.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_io.hpp"

namespace qnum {

// ---- specs -----------------------------------------------------------------------------

/// MX integer: `width`-bit two's-complement elements (OCP: k * 2^-(width-2)) sharing a
/// `scale_bits` exponent per `block_size` elements along `block_dim`.
struct MXIntSpec {
  static constexpr std::string_view name = "mxint";
  static constexpr std::string_view help = "MX integer: shared E8M0 scale per block (preset mxint8)";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 3> mase_defaults{
      {{"block_dim", "-1"}, {"scale_bits", "8"}, {"quantile_search", "false"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;  // element bits k (MASE: element_bits)
  int block_size = 32;
  int block_dim = -1;
  int scale_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXIntSpec&, const MXIntSpec&) = default;

  void validate() const {
    detail::require(width >= 2 && width <= 16, name, ": width ", width, " must be in [2, 16]");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size, " must be in [1, 4096]");
    detail::require(scale_bits >= 1 && scale_bits <= 8, name, ": scale_bits ", scale_bits, " must be in [1, 8]");
  }
  constexpr MXElement element() const { return MXElement::integer(width); }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "element bits k incl. sign (MASE: element_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_bits", "8", "bits of the shared exponent (OCP: 8, E8M0)"},
            {"quantile_search", "false", "per-block clip search over quantiles of |x| (MASE)"}};
  }
  static std::vector<SpecPreset<MXIntSpec>> presets() {
    return {{"mxint8", MXIntSpec{8, 32, -1, 8, false}, "OCP MXINT8: 32 int8 elements (2^-6 units), E8M0 scale"}};
  }
  static MXIntSpec from_keys(KeyValues& kv) {
    MXIntSpec s;
    s.width = kv.take_int({"width", "element_bits"}, 8);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_bits = kv.take_int({"scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_bits != 8) w.add("scale_bits", scale_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

/// MX float (`mxfp`): E/M minifloat elements sharing an E8M0 scale. exact: OCP E4M3, E5M2,
/// E3M2, E2M3, E2M1; mase_compat additionally E1M2.
struct MXFPSpec {
  static constexpr std::string_view name = "mxfp";
  static constexpr std::string_view help = "MX float: shared E8M0 scale per block (presets mxfp8/6/4_*)";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 3> mase_defaults{
      {{"block_dim", "-1"}, {"scale_exp_bits", "8"}, {"quantile_search", "false"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int exponent_width = 4;  // MASE: element_exp_bits
  int frac_width = 3;      // mantissa bits; MASE: element_frac_bits
  int block_size = 32;
  int block_dim = -1;
  int scale_exp_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXFPSpec&, const MXFPSpec&) = default;

  constexpr int element_bits() const { return 1 + exponent_width + frac_width; }
  constexpr MXElement element() const { return MXElement::fp(exponent_width, frac_width); }

  void validate() const {
    const int e = exponent_width, m = frac_width;
    const bool known = (e == 4 && m == 3) || (e == 5 && m == 2) || (e == 3 && m == 2) || (e == 2 && m == 3) ||
                       (e == 2 && m == 1) || (e == 1 && m == 2);
    detail::require(known, name, ": exponent_width ", e, " with frac_width ", m,
                    " is not an MX element (allowed: E4M3, E5M2, E3M2, E2M3, E2M1; mase_compat also E1M2)");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size, " must be in [1, 4096]");
    detail::require(scale_exp_bits == 8, name, ": scale_exp_bits ", scale_exp_bits,
                    " is not allowed (allowed: 8, the E8M0 scale; MASE: \"Invalid scale exponent bits: ",
                    scale_exp_bits, ". Legal values are: (8,).\")");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"exponent_width", "4", "element exponent bits (MASE: element_exp_bits)"},
            {"frac_width", "3", "element mantissa bits (MASE: element_frac_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_exp_bits", "8", "bits of the shared exponent (must be 8)"},
            {"quantile_search", "false", "per-block clip search over quantiles of |x| (MASE)"}};
  }
  static std::vector<SpecPreset<MXFPSpec>> presets() {
    return {{"mxfp8_e4m3", MXFPSpec{4, 3, 32, -1, 8, false}, "OCP MXFP8 E4M3, block 32"},
            {"mxfp8_e5m2", MXFPSpec{5, 2, 32, -1, 8, false}, "OCP MXFP8 E5M2, block 32"},
            {"mxfp6_e3m2", MXFPSpec{3, 2, 32, -1, 8, false}, "OCP MXFP6 E3M2, block 32"},
            {"mxfp6_e2m3", MXFPSpec{2, 3, 32, -1, 8, false}, "OCP MXFP6 E2M3, block 32"},
            {"mxfp4_e2m1", MXFPSpec{2, 1, 32, -1, 8, false}, "OCP MXFP4 E2M1, block 32"}};
  }
  static MXFPSpec from_keys(KeyValues& kv) {
    MXFPSpec s;
    s.exponent_width = kv.take_int({"exponent_width", "element_exp_bits"}, 4);
    s.frac_width = kv.take_int({"frac_width", "element_frac_bits"}, 3);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_exp_bits = kv.take_int({"scale_exp_bits", "scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("exponent_width", exponent_width).add("frac_width", frac_width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_exp_bits != 8) w.add("scale_exp_bits", scale_exp_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

/// One encoded block: the shared scale code (E8M0 for 8 scale bits; all ones = NaN) and one
/// element code per element (low `element.width` bits; see encode(MXElement, ...)).
struct MXBlockCodes {
  std::uint8_t scale = 0;
  std::vector<std::uint16_t> elements;
};

namespace detail {

// ---- blocking --------------------------------------------------------------------------

/// The candidate clip quantiles of MASE's quantile_search, in its order.
inline constexpr std::array<double, 11> mx_clip_quantiles{1.0,  0.995, 0.99, 0.97, 0.95, 0.93,
                                                          0.90, 0.80,  0.70, 0.60, 0.50};

/// Flat (C-order) index of position `pos` of the tensor with its axis moved last: fibers of
/// `n` (the axis length) consecutive positions, fiber f = o * inner + i (o over the axes
/// before, i over those after).
QNUM_HD constexpr std::int64_t mx_axis_last_flat(std::int64_t pos, std::int64_t n, std::int64_t inner) {
  const std::int64_t f = pos / n, t = pos % n;
  return (f / inner * n + t) * inner + f % inner;
}

/// Sizes of the axes before and after `axis` (their products).
inline std::pair<std::int64_t, std::int64_t> mx_outer_inner(const Shape& shape, int axis) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  return {outer, inner};
}

/// Flat (C-order) indices of the tensor with `axis` moved last (MASE's flatten_for_quantize):
/// runs of shape[axis] consecutive entries are the fibers along the axis.
inline std::vector<std::int64_t> mx_axis_last_order(const Shape& shape, int axis) {
  const auto [outer, inner] = mx_outer_inner(shape, axis);
  const std::int64_t n = shape[static_cast<std::size_t>(axis)];
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(outer * n * inner));
  for (std::int64_t pos = 0; pos < outer * n * inner; ++pos) order.push_back(mx_axis_last_flat(pos, n, inner));
  return order;
}

/// block_dim normalised to [0, rank); rank 0 counts as rank 1 in exact mode.
inline int mx_axis(std::string_view family, int block_dim, std::size_t rank) {
  const int r = static_cast<int>(rank);
  require(block_dim >= -r && block_dim < r, family, ": block_dim ", block_dim, " is out of range for a tensor of rank ",
          r, " (allowed: ", -r, "..", r - 1, ")");
  return block_dim < 0 ? block_dim + r : block_dim;
}

QNUM_HD inline int mx_scale_bias(int scale_bits) { return (1 << (scale_bits - 1)) - 1; }

// ---- exact (OCP MX v1.0) blocks ----------------------------------------------------------

/// Shared exponent of a block whose values are finite: floor(log2 clip) - emax_elem from the
/// bits, clamped to [-bias, bias]; clip 0 -> -bias (scale 2^-127: every element is 0).
QNUM_HD inline int mx_exact_scale_exp(const MXElement& e, int scale_bits, double clip) {
  const int bias = mx_scale_bias(scale_bits);
  if (clip == 0.0) return -bias;
  const int x = ilog2(clip) - e.emax();
  return x < -bias ? -bias : (x > bias ? bias : x);
}

/// Element `x` of a block with shared exponent `sexp`, quantized in units of the scale
/// (`index`: its flat position, which keys stochastic rounding).
QNUM_HD inline float mx_block_element(const MXElement& e, const Policy& p, int sexp, float x, std::uint64_t index) {
  const float y = static_cast<float>(scale2(static_cast<double>(x), -sexp));
  return quantize_element(e, p, y, stochastic_draw(p, index));
}

/// The value of an element quantized in units of the scale: q * 2^sexp.
QNUM_HD inline float mx_exact_value(int sexp, float q) {
  return static_cast<float>(scale2(static_cast<double>(q), sexp));
}

/// The exact clip search's neighbours in the sorted magnitudes for quantile q of n values
/// and the weight of the upper one (rank = q * (n - 1) in double).
struct MxClipRank {
  std::size_t lo, hi;
  double frac;
};
QNUM_HD inline MxClipRank mx_exact_clip_rank(std::size_t n, double q) {
  const double rank = q * static_cast<double>(n - 1);
  const auto lo = static_cast<std::size_t>(rank);
  return {lo, lo + 1 < n ? lo + 1 : n - 1, rank - static_cast<double>(lo)};
}
/// The clip value between the neighbours a = sorted[lo] and b = sorted[hi].
QNUM_HD inline double mx_exact_clip(double a, double b, double frac) { return a + frac * (b - a); }

/// One element's squared error under the candidate exponent `sexp` (summed in element order).
QNUM_HD inline double mx_exact_sq_err(const MXElement& e, const Policy& p, int sexp, float x, std::uint64_t index) {
  const double d = scale2(static_cast<double>(mx_block_element(e, p, sexp, x, index)), sexp) - static_cast<double>(x);
  return d * d;
}

/// Quantizes one block under OCP semantics; writes values (may be null) and codes (may be
/// null); returns the scale code. `idx` holds each element's flat index (stochastic draws).
/// quantile_search: the clip value is chosen among quantiles of |x| by least L2 error.
inline std::uint8_t mx_exact_block(const MXElement& e, int scale_bits, bool quantile_search, const Policy& p,
                                   std::span<const float> xs, std::span<const std::int64_t> idx, float* values,
                                   std::uint16_t* codes) {
  const std::size_t n = xs.size();
  double amax = 0;
  bool special = false;
  for (float x : xs) {
    special |= !is_finite(x);
    amax = std::max(amax, abs(static_cast<double>(x)));
  }
  if (special) {  // OCP: NaN scale, the whole block is NaN
    for (std::size_t i = 0; i < n; ++i) {
      if (values) values[i] = kNaN;
      if (codes) codes[i] = 0;
    }
    return static_cast<std::uint8_t>((1u << scale_bits) - 1);
  }
  auto element_of = [&](int sexp, std::size_t i) {
    return mx_block_element(e, p, sexp, xs[i], static_cast<std::uint64_t>(idx[i]));
  };
  int sexp = mx_exact_scale_exp(e, scale_bits, amax);
  if (quantile_search && n > 1) {
    std::vector<double> sorted(n);
    for (std::size_t i = 0; i < n; ++i) sorted[i] = abs(static_cast<double>(xs[i]));
    std::sort(sorted.begin(), sorted.end());
    double best = std::numeric_limits<double>::infinity();
    int tried = std::numeric_limits<int>::min();
    for (double q : mx_clip_quantiles) {
      const MxClipRank r = mx_exact_clip_rank(n, q);
      const int cand = mx_exact_scale_exp(e, scale_bits, mx_exact_clip(sorted[r.lo], sorted[r.hi], r.frac));
      if (cand == tried) continue;  // same scale, same result
      tried = cand;
      double err = 0;
      for (std::size_t i = 0; i < n; ++i) err += mx_exact_sq_err(e, p, cand, xs[i], static_cast<std::uint64_t>(idx[i]));
      if (err < best) best = err, sexp = cand;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float q = element_of(sexp, i);
    if (values) values[i] = mx_exact_value(sexp, q);
    if (codes) codes[i] = static_cast<std::uint16_t>(mx_element_code(e, q));
  }
  return static_cast<std::uint8_t>(sexp + mx_scale_bias(scale_bits));
}

/// Exact-mode tensor quantize shared by mxint and mxfp.
inline void mx_exact_quantize(std::string_view family, const MXElement& e, int scale_bits, int block_size,
                              int block_dim, bool quantile_search, const Policy& p, std::span<const float> in,
                              std::span<float> out, const Shape& shape) {
  const Shape sh = shape.empty() ? Shape{1} : shape;
  const int axis = mx_axis(family, block_dim, sh.size());
  const auto order = mx_axis_last_order(sh, axis);
  const auto n = static_cast<std::size_t>(sh[static_cast<std::size_t>(axis)]);
  const auto bs = static_cast<std::size_t>(block_size);
  std::vector<float> xs, vals;
  for (std::size_t f = 0; f < order.size(); f += n)
    for (std::size_t start = 0; start < n; start += bs) {
      const std::size_t len = std::min(bs, n - start);
      const std::span<const std::int64_t> idx(order.data() + f + start, len);
      xs.resize(len);
      vals.resize(len);
      for (std::size_t i = 0; i < len; ++i) xs[i] = in[static_cast<std::size_t>(idx[i])];
      mx_exact_block(e, scale_bits, quantile_search, p, xs, idx, vals.data(), nullptr);
      for (std::size_t i = 0; i < len; ++i) out[static_cast<std::size_t>(idx[i])] = vals[i];
    }
}

// ---- MASE arithmetic (float32, as torch 1.13 on x86-64 CPU) -------------------------------

/// torch's float32 log2, assumed correctly rounded (formats.md §0.3).
QNUM_HD inline float mx_mase_log2f(float v) { return static_cast<float>(std::log2(static_cast<double>(v))); }

/// torch.pow(2, s) for an integer-valued float32 s (exact; NaN stays NaN).
QNUM_HD inline float mx_mase_exp2f(float s) {
  if (is_nan(s)) return s;
  if (s > 200.0f) return kInf;
  if (s < -200.0f) return 0.0f;
  return pow2f(static_cast<int>(s));
}

/// float32 -> int32 as x86-64 converts it (cvttss2si): NaN and out of range -> INT32_MIN.
QNUM_HD inline std::int32_t mx_to_int32_x86(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

/// torch.lerp on float32 (its two-branch formula, no fused multiply-add).
QNUM_HD inline float mx_torch_lerp(float a, float b, float w) {
  return std::fabs(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

/// torch.quantile(v, 1) as a reduction: the largest value and whether a NaN was seen (the
/// same in any order of add/merge for inputs without -0; the callers pass magnitudes).
struct MxTop {
  float top = -kInf;
  bool has_nan = false;
  QNUM_HD void add(float x) {
    has_nan |= is_nan(x);
    top = x > top ? x : top;
  }
  QNUM_HD void merge(const MxTop& o) {
    has_nan |= o.has_nan;
    top = o.top > top ? o.top : top;
  }
  /// rank n-1, lerp(top, top, 0) = top + 0 * (top - top): NaN for a NaN or an Inf on top.
  QNUM_HD float quantile() const { return has_nan || is_inf(top) ? kNaN : top; }
};

/// torch.quantile's float32 rank for q of n values (rank n - 1 when a NaN is among them): the
/// two neighbours in sorted order and the lerp weight.
struct MxQuantileRank {
  std::size_t below, above;
  float w;
};
QNUM_HD inline MxQuantileRank mx_torch_quantile_rank(std::size_t n, float q, bool has_nan) {
  const float last = static_cast<float>(n - 1);
  const float rank = has_nan ? last : q * last;
  const auto below = static_cast<std::size_t>(rank);
  return {below, static_cast<std::size_t>(std::ceil(rank)), rank - static_cast<float>(below)};
}

/// torch.quantile(v, q) (linear interpolation) in float32 as torch 1.13 computes it: rank =
/// q * (n-1) in float32, NaN anywhere -> rank n-1 -> NaN; lerp of the two neighbours (so an
/// Inf at the top gives NaN even for q = 1: inf + 0 * (inf - inf)). Sorts `v` in place.
inline float mx_torch_quantile(std::vector<float>& v, float q) {
  const std::size_t n = v.size();
  if (q == 1.0f) {  // the common case without sorting
    MxTop t;
    for (float x : v) t.add(x);
    return t.quantile();
  }
  bool has_nan = false;
  for (float x : v) has_nan |= is_nan(x);
  std::sort(v.begin(), v.end(), [](float a, float b) { return is_nan(b) ? !is_nan(a) : a < b; });
  const MxQuantileRank r = mx_torch_quantile_rank(n, q, has_nan);
  return mx_torch_lerp(v[r.below], v[r.above], r.w);
}

/// MASE mxint's per-block constants (extract_mxint_components) for a clip value: the divisor
/// 2^ceil(log2 clip), the element range and the output scale 2^(clamped S - bias).
struct MaseMXIntParams {
  float p2, mul, lo, hi, outscale;
};

/// The same from the block's exponent sc = ceil(log2(max(clip, tiny))).
QNUM_HD inline MaseMXIntParams mase_mxint_params_at(const MXIntSpec& s, float sc) {
  const float mul = pow2f(s.width - 1);
  const int bias = mx_scale_bias(s.scale_bits);
  float S = sc + static_cast<float>(bias);
  const float smax = static_cast<float>((1 << s.scale_bits) - 1);
  if (S < 0.0f) S = 0.0f;
  if (S > smax) S = smax;
  return {mx_mase_exp2f(sc), mul, -mul, mul - 1.0f, mx_mase_exp2f(S - static_cast<float>(bias))};
}

QNUM_HD inline MaseMXIntParams mase_mxint_params(const MXIntSpec& s, float clip) {
  const float tiny = std::numeric_limits<float>::min();
  if (clip < tiny) clip = tiny;  // clamp(min=tiny); NaN stays NaN
  return mase_mxint_params_at(s, std::ceil(mx_mase_log2f(clip)));
}

/// One element of a MASE mxint block (compose(extract(x))) in float32.
QNUM_HD inline float mase_mxint_element(const MaseMXIntParams& q, float x) {
  const float y = x / q.p2;
  float m = std::nearbyint(y * q.mul);  // torch.round: half to even, keeps -0
  if (m < q.lo) m = q.lo;
  if (m > q.hi) m = q.hi;
  return m / q.mul * q.outscale;
}

/// MASE mxint's search term of one element: the float32 difference to the *unpermuted*
/// flattened block's element, squared in double (summed in element order).
QNUM_HD inline double mase_mxint_sq_err(float cand, float ref) {
  const double d = static_cast<double>(cand - ref);
  return d * d;
}

/// torch.argmin over the candidates' norms in order: NaN counts as the minimum, the first wins.
QNUM_HD inline bool mase_argmin_takes(bool have, float best, float err) {
  return !have || (!is_nan(best) && (is_nan(err) || err < best));
}

/// MASE mxint candidate for one block (extract_mxint_components + compose) given the clip value.
inline void mase_mxint_block(const MXIntSpec& s, float clip, std::span<const float> xs, float* out) {
  const MaseMXIntParams q = mase_mxint_params(s, clip);
  for (std::size_t i = 0; i < xs.size(); ++i) out[i] = mase_mxint_element(q, xs[i]);
}

/// MASE mxfp's view of an element: float32 subnormals flush to zero (also for the scale).
QNUM_HD inline bool mase_mxfp_flushes(float x) { return (float_bits(x) & 0x7F800000u) == 0; }
QNUM_HD inline float mase_mxfp_abs(float x) { return mase_mxfp_flushes(x) ? 0.0f : std::fabs(x); }

/// MASE mxfp's shared exponent from the block's clip value amax (a quantile of mase_mxfp_abs).
/// int32 arithmetic wraps as in torch (NaN/-inf -> INT32_MIN -> INT32_MIN - emax wraps high).
QNUM_HD inline std::int32_t mase_mxfp_shared_exp(int ebits, float amax) {
  std::int32_t shared = mx_to_int32_x86(std::floor(mx_mase_log2f(amax)));
  shared =
      static_cast<std::int32_t>(static_cast<std::uint32_t>(shared) - static_cast<std::uint32_t>(mase_mx_emax(ebits)));
  return shared < -127 ? -127 : (shared > 128 ? 128 : shared);
}

/// The scale byte: shared + 127, or 0 when every element of the block flushes to zero.
QNUM_HD inline std::uint8_t mase_mxfp_scale_byte(std::int32_t shared, bool all_flushed) {
  return all_flushed ? 0 : static_cast<std::uint8_t>(shared + 127);
}

/// The code of element x in a block of shared exponent `shared` (low 8 bits of MASE's codec).
/// x / 2^shared as x86 divides (NaN payloads reach the codec's mantissa bits).
QNUM_HD inline std::uint16_t mase_mxfp_code(int ebits, int mbits, std::int32_t shared, float x) {
  const float y = mase_mxfp_flushes(x) ? 0.0f : mase_x86_div(x, pow2f(shared));
  return static_cast<std::uint16_t>(mase_mx_minifloat_encode(ebits, mbits, y) & 0xFFu);
}

/// MASE mxfp components of one block for a given quantile: the scale byte and the element codes.
inline std::uint8_t mase_mxfp_extract(const MXFPSpec& s, float q, std::span<const float> xs, std::uint16_t* codes,
                                      std::vector<float>& scratch) {
  const std::size_t n = xs.size();
  scratch.resize(n);
  bool all_flushed = true;
  for (std::size_t i = 0; i < n; ++i) {
    all_flushed &= mase_mxfp_flushes(xs[i]);
    scratch[i] = mase_mxfp_abs(xs[i]);
  }
  const std::int32_t shared = mase_mxfp_shared_exp(s.exponent_width, mx_torch_quantile(scratch, q));
  for (std::size_t i = 0; i < n; ++i) codes[i] = mase_mxfp_code(s.exponent_width, s.frac_width, shared, xs[i]);
  return mase_mxfp_scale_byte(shared, all_flushed);
}

/// MASE mxfp's search term of one element: MASE scores a candidate on q = code / 2^(M-1) *
/// (2^((S - 127) mod 256) mod 256) - x (the raw codes in uint8 arithmetic, not the dequantized
/// values; x from the unpermuted flattened block), reproduced as is; q^2 in float32.
QNUM_HD inline float mase_mxfp_sq_err(int frac_width, std::uint8_t S, std::uint16_t code, float ref) {
  const float div = static_cast<float>(1 << (frac_width - 1));
  const auto d = static_cast<std::uint8_t>(S - 127);
  const float pw = d < 8 ? static_cast<float>(1u << d) : 0.0f;  // uint8 pow wraps
  const float q = static_cast<float>(code) / div * pw - ref;
  return q * q;
}

/// MASE mxfp compose: decode(code) * 2^(S - 127) in float32.
QNUM_HD inline float mase_mxfp_value(const MXFPSpec& s, std::uint8_t S, std::uint16_t code) {
  return mase_mx_minifloat_decode(s.exponent_width, s.frac_width, code) * pow2f(static_cast<int>(S) - 127);
}

/// MASE's checks (rank >= 1, the divisibility assert: no padding, blocks may straddle rows);
/// returns the normalised block axis.
inline int mase_mx_axis(std::string_view family, int block_dim, int block_size, const Shape& shape) {
  require(!shape.empty(), family, ": mase_compat needs a tensor of rank >= 1 (MASE takes block_dim % rank)");
  const int axis = mx_axis(family, block_dim, shape.size());
  const auto n = numel(shape);
  require(n % block_size == 0, family, ": ", n, " elements are not divisible by block_size ", block_size,
          " (mase_compat blocks the flattened tensor without padding)");
  return axis;
}

/// MASE's block order (blocks are runs of block_size positions of it).
inline std::vector<std::int64_t> mase_mx_order(std::string_view family, int block_dim, int block_size,
                                               const Shape& shape) {
  return mx_axis_last_order(shape, mase_mx_axis(family, block_dim, block_size, shape));
}

inline void mase_mxint_quantize(const MXIntSpec& s, std::span<const float> in, std::span<float> out,
                                const Shape& shape) {
  const auto order = mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  const auto B = static_cast<std::size_t>(s.block_size);
  std::vector<float> xs(B), absx(B), cand(B), best_vals(B);
  for (std::size_t b = 0; b * B < order.size(); ++b) {
    for (std::size_t j = 0; j < B; ++j) xs[j] = in[static_cast<std::size_t>(order[b * B + j])];
    auto clip_at = [&](float q) {
      for (std::size_t j = 0; j < B; ++j) absx[j] = std::fabs(xs[j]);
      return mx_torch_quantile(absx, q);
    };
    if (!s.quantile_search) {
      mase_mxint_block(s, clip_at(1.0f), xs, best_vals.data());
    } else {
      // torch.argmin over the L2 norms against the *unpermuted* flattened block (MASE compares
      // with tensor.flatten().reshape(-1, B)); NaN counts as the minimum, first index wins.
      float best = 0;
      bool have = false;
      for (double qd : mx_clip_quantiles) {
        mase_mxint_block(s, clip_at(static_cast<float>(qd)), xs, cand.data());
        double acc = 0;
        for (std::size_t j = 0; j < B; ++j) acc += mase_mxint_sq_err(cand[j], in[b * B + j]);
        const float err = std::sqrt(static_cast<float>(acc));
        if (mase_argmin_takes(have, best, err)) best = err, have = true, best_vals = cand;
      }
    }
    for (std::size_t j = 0; j < B; ++j) out[static_cast<std::size_t>(order[b * B + j])] = best_vals[j];
  }
}

/// Scratch buffers of mase_mxfp_block.
struct MaseMXFPScratch {
  std::vector<float> xs, scratch;
  std::vector<std::uint16_t> codes, best_codes;
};

/// MASE mxfp block b (elements order[b*B, (b+1)*B)); blocks are independent.
inline void mase_mxfp_block(const MXFPSpec& s, std::span<const float> in, std::span<float> out,
                            std::span<const std::int64_t> order, std::size_t b, MaseMXFPScratch& w) {
  const auto B = static_cast<std::size_t>(s.block_size);
  auto& [xs, scratch, codes, best_codes] = w;
  xs.resize(B);
  codes.resize(B);
  best_codes.resize(B);
  for (std::size_t j = 0; j < B; ++j) xs[j] = in[static_cast<std::size_t>(order[b * B + j])];
  std::uint8_t S = mase_mxfp_extract(s, 1.0f, xs, best_codes.data(), scratch);
  if (s.quantile_search) {
    float best = kInf;  // scored as mase_mxfp_sq_err says
    for (double qd : mx_clip_quantiles) {
      const std::uint8_t Sq = mase_mxfp_extract(s, static_cast<float>(qd), xs, codes.data(), scratch);
      float err = 0.0f;
      for (std::size_t j = 0; j < B; ++j) err += mase_mxfp_sq_err(s.frac_width, Sq, codes[j], in[b * B + j]);
      if (err < best) best = err, S = Sq, best_codes = codes;
    }
  }
  for (std::size_t j = 0; j < B; ++j)
    out[static_cast<std::size_t>(order[b * B + j])] = mase_mxfp_value(s, S, best_codes[j]);
}

inline void mase_mxfp_quantize(const MXFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape) {
  const auto order = mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  MaseMXFPScratch w;
  for (std::size_t b = 0; b * static_cast<std::size_t>(s.block_size) < order.size(); ++b)
    mase_mxfp_block(s, in, out, order, b, w);
}

inline void require_exact_mxfp(const MXFPSpec& s) {
  require(s.element().is_ocp(), s.name, ": E", s.exponent_width, "M", s.frac_width,
          " elements exist only in mode=mase_compat (OCP MX v1.0 defines E4M3, E5M2, E3M2, E2M3, E2M1)");
}

}  // namespace detail

// ---- tensor quantize -------------------------------------------------------------------

/// Quantizes a C-order tensor: exact = OCP MXINT (blocks along block_dim, padded); mase =
/// MASE's mxint_quantizer (the role is not used by either).
inline void quantize(const MXIntSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::mase_mxint_quantize(s, in, out, shape);
  detail::mx_exact_quantize(s.name, s.element(), s.scale_bits, s.block_size, s.block_dim, s.quantile_search, p, in, out,
                            shape);
}

/// Quantizes a C-order tensor: exact = OCP MXFP; mase = MASE's mxfp_quantizer.
inline void quantize(const MXFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::mase_mxfp_quantize(s, in, out, shape);
  detail::require_exact_mxfp(s);
  detail::mx_exact_quantize(s.name, s.element(), s.scale_exp_bits, s.block_size, s.block_dim, s.quantile_search, p, in,
                            out, shape);
}

// ---- info ------------------------------------------------------------------------------

inline FormatInfo info(const MXIntSpec& s, const Policy& p) {
  s.validate();
  FormatInfo f;
  const MXElement e = s.element();
  f.bits_per_value = s.width + static_cast<double>(s.scale_bits) / s.block_size;
  f.distinct_values = detail::pow2(s.width);
  const int bias = detail::mx_scale_bias(s.scale_bits);
  if (p.is_mase()) {
    // m * 2^(S - bias - (k-1)); with float32 inputs S - bias is in [max(-126, -bias), 127]
    // (ceil(log2 amax) = 128 makes the block NaN).
    const int lo = std::max(-126, -bias), hi = std::min(127, (1 << s.scale_bits) - 1 - bias);
    f.min_positive = detail::pow2(lo - (s.width - 1));
    f.max = detail::scale2(static_cast<double>(e.kmax()), hi - (s.width - 1));
    f.value_set =
        detail::concat("m * 2^(s - ", s.width - 1, "), m in [", e.kmin(), ", ", e.kmax(), "], s = ceil(log2 amax) in [",
                       lo, ", ", hi, "] shared by ", s.block_size, " flattened elements (MASE)");
  } else {
    f.min_positive = detail::scale2(e.min_positive(), -bias);
    f.max = detail::scale2(e.max(), bias);
    f.value_set = detail::concat("k * 2^(X - ", s.width - 2, "), k in [", e.kmin(), ", ", e.kmax(),
                                 "], X = floor(log2 amax) in [", -bias, ", ", bias, "] (", s.scale_bits,
                                 "-bit, all ones = NaN) shared by ", s.block_size, " elements along block_dim");
  }
  return f;
}

inline FormatInfo info(const MXFPSpec& s, const Policy& p) {
  s.validate();
  FormatInfo f;
  const MXElement e = s.element();
  const int E = s.exponent_width, M = s.frac_width;
  f.bits_per_value = e.width + static_cast<double>(s.scale_exp_bits) / s.block_size;
  if (p.is_mase()) {
    // MASE's finite codec: every code is a number; reachable magnitudes run from 2^-bias
    // (smallest subnormal it produces) to (2 - 2^-M) * 2^emax; scale exponent in [-127, 127].
    const int bias = detail::mase_mx_bias(E), emax = detail::mase_mx_emax(E);
    f.distinct_values = detail::pow2(e.width) - 1;
    f.min_positive = detail::pow2(-bias - 127);
    f.max = (2.0 - detail::pow2(-M)) * detail::pow2(emax + 127);
    f.value_set = detail::concat("MASE finite E", E, "M", M, " (max ", (2.0 - detail::pow2(-M)) * detail::pow2(emax),
                                 ") * 2^X, X = floor(log2 amax) - ", emax, " in [-127, 128], ", s.block_size,
                                 " flattened elements");
  } else {
    detail::require_exact_mxfp(s);
    f.distinct_values = e.distinct_values();
    f.min_positive = detail::scale2(e.min_positive(), -127);
    f.max = detail::scale2(e.max(), 127);
    f.value_set =
        detail::concat("OCP ", e.name(), " (max ", e.max(), e.is_e4m3() ? ", NaN S.1111.111" : "",
                       e.is_e5m2() ? ", Inf/NaN" : "", ") * 2^X, X = floor(log2 amax) - ", e.emax(),
                       " in [-127, 127] (E8M0, 0xFF = NaN) shared by ", s.block_size, " elements along block_dim");
  }
  return f;
}

// ---- encode / decode one block (exact, OCP) ------------------------------------------------

namespace detail {
inline MXBlockCodes mx_encode_block(std::string_view family, const MXElement& e, int scale_bits, int block_size,
                                    bool quantile_search, std::span<const float> x, const Policy& p,
                                    std::uint64_t first_index) {
  require(!x.empty() && x.size() <= static_cast<std::size_t>(block_size), family, ": a block has 1..", block_size,
          " elements, got ", x.size());
  Policy q = p;
  q.semantics = Semantics::exact;
  std::vector<std::int64_t> idx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) idx[i] = static_cast<std::int64_t>(first_index + i);
  MXBlockCodes c;
  c.elements.resize(x.size());
  c.scale = mx_exact_block(e, scale_bits, quantile_search, q, x, idx, nullptr, c.elements.data());
  return c;
}

inline void mx_decode_block(const MXElement& e, int scale_bits, std::uint8_t scale,
                            std::span<const std::uint16_t> codes, std::span<float> out) {
  require(out.size() == codes.size(), "mx decode_block: ", codes.size(), " codes but ", out.size(), " outputs");
  const bool nan = scale == (1u << scale_bits) - 1;
  const int sexp = static_cast<int>(scale) - mx_scale_bias(scale_bits);
  for (std::size_t i = 0; i < codes.size(); ++i)
    out[i] = nan ? kNaN : static_cast<float>(scale2(static_cast<double>(decode(e, codes[i])), sexp));
}
}  // namespace detail

/// Encodes one block (at most block_size elements; a short block is the padded last one)
/// under OCP semantics: the scale code and each element's code. `first_index` keys stochastic
/// rounding (element i uses first_index + i). Always exact semantics.
inline MXBlockCodes encode_block(const MXIntSpec& s, std::span<const float> x, const Policy& p = exact,
                                 std::uint64_t first_index = 0) {
  s.validate();
  return detail::mx_encode_block(s.name, s.element(), s.scale_bits, s.block_size, s.quantile_search, x, p, first_index);
}
inline MXBlockCodes encode_block(const MXFPSpec& s, std::span<const float> x, const Policy& p = exact,
                                 std::uint64_t first_index = 0) {
  s.validate();
  detail::require_exact_mxfp(s);
  return detail::mx_encode_block(s.name, s.element(), s.scale_exp_bits, s.block_size, s.quantile_search, x, p,
                                 first_index);
}

/// Values of an encoded block: decode(element) * 2^(scale - 127); scale 0xFF -> all NaN.
inline std::vector<float> decode_block(const MXIntSpec& s, const MXBlockCodes& c) {
  std::vector<float> out(c.elements.size());
  detail::mx_decode_block(s.element(), s.scale_bits, c.scale, c.elements, out);
  return out;
}
inline std::vector<float> decode_block(const MXFPSpec& s, const MXBlockCodes& c) {
  std::vector<float> out(c.elements.size());
  detail::mx_decode_block(s.element(), s.scale_exp_bits, c.scale, c.elements, out);
  return out;
}

}  // namespace qnum

#include "qnum/format/mx_packed.hpp"
