// Blocking shared by block_fp, block_minifloat and block_log: which elements share one
// scale. Two layouts (spec §1):
//  * MASE's inference rule (mase_compat): block_size right-aligned to the tensor, -1 or an
//    entry larger than the dim means the whole dim, and the operand role picks the path
//    (bias 1-D; weight 2-D tiles; activation: batch dim block 1, 2-D/3-D). Anything else
//    raises like MASE does.
//  * qnum's exact layout: block_size right-aligned to the trailing dims as explicit tile
//    sizes (-1 = whole dim), dims not covered get tile 1; the role is ignored.
// Tiles start at index 0 and the last tile of a dim may be partial: MASE's zero padding is
// implicit (never materialised) because padding zeros cannot change a block's max |x|.
//
// Also here: the float32 primitives the MASE emulations share (torch's log2/pow/clamp/round
// as evaluated on float32 tensors), the per-block max with MASE's zero-block rule, and the
// shared-field + codes container used by every block family's encode_block/decode_block.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/core/shape.hpp"

namespace qnum {

/// How a row-major tensor is cut into blocks: `tile[d]` elements along dim d, tiles aligned
/// at 0, the last tile of a dim partial. Blocks are numbered in C order over the tile grid.
struct BlockLayout {
  Shape shape;
  Shape tile;              // 1 <= tile[d] <= shape[d] (0 only for an empty dim)
  bool mase_fold = false;  // MASE unblocks this path with F.fold, whose `0 + v` turns -0 into +0

  std::size_t rank() const { return shape.size(); }
  /// Number of tiles along dim d.
  std::int64_t blocks_along(std::size_t d) const { return tile[d] > 0 ? (shape[d] + tile[d] - 1) / tile[d] : 0; }
  std::int64_t num_blocks() const {
    std::int64_t n = 1;
    for (std::size_t d = 0; d < rank(); ++d) n *= blocks_along(d);
    return n;
  }
  /// Elements in a full (unclipped) tile.
  std::int64_t block_capacity() const { return numel(tile); }
  /// Block id of the element at flat (C-order) position `flat`.
  std::int64_t block_of(std::int64_t flat) const {
    std::int64_t id = 0, scale = 1;
    for (std::size_t d = rank(); d-- > 0;) {
      const std::int64_t i = flat % shape[d];
      flat /= shape[d];
      id += (i / tile[d]) * scale;
      scale *= blocks_along(d);
    }
    return id;
  }
};

namespace detail {

/// MASE's `_infer_block_shape`: right-align `block_shape` to `x_shape` (drop extra leading
/// entries, left-pad with -1), then -1 or an entry larger than the dim -> the whole dim.
inline Shape mase_infer_block_shape(const Shape& x_shape, std::span<const int> block_shape) {
  const std::size_t n = x_shape.size(), k = block_shape.size();
  Shape t(n, -1);
  for (std::size_t j = 0; j < n && j < k; ++j) t[n - 1 - j] = block_shape[k - 1 - j];
  for (std::size_t d = 0; d < n; ++d)
    if (t[d] == -1 || t[d] > x_shape[d]) t[d] = x_shape[d];
  return t;
}

}  // namespace detail

/// MASE's block shape for a tensor of `shape` used as `role` (activation = skip_first_dim).
/// Throws qnum::Error where MASE raises: 3-D weight, rank 0 or > 3, 1-D activation.
inline BlockLayout mase_block_layout(std::string_view family, const Shape& shape, std::span<const int> block_size,
                                     Role role) {
  const bool skip_first_dim = role == Role::activation;
  BlockLayout L;
  L.shape = shape;
  switch (shape.size()) {
    case 1:
      detail::require(!skip_first_dim, family,
                      ": a 1-D tensor is blocked as a bias; MASE rejects role activation for it "
                      "(skip_first_dim must be False)");
      L.tile = detail::mase_infer_block_shape(shape, block_size);
      break;
    case 2:
      if (skip_first_dim) {
        L.tile = detail::mase_infer_block_shape({1, shape[1]}, block_size);
        L.tile[0] = 1;
      } else {
        L.tile = detail::mase_infer_block_shape(shape, block_size);
        L.mase_fold = true;
      }
      break;
    case 3:
      detail::require(skip_first_dim, family,
                      ": 3-D weight blocking is not supported (MASE blocks a 3-D tensor only as an "
                      "activation: role activation)");
      L.tile = detail::mase_infer_block_shape({1, shape[1], shape[2]}, block_size);
      L.tile[0] = 1;
      L.mase_fold = true;
      break;
    default:
      detail::fail(family, ": ", shape.size(), "-D tensor ", to_string(shape),
                   " is not supported (MASE blocks 1-D bias, 2-D weight/activation and 3-D activation tensors)");
  }
  return L;
}

/// qnum's exact layout: `block_size` right-aligned to the trailing dims as tile sizes
/// (-1 or larger than the dim = whole dim; extra leading entries ignored), other dims 1.
inline BlockLayout exact_block_layout(const Shape& shape, std::span<const int> block_size) {
  BlockLayout L;
  L.shape = shape;
  L.tile.assign(shape.size(), 1);
  const std::size_t n = shape.size(), k = block_size.size();
  for (std::size_t j = 0; j < n && j < k; ++j) {
    const std::size_t d = n - 1 - j;
    const std::int64_t b = block_size[k - 1 - j];
    L.tile[d] = (b == -1 || b > shape[d]) ? shape[d] : b;
  }
  for (std::size_t d = 0; d < n; ++d)
    if (shape[d] == 0) L.tile[d] = 0;
  return L;
}

/// The layout a block family uses under `policy`: MASE's inference rule or the exact one.
inline BlockLayout block_layout(std::string_view family, const Policy& policy, const Shape& shape,
                                std::span<const int> block_size, Role role) {
  return policy.is_mase() ? mase_block_layout(family, shape, block_size, role) : exact_block_layout(shape, block_size);
}

/// Flat C-order indices of block `b` of layout L (rows of the last dim are contiguous runs):
/// the one block-index walk, for_each_tile's and the threaded kernels' (which start at any
/// block id).
inline void tile_indices(const BlockLayout& L, std::int64_t b, std::vector<std::int64_t>& idx) {
  const std::size_t n = L.rank();
  idx.clear();
  if (n == 0) {
    idx.push_back(0);
    return;
  }
  // per dim: stride, the tile's extent, and the position inside the tile (on the stack up to
  // rank 8, the kernels' limit)
  std::int64_t fixed[3 * 8];
  std::vector<std::int64_t> heap(n > 8 ? 3 * n : 0);
  std::int64_t* stride = n > 8 ? heap.data() : fixed;
  std::int64_t *ext = stride + n, *lc = ext + n;
  stride[n - 1] = 1;
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * L.shape[d + 1];
  std::int64_t base = 0;
  for (std::size_t d = n; d-- > 0;) {  // block coordinates: C order over the tile grid
    const std::int64_t g = L.blocks_along(d), start = b % g * L.tile[d];
    b /= g;
    ext[d] = std::min(L.tile[d], L.shape[d] - start);
    base += start * stride[d];
    lc[d] = 0;
  }
  while (true) {
    std::int64_t row = base;
    for (std::size_t d = 0; d + 1 < n; ++d) row += lc[d] * stride[d];
    for (std::int64_t j = 0; j < ext[n - 1]; ++j) idx.push_back(row + j);
    std::size_t d = n - 1;
    bool done = true;
    while (d-- > 0) {
      if (++lc[d] < ext[d]) {
        done = false;
        break;
      }
      lc[d] = 0;
    }
    if (done) break;
  }
}

/// Calls f(block_id, flat_indices) for every tile, in block order; the indices are C-order
/// positions of the tile's elements (tile_indices).
template <class F>
void for_each_tile(const BlockLayout& L, F&& f) {
  if (numel(L.shape) == 0) return;
  std::vector<std::int64_t> idx;
  idx.reserve(static_cast<std::size_t>(std::max<std::int64_t>(1, L.block_capacity())));
  for (std::int64_t b = 0; b < L.num_blocks(); ++b) {
    tile_indices(L, b, idx);
    f(b, std::span<const std::int64_t>(idx));
  }
}

/// Block id of every element (C order): the index mapping behind for_each_tile.
inline std::vector<std::int64_t> block_ids(const BlockLayout& L) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(numel(L.shape)));
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    for (auto i : idx) ids[static_cast<std::size_t>(i)] = b;
  });
  return ids;
}

/// A 1-D block in storage form: the shared field (biased exponent for block_fp, signed bias
/// as a two's-complement bw-bit field for block_minifloat, bias for block_log) and one code
/// per element.
struct BlockCodes {
  std::uint32_t shared = 0;
  std::vector<std::uint32_t> codes;
  friend bool operator==(const BlockCodes&, const BlockCodes&) = default;
};

namespace detail {

// ---- MASE float32 primitives ---------------------------------------------------------------
// torch evaluates every step on float32 tensors; these reproduce those steps one element at
// a time (no FMA contraction: each op rounds to float like torch's kernels). QNUM_HD: the CUDA
// kernels (cuda/src/quantize/blocks.cuh) run these very definitions.

/// torch.log2 on float32, taken as correctly rounded (spec §0.3).
QNUM_HD inline float mase_log2(float v) { return static_cast<float>(std::log2(static_cast<double>(v))); }

/// torch's `2 ** e` for an integral (or non-finite) float e: exact 2^e, inf above, 0 below.
QNUM_HD inline float mase_exp2(float e) {
  if (e != e) return e;
  if (e >= 128.0f) return kInf;
  if (e <= -150.0f) return 0.0f;  // 2^-150 is a tie with 0 and rounds to even (0)
  return pow2f(static_cast<int>(e));
}

/// torch.clamp: NaN in the value or in a (tensor) bound gives NaN.
QNUM_HD inline float mase_clamp(float x, float lo, float hi) {
  if (x != x || lo != lo || hi != hi) return kNaN;
  return x < lo ? lo : (x > hi ? hi : x);
}

/// torch.round (half to even; keeps the sign of zero; NaN/inf unchanged).
/// nearbyint in the default (to-nearest-even) mode is exactly that, and one instruction.
QNUM_HD inline float mase_round(float x) { return std::nearbyint(x); }

/// torch.sign (0 for +-0; NaN never reaches an output through it in these formulas).
QNUM_HD inline float mase_sign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f); }

/// torch.isclose(x, 0) with default tolerances: |x| <= 1e-8 (float32 compare).
QNUM_HD inline bool mase_close_to_zero(float x) { return x == 0.0f || std::fabs(x) <= 1e-8f; }

/// torch's max |x| over a block, one element at a time: NaN anywhere -> NaN (sticky), so
/// the merge is order-free (a warp reduction gets the CPU's value; only a NaN's payload may
/// differ, and every formula after it turns NaN into the canonical kNaN through mase_clamp).
QNUM_HD inline float mase_max_merge(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return b > a ? b : a;
}

/// MASE's zero-block rule as an unsigned min over the blocks: the key orders "smallest
/// non-zero max" (a NaN max counts as the smallest: key 0; a zero max is ignored: key ~0;
/// positive floats order like their bits).
QNUM_HD inline std::uint32_t mase_zero_rule_key(float m) {
  if (m != m) return 0u;
  return m == 0.0f ? ~0u : float_bits(m);
}

/// A block max after the zero-block rule, given the min key over the tensor: all maxima 0 ->
/// 1; a zero max takes the smallest non-zero max (NaN when some max is NaN).
QNUM_HD inline float mase_zero_rule_apply(float m, std::uint32_t min_key) {
  if (m != 0.0f) return m;
  if (min_key == ~0u) return 1.0f;
  return min_key == 0u ? kNaN : bits_float(min_key);
}

/// MASE's zero-block rule on per-block maxima: all 0 -> all 1; otherwise a 0 takes the
/// smallest non-zero maximum (a NaN maximum counts as the smallest).
inline void mase_fix_zero_blocks(std::vector<float>& m) {
  std::uint32_t key = ~0u;
  for (float v : m) key = std::min(key, mase_zero_rule_key(v));
  for (float& v : m) v = mase_zero_rule_apply(v, key);
}

/// MASE unblocks 2-D weights and 3-D activations with F.fold, whose `0 + v` turns -0 into +0.
QNUM_HD inline float mase_fold_add(float q, bool fold) { return fold ? 0.0f + q : q; }

/// Per-block max |x| as torch computes it (NaN anywhere in the block -> NaN), then MASE's
/// zero-block rule: all maxima 0 -> all 1; otherwise a zero max takes the smallest non-zero
/// max of the tensor (torch.min propagates NaN, so one NaN block poisons every zero block).
inline std::vector<float> mase_block_maxima(const BlockLayout& L, std::span<const float> in) {
  std::vector<float> m(static_cast<std::size_t>(L.num_blocks()), 0.0f);
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    float mx = 0.0f;
    for (auto i : idx) mx = mase_max_merge(mx, std::fabs(in[static_cast<std::size_t>(i)]));
    m[static_cast<std::size_t>(b)] = mx;
  });
  mase_fix_zero_blocks(m);
  return m;
}

// ---- exact-mode helpers ----------------------------------------------------------------------

/// Max |x| of a gathered block and what it holds: has_nan, has_inf; max over finite values.
struct BlockScan {
  double max = 0;
  bool has_nan = false, has_inf = false;
};
/// Adds one element to a scan.
QNUM_HD inline void scan_add(BlockScan& s, float v) {
  if (v != v)
    s.has_nan = true;
  else if (is_inf(v))
    s.has_inf = true;
  else if (abs(static_cast<double>(v)) > s.max)
    s.max = abs(static_cast<double>(v));
}
/// Merges two partial scans (order-free: the CUDA kernels reduce lane scans with it).
QNUM_HD inline void scan_merge(BlockScan& s, const BlockScan& o) {
  if (o.max > s.max) s.max = o.max;
  s.has_nan = s.has_nan || o.has_nan;
  s.has_inf = s.has_inf || o.has_inf;
}
inline BlockScan scan_block(std::span<const float> x) {
  BlockScan s;
  for (float v : x) scan_add(s, v);
  return s;
}

/// Product of the positive block_size entries: elements per block for bits-per-value.
inline double elements_per_block(std::span<const int> block_size) {
  double n = 1;
  for (int b : block_size)
    if (b > 0) n *= b;
  return n;
}

/// Shared checks of the three block specs' block_size key.
inline void validate_block_size(std::string_view family, std::span<const int> block_size) {
  require(!block_size.empty() && block_size.size() <= 3, family, ": block_size must have 1 to 3 entries (got ",
          block_size.size(), ")");
  for (int b : block_size)
    require(b >= 1 || b == -1, family, ": block_size ", b, " must be >= 1 (or -1 for a whole dim)");
}

/// Gathers a tile's inputs, runs `block(x, idx, out)` on the gathered copy and scatters the
/// result (so `out` may alias `in`).
template <class Block>
void quantize_tiles(const BlockLayout& L, std::span<const float> in, std::span<float> out, Block&& block) {
  std::vector<float> x, y;
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    x.resize(idx.size());
    y.resize(idx.size());
    for (std::size_t j = 0; j < idx.size(); ++j) x[j] = in[static_cast<std::size_t>(idx[j])];
    block(b, std::span<const float>(x), idx, std::span<float>(y));
    for (std::size_t j = 0; j < idx.size(); ++j) out[static_cast<std::size_t>(idx[j])] = y[j];
  });
}

/// One exact block through its family's codec: NaN anywhere -> every output NaN; otherwise
/// the shared field from Encode(s, p, x, idx, codes) and each element Decode(s, shared, code).
/// The one body of every exact blocked tensor quantize (block_fp, block_minifloat, block_log:
/// the references and the kernels' threaded and per-block paths).
template <class Spec>
using BlockEncodeExact = int (*)(const Spec&, const Policy&, std::span<const float>, std::span<const std::int64_t>,
                                 std::span<std::uint32_t>);
template <class Spec>
using BlockDecodeExact = float (*)(const Spec&, int, std::uint32_t);
template <class Spec, BlockEncodeExact<Spec> Encode, BlockDecodeExact<Spec> Decode>
void quantize_block_exact(const Spec& s, const Policy& p, std::span<const float> x, std::span<const std::int64_t> idx,
                          std::span<float> y, std::vector<std::uint32_t>& codes) {
  if (scan_block(x).has_nan) return std::fill(y.begin(), y.end(), kNaN);
  codes.resize(x.size());
  const int shared = Encode(s, p, x, idx, codes);
  for (std::size_t j = 0; j < x.size(); ++j) y[j] = Decode(s, shared, codes[j]);
}

/// The exact blocked tensor quantize: quantize_block_exact over every tile of the exact layout.
template <class Spec, BlockEncodeExact<Spec> Encode, BlockDecodeExact<Spec> Decode>
void quantize_blocks_exact(const Spec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                           const Shape& shape) {
  std::vector<std::uint32_t> codes;
  quantize_tiles(exact_block_layout(shape, s.block_size), in, out,
                 [&](std::int64_t, std::span<const float> x, std::span<const std::int64_t> idx, std::span<float> y) {
                   quantize_block_exact<Spec, Encode, Decode>(s, p, x, idx, y, codes);
                 });
}

/// Bits of a packed array of `width`-bit codes, LSB-first within little-endian bytes.
template <class Bytes>
constexpr std::uint32_t get_bits(const Bytes& a, int pos, int width) {
  std::uint32_t v = 0;
  for (int i = 0; i < width; ++i) {
    const int p = pos + i;
    v |= static_cast<std::uint32_t>((a[static_cast<std::size_t>(p / 8)] >> (p % 8)) & 1u) << i;
  }
  return v;
}
template <class Bytes>
constexpr void set_bits(Bytes& a, int pos, int width, std::uint32_t v) {
  for (int i = 0; i < width; ++i) {
    const int p = pos + i;
    const auto bit = static_cast<std::uint8_t>(1u << (p % 8));
    auto& byte = a[static_cast<std::size_t>(p / 8)];
    byte = static_cast<std::uint8_t>((v >> i) & 1u ? byte | bit : byte & ~bit);
  }
}

}  // namespace detail
}  // namespace qnum
