// Threaded per-block kernels for block_minifloat and block_log, both policy bundles, any
// layout (exact tiles, MASE's 1-D/2-D/3-D tiles, tiles spanning rows). Each block runs the
// reference's own per-block code (block_*_encode_exact / decode_exact, the MASE element
// functions), so the math is written once; what the kernel adds is the split: blocks are
// cut into chunks of whole blocks that depend only on the sizes (results never depend on
// the thread count), each block's indices computed from its id (no serial tile walk), and
// MASE's per-block maxima taken in parallel before the serial zero-block rule.
// Included by quantize.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "qnum/format/block.hpp"
#include "qnum/format/block_log.hpp"
#include "qnum/format/block_minifloat.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Flat C-order indices of block `b` of layout L, in the order for_each_tile gives them.
inline void tile_indices(const BlockLayout& L, std::int64_t b, std::vector<std::int64_t>& idx) {
  const std::size_t n = L.rank();
  idx.clear();
  if (n == 0) {
    idx.push_back(0);
    return;
  }
  // block coordinates (C order over the tile grid), the tile's start and extent per dim
  std::int64_t start[8], ext[8], stride[8], lc[8];
  stride[n - 1] = 1;
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * L.shape[d + 1];
  std::int64_t base = 0;
  for (std::size_t d = n; d-- > 0;) {
    const std::int64_t g = L.blocks_along(d), c = b % g;
    b /= g;
    start[d] = c * L.tile[d];
    ext[d] = std::min(L.tile[d], L.shape[d] - start[d]);
    base += start[d] * stride[d];
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

/// Calls block(b, x, idx, y) for every block b of L (x the gathered inputs, y the outputs to
/// scatter), in parallel chunks of whole blocks. Blocks are disjoint: `out` may alias `in`.
template <class Block>
void quantize_tiles_threaded(const BlockLayout& L, std::span<const float> in, std::span<float> out, Block&& block) {
  if (numel(L.shape) == 0) return;
  const std::int64_t nb = L.num_blocks(), cap = std::max<std::int64_t>(1, L.block_capacity());
  const float* src = in.data();
  float* dst = out.data();
  parallel_for(nb, std::max<std::int64_t>(1, kQuantizeGrain / cap), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<std::int64_t> idx;
    std::vector<float> x, y;
    for (std::int64_t b = b0; b < b1; ++b) {
      tile_indices(L, b, idx);
      x.resize(idx.size());
      y.resize(idx.size());
      for (std::size_t j = 0; j < idx.size(); ++j) x[j] = src[idx[j]];
      block(b, std::span<const float>(x), std::span<const std::int64_t>(idx), std::span<float>(y));
      for (std::size_t j = 0; j < idx.size(); ++j) dst[idx[j]] = y[j];
    }
  });
}

/// mase_block_maxima (block.hpp) with the per-block maxima taken in parallel: the same
/// per-block max (NaN anywhere -> NaN), then the same serial zero-block rule.
inline std::vector<float> mase_block_maxima_threaded(const BlockLayout& L, std::span<const float> in) {
  std::vector<float> m(static_cast<std::size_t>(L.num_blocks()), 0.0f);
  if (numel(L.shape) == 0) return m;
  const std::int64_t cap = std::max<std::int64_t>(1, L.block_capacity());
  parallel_for(L.num_blocks(), std::max<std::int64_t>(1, kQuantizeGrain / cap), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<std::int64_t> idx;
    for (std::int64_t b = b0; b < b1; ++b) {
      tile_indices(L, b, idx);
      float mx = 0.0f;
      for (auto i : idx) {
        const float a = std::fabs(in[static_cast<std::size_t>(i)]);
        if (a != a) {
          mx = a;
          break;
        }
        if (a > mx) mx = a;
      }
      m[static_cast<std::size_t>(b)] = mx;
    }
  });
  qnum::detail::mase_fix_zero_blocks(m);
  return m;
}

/// Whether the threaded per-block path runs this format (block_minifloat, block_log; any
/// policy; MASE's role/rank errors are left to the reference, which raises them).
inline bool tiles_supported(const Format& f, const Shape& shape, Role role) {
  if (!std::holds_alternative<BlockMinifloatSpec>(f.spec) && !std::holds_alternative<BlockLogSpec>(f.spec))
    return false;
  if (shape.size() > 8) return false;  // tile_indices keeps per-dim state on the stack
  if (!f.policy.is_mase()) return true;
  if (shape.empty() || shape.size() > 3) return false;
  const bool activation = role == Role::activation;
  return (shape.size() == 1 && !activation) || shape.size() == 2 || (shape.size() == 3 && activation);
}

/// block_minifloat, both bundles: the reference's block code per block, threaded.
inline void block_minifloat_tiles(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> in,
                                  std::span<float> out, const Shape& shape, Role role) {
  namespace qd = qnum::detail;
  if (p.is_mase()) {
    const auto L = mase_block_layout(s.name, shape, s.block_size, role);
    const auto maxima = mase_block_maxima_threaded(L, in);
    const float bmax = static_cast<float>(s.bias_max(true));
    quantize_tiles_threaded(
        L, in, out, [&](std::int64_t b, std::span<const float> x, std::span<const std::int64_t>, std::span<float> y) {
          // the bias exactly as block_minifloat_quantize_mase computes it
          const float bias = qd::mase_clamp(std::floor(qd::mase_log2(maxima[static_cast<std::size_t>(b)])), 0.0f, bmax);
          for (std::size_t j = 0; j < x.size(); ++j) {
            float q = qd::minifloat_ieee_mase_element(s.width, s.exponent_width, bias, x[j]);
            if (L.mase_fold) q = 0.0f + q;
            y[j] = q;
          }
        });
    return;
  }
  const auto L = exact_block_layout(shape, s.block_size);
  quantize_tiles_threaded(
      L, in, out, [&](std::int64_t, std::span<const float> x, std::span<const std::int64_t> idx, std::span<float> y) {
        if (qd::scan_block(x).has_nan) return std::fill(y.begin(), y.end(), qd::kNaN);
        thread_local std::vector<std::uint32_t> codes;
        codes.resize(x.size());
        const int b = qd::block_minifloat_encode_exact(s, p, x, idx, codes);
        for (std::size_t j = 0; j < x.size(); ++j) y[j] = qd::block_minifloat_decode_exact(s, b, codes[j]);
      });
}

/// block_log, both bundles: the reference's block code per block, threaded.
inline void block_log_tiles(const BlockLogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                            const Shape& shape, Role role) {
  namespace qd = qnum::detail;
  if (p.is_mase()) {
    const auto L = mase_block_layout(s.name, shape, s.block_size, role);
    const auto maxima = mase_block_maxima_threaded(L, in);
    const float top = static_cast<float>(s.top()), bmax = static_cast<float>(s.bias_max());
    quantize_tiles_threaded(
        L, in, out, [&](std::int64_t b, std::span<const float> x, std::span<const std::int64_t>, std::span<float> y) {
          // the bias exactly as block_log_quantize_mase computes it
          const float etop = std::ceil(qd::mase_log2(maxima[static_cast<std::size_t>(b)]));
          const float bias = qd::mase_clamp(top - etop, 0.0f, bmax);
          for (std::size_t j = 0; j < x.size(); ++j) {
            float q = qd::log_mase_element(s.width, bias, x[j]);
            if (L.mase_fold) q = 0.0f + q;
            y[j] = q;
          }
        });
    return;
  }
  const auto L = exact_block_layout(shape, s.block_size);
  quantize_tiles_threaded(
      L, in, out, [&](std::int64_t, std::span<const float> x, std::span<const std::int64_t> idx, std::span<float> y) {
        if (qd::scan_block(x).has_nan) return std::fill(y.begin(), y.end(), qd::kNaN);
        thread_local std::vector<std::uint32_t> codes;
        codes.resize(x.size());
        const int b = qd::block_log_encode_exact(s, p, x, idx, codes);
        for (std::size_t j = 0; j < x.size(); ++j) y[j] = qd::block_log_decode_exact(s, b, codes[j]);
      });
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
