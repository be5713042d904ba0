// What the MX families (mxint.hpp, mxfp.hpp) share: block codes, blocking along block_dim,
// the exact OCP MX v1.0 block codec, MASE's float32 arithmetic (torch log2/pow/quantile) and
// its flattened block order, and the one-block encode/decode.
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
#include "qnum/format/family_traits.hpp"
#include "qnum/format/mx_element.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

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

}  // namespace detail

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

}  // namespace qnum
