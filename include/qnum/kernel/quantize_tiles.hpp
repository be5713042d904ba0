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
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "qnum/format/block.hpp"
#include "qnum/format/block_log.hpp"
#include "qnum/format/block_minifloat.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"

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

// ---- exact mode in vector registers (blocks inside one row, nearest rounding) -------------
// The shared bias comes from the reference's own bias function, fed a BlockScan built from
// the block's max |x| bits (NaN > Inf > finite); the elements are the minifloat grid kernel
// (GridKernel, bit-identical to round_to_grid) or the log rule from the bits (LogKernel's).

/// Whether the vector path covers this exact block_minifloat / block_log tensor: blocks inside
/// one row (tiles 1 along every leading dim), round to nearest.
inline bool tiles_simd_supported(const Format& f, const Shape& shape) {
  const Policy& p = f.policy;
  if (p.is_mase() || shape.empty() || shape.size() > 8) return false;
  std::span<const int> bsz;
  if (const auto* s = std::get_if<BlockMinifloatSpec>(&f.spec)) {
    if (p.rounding != Rounding::nearest_even) return false;
    bsz = s->block_size;
  } else if (const auto* s = std::get_if<BlockLogSpec>(&f.spec)) {
    if (p.rounding != Rounding::nearest_even && p.rounding != Rounding::nearest_away) return false;
    bsz = s->block_size;
  } else {
    return false;
  }
  const auto L = exact_block_layout(shape, bsz);
  for (std::size_t d = 0; d + 1 < L.rank(); ++d)
    if (L.tile[d] > 1) return false;
  return true;
}

/// The BlockScan the reference would compute for a block whose max |x| bits are mb (no NaN).
inline qnum::detail::BlockScan scan_of_bits(std::int32_t mb) {
  qnum::detail::BlockScan sc;
  sc.has_inf = mb == 0x7f800000;
  if (!sc.has_inf) sc.max = static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)));
  return sc;
}

/// One block_minifloat block through the reference codec.
[[gnu::noinline]] inline void block_minifloat_reference_block(const BlockMinifloatSpec& s, const Policy& p,
                                                              const float* x, float* y, std::int64_t len) {
  std::vector<float> xs(x, x + len);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(len), 0);
  std::vector<std::uint32_t> codes(static_cast<std::size_t>(len));
  const int b = qnum::detail::block_minifloat_encode_exact(s, p, xs, idx, codes);
  for (std::int64_t j = 0; j < len; ++j) y[j] = qnum::detail::block_minifloat_decode_exact(s, b, codes[j]);
}

/// block_minifloat exact's grid kernels, one per bias b in [bias_min, bias_max], built once per
/// (W, E, bias width, policy) for the process (a call used to build them: ~3 us, more than
/// quantizing a 1K-element tensor).
inline const std::vector<GridKernel<MinifloatSpec>>& block_minifloat_grid_kernels(const BlockMinifloatSpec& s,
                                                                                  const Policy& p) {
  struct Entry {
    int width, exponent_width, bias_width;
    Policy policy;
    std::vector<GridKernel<MinifloatSpec>> grid;
  };
  static std::mutex mutex;
  static std::deque<Entry> cache;  // a deque: references to entries stay valid as it grows
  const std::lock_guard lock(mutex);
  for (const Entry& e : cache)
    if (e.width == s.width && e.exponent_width == s.exponent_width && e.bias_width == s.exponent_bias_width &&
        e.policy == p)
      return e.grid;
  Entry& e = cache.emplace_back(Entry{s.width, s.exponent_width, s.exponent_bias_width, p, {}});
  // b <= 2^(bw-1)-1 <= 127: emin = 1-b >= -126; b >= 2^E-1-127 (the Inf bias): max < 2^128
  for (int b = s.bias_min(false); b <= s.bias_max(false); ++b)
    e.grid.emplace_back(MinifloatSpec{}, p, qnum::detail::block_minifloat_grid(s, b, p), false);
  return e.grid;
}

/// block_minifloat exact, nearest even: one grid kernel per bias b (2^bw of them, cached).
template <class A>
void block_minifloat_simd(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                          const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int bmin = s.bias_min(false), bmax = s.bias_max(false), top_field = (1 << s.exponent_width) - 1;
  const std::vector<GridKernel<MinifloatSpec>>& grid = block_minifloat_grid_kernels(s, p);
  // GridKernel's subnormal magic 2^(emin - (M+1) + 24) must be a float: blocks of a bias
  // below this (a max above ~2^(104+M)) run the reference codec
  const int b_vector = -102 - s.mantissa_bits();
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    // a normal max: ilog2 from its bits (the reference's double path otherwise)
    const int b = mb >= 0x00800000 && mb < 0x7f800000 ? std::clamp(top_field - ((mb >> 23) - 127), bmin, bmax)
                                                      : qnum::detail::block_minifloat_bias_exact(s, scan_of_bits(mb));
    if (b < b_vector) return {2, 0.0f, 0.0f};
    return {0, static_cast<float>(b - bmin), 0.0f};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2) return block_minifloat_reference_block(s, p, x, y, len);
    const GridKernel<MinifloatSpec>& g = grid[static_cast<std::size_t>(bp.a)];  // by reference: no copy per block
    for (std::int64_t i = 0; i < len; i += N) g.template apply<A>(bf<A>::load_unaligned(x + i)).store_unaligned(y + i);
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

/// One block_log block through the reference codec (biases outside float's normal exponents).
[[gnu::noinline]] inline void block_log_reference_block(const BlockLogSpec& s, const Policy& p, const float* x,
                                                        float* y, std::int64_t len) {
  std::vector<float> xs(x, x + len);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(len), 0);
  std::vector<std::uint32_t> codes(static_cast<std::size_t>(len));
  const int b = qnum::detail::block_log_encode_exact(s, p, xs, idx, codes);
  for (std::int64_t j = 0; j < len; ++j) y[j] = qnum::detail::block_log_decode_exact(s, b, codes[j]);
}

/// block_log exact, nearest: exponents from the bits (m >= sqrt 2 rounds up; m^2 = 2 has no
/// float), clamped to [-b, top-b]; zeros -> +2^-b. Blocks whose range reaches below 2^-126
/// (the usual case for weights: a block max near 2^-5 gives b = top + 5) take the wide
/// variant (subnormal inputs normalised by an exact 2^24, outputs down to 2^-149 and 0 below);
/// only blocks with exponents above 127 run the reference codec.
template <class A>
void block_log_simd(const BlockLogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                    const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int top = s.top();
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    // (the bias from the max's bits measured faster in cache but 12% slower from memory here:
    // the reference's double steps stay)
    const int b = qnum::detail::block_log_bias_exact(s, scan_of_bits(mb));
    if (top - b > 127) return {2, 0.0f, 0.0f};
    return {-b < -126 ? 3 : 0, static_cast<float>(-b), static_cast<float>(top - b)};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2) return block_log_reference_block(s, p, x, y, len);
    const auto emin = static_cast<std::int32_t>(bp.a), emax = static_cast<std::int32_t>(bp.b);
    const bi<A> MAG(0x7fffffff), SIGN(static_cast<std::int32_t>(0x80000000u)), MANT(0x7fffff), ZERO(0);
    if (bp.kind == 3) {  // emin < -126: subnormal inputs and outputs
      for (std::int64_t i = 0; i < len; i += N) {
        const bi<A> bits = as_int<A>(bf<A>::load_unaligned(x + i));
        const bi<A> a = bits & MAG;
        const auto sub = a < bi<A>(0x00800000);
        // a subnormal magnitude times 2^24 is normal and exact: the same mantissa, exponent - 24
        const bi<A> an = select_i<A>(sub, as_int<A>(as_float<A>(a) * bf<A>(0x1p24f)), a);
        const bi<A> up = select_i<A>((an & MANT) >= bi<A>(kSqrt2Mantissa), bi<A>(1), ZERO);
        bi<A> e = (an >> 23) - select_i<A>(sub, bi<A>(127 + 24), bi<A>(127)) + up;
        e = clamp_i<A>(select_i<A>(a == ZERO, bi<A>(emin), e), emin, emax);  // +-0 -> +2^emin
        const bi<A> sgn = select_i<A>(a == ZERO, ZERO, bits & SIGN);
        as_float<A>(pow2_wide_bits_i<A>(e) | sgn).store_unaligned(y + i);
      }
      return;
    }
    for (std::int64_t i = 0; i < len; i += N) {
      const bi<A> bits = as_int<A>(bf<A>::load_unaligned(x + i));
      const bi<A> a = bits & MAG;
      const bi<A> up = select_i<A>((a & MANT) >= bi<A>(kSqrt2Mantissa), bi<A>(1), ZERO);
      // zero and subnormal magnitudes give e <= -126 <= emin: clamped there, as the reference
      const bi<A> e = clamp_i<A>((a >> 23) - bi<A>(127) + up, emin, emax);
      const bi<A> sgn = select_i<A>(a == ZERO, ZERO, bits & SIGN);  // +-0 -> +2^emin
      as_float<A>(((e + bi<A>(127)) << 23) | sgn).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

// ---- mase mode in vector registers (every MASE tile) -----------------------------------------
// Block maxima as integer maxima of |x|'s bits over each row's run of a tile (the float max the
// reference takes, NaN for a NaN block), combined per block, MASE's zero-block rule on those
// floats; then each row run with its block's bias: the per-bias vector kernel where the
// block's exponents stay inside float's normal range, else the reference's element function.

/// Calls run(x, y, len, block_max) for every row run of every MASE tile, rows in parallel.
template <class A, class Run>
void mase_tile_runs(const BlockLayout& L, std::span<const float> in, std::span<float> out, Run&& run) {
  const std::int64_t n = numel(L.shape);
  if (n == 0) return;
  const std::int64_t C = L.shape.back(), rows = n / C, tc = std::max<std::int64_t>(L.tile.back(), 1);
  const std::int64_t per_row = (C + tc - 1) / tc, grain = std::max<std::int64_t>(1, kQuantizeGrain / C);
  const float* src = in.data();
  float* dst = out.data();
  std::vector<std::int32_t> run_max(static_cast<std::size_t>(rows * per_row));
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < per_row; ++j)
        run_max[static_cast<std::size_t>(r * per_row + j)] =
            max_abs_bits<A>(src + r * C + j * tc, std::min(tc, C - j * tc));
  });
  // a row's blocks are consecutive ids (the last axis is the fastest in block order)
  std::vector<std::int64_t> row_block(static_cast<std::size_t>(rows));
  std::vector<std::int32_t> block_bits(static_cast<std::size_t>(L.num_blocks()), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    row_block[static_cast<std::size_t>(r)] = L.block_of(r * C);
    for (std::int64_t j = 0; j < per_row; ++j) {
      auto& m = block_bits[static_cast<std::size_t>(row_block[static_cast<std::size_t>(r)] + j)];
      m = std::max(m, run_max[static_cast<std::size_t>(r * per_row + j)]);
    }
  }
  std::vector<float> maxima(block_bits.size());
  for (std::size_t b = 0; b < maxima.size(); ++b) maxima[b] = bits_float(static_cast<std::uint32_t>(block_bits[b]));
  qnum::detail::mase_fix_zero_blocks(maxima);
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < per_row; ++j) {
        const std::int64_t off = r * C + j * tc;
        run(src + off, dst + off, std::min(tc, C - j * tc),
            maxima[static_cast<std::size_t>(row_block[static_cast<std::size_t>(r)] + j)]);
      }
  });
}

/// MinifloatMaseKernel for minifloat_ieee(W, E) with each bias b in [0, 126], built once per
/// (W, E) for the process (a call used to build them: ~10 us, more than quantizing a
/// 1K-element tensor).
inline const std::vector<MinifloatMaseKernel>& block_minifloat_mase_kernels(const BlockMinifloatSpec& s) {
  constexpr int kW = 23, kE = 6;  // W in [2, 24], E in [1, 6] (validated)
  static std::array<std::once_flag, kW * kE> once;
  static std::array<std::vector<MinifloatMaseKernel>, kW * kE> kernels;
  const auto i = static_cast<std::size_t>((s.width - 2) * kE + (s.exponent_width - 1));
  std::call_once(once.at(i), [&] {
    for (int b = 0; b <= 126; ++b)
      kernels[i].emplace_back(MinifloatSpec{s.width, s.exponent_width, b, Specials::none}, mase_compat);
  });
  return kernels[i];
}

/// MASE block_minifloat: the bias as block_minifloat_quantize_mase computes it; elements by
/// MinifloatMaseKernel for minifloat_ieee(W, E) with that bias (bias <= 126).
template <class A>
void block_minifloat_mase_simd(const BlockMinifloatSpec& s, std::span<const float> in, std::span<float> out,
                               const Shape& shape, Role role) {
  namespace qd = qnum::detail;
  constexpr std::int64_t N = bf<A>::size;
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const float bmax = static_cast<float>(s.bias_max(true));
  const std::vector<MinifloatMaseKernel>& k = block_minifloat_mase_kernels(s);
  const bool fold = L.mase_fold;
  const std::int32_t* floor_t = log2_thresholds(Log2Op::floor).t.data();  // looked up per block
  const std::int32_t ibmax = s.bias_max(true);
  auto bias_of = [&](float block_max) {  // clamp(floor(log2 max), 0, bmax), integers on the bits
    const std::uint32_t mb = float_bits(block_max);
    if (qd::log2_positive_normal(mb)) [[likely]] {
      const auto f = static_cast<std::int32_t>(mb >> 23);
      const std::int32_t lg = f - 127 + (static_cast<std::int32_t>(mb) >= floor_t[f] ? 1 : 0);
      return static_cast<float>(std::clamp(lg, 0, ibmax));
    }
    return qd::mase_clamp(log2_op(Log2Op::floor, block_max), 0.0f, bmax);
  };
  // Elements the vector kernel does not take (a tail shorter than a vector, a bias above 126
  // or NaN) through the reference's element function; kept out of the hot loop.
  auto run_reference = [&](const float* x, float* y, std::int64_t len, float bias) {
    for (std::int64_t i = 0; i < len; ++i)
      y[i] = qd::mase_fold_add(qd::minifloat_ieee_mase_element(s.width, s.exponent_width, bias, x[i]), fold);
  };
  auto run_biased = [&](const float* x, float* y, std::int64_t len, float bias) __attribute__((always_inline)) {
    if (!(bias <= 126.0f)) [[unlikely]]  // NaN too
      return run_reference(x, y, len, bias);
    // by reference: a copy (its 128-byte threshold window included) per block of 16
    // elements was 30% of the kernel's time
    const MinifloatMaseKernel& kk = k[static_cast<std::size_t>(bias)];
    const std::int64_t full = len - len % N;
    if (fold)
      for (std::int64_t i = 0; i < full; i += N)
        (bf<A>(0.0f) + kk.template apply<A>(bf<A>::load_unaligned(x + i))).store_unaligned(y + i);
    else
      for (std::int64_t i = 0; i < full; i += N)
        kk.template apply<A>(bf<A>::load_unaligned(x + i)).store_unaligned(y + i);
    if (full < len) [[unlikely]]
      run_reference(x + full, y + full, len - full, bias);
  };
  if (mase_row_local_runs<A>(L, in, out, bias_of, run_biased)) return;
  mase_tile_runs<A>(L, in, out, [&](const float* x, float* y, std::int64_t len, float block_max) {
    run_biased(x, y, len, bias_of(block_max));
  });
}

/// MASE block_log's per-bias constants, built once per (W, bias width) for the process (a
/// call used to build all 2^bw of them, ~20 us: more than quantizing a 1K-element tensor):
/// the offset c = 2^-b · 0.1f, the log2 lookup, the exponent that x = ±0 gets when c is
/// subnormal, and which kernel runs the bias.
struct BlockLogMaseTables {
  enum Kind : std::uint8_t {
    narrow,  // exponents [-b, top - b] inside float's normal range
    wide,    // -b < -126 <= top - b <= 127: subnormal offsets and results
    scalar,  // the element function (exponents above 127, or every one below -126)
  };
  std::vector<Log2Lookup> lk;  // nearest, clamped to [max(-b, -126), top - b]
  std::vector<float> offset;
  std::vector<std::int32_t> zero_e;  // clamp(round(log2 c), -b, top - b)
  std::vector<Kind> kind;

  explicit BlockLogMaseTables(const BlockLogSpec& s) {
    namespace qd = qnum::detail;
    const int top = s.top(), nb = s.bias_max() + 1;
    lk.resize(static_cast<std::size_t>(nb));
    offset.resize(static_cast<std::size_t>(nb));
    zero_e.resize(static_cast<std::size_t>(nb));
    kind.resize(static_cast<std::size_t>(nb));
    for (int b = 0; b < nb; ++b) {
      const auto i = static_cast<std::size_t>(b);
      offset[i] = qd::mase_exp2(static_cast<float>(-b)) * 0.1f;
      const float ez =
          qd::mase_clamp(qd::mase_round(qd::mase_log2(offset[i])), static_cast<float>(-b), static_cast<float>(top - b));
      zero_e[i] = static_cast<std::int32_t>(ez);
      kind[i] = top - b > 127 || top - b < -126 ? scalar : (-b >= -126 ? narrow : wide);
      if (kind[i] != scalar) lk[i] = Log2Lookup(Log2Op::nearest, std::max(-b, -126), top - b);
    }
  }
  /// The tables of s (W and bias width identify them), shared by every call.
  static const BlockLogMaseTables& of(const BlockLogSpec& s) {
    constexpr int kW = 8, kBW = 8;  // W in [2, 9], bias width in [1, 8] (validated)
    static std::array<std::once_flag, kW * kBW> once;
    static std::array<std::unique_ptr<const BlockLogMaseTables>, kW * kBW> tables;
    const auto k = static_cast<std::size_t>((s.width - 2) * kBW + (s.exponent_bias_width - 1));
    std::call_once(once.at(k), [&] { tables[k] = std::make_unique<const BlockLogMaseTables>(s); });
    return *tables[k];
  }
};

/// MASE block_log: the bias as block_log_quantize_mase computes it; elements by MASE's log rule
/// with c = 2^-b * 0.1f (float) and round(log2) from the thresholds; the wide kernel where
/// -b < -126 (weights: a block max near 2^-5 gives b = top + 5).
template <class A>
void block_log_mase_simd(const BlockLogSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape,
                         Role role) {
  namespace qd = qnum::detail;
  using T = BlockLogMaseTables;
  constexpr std::int64_t N = bf<A>::size;
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const float top = static_cast<float>(s.top()), bmax = static_cast<float>(s.bias_max());
  // MASE's offset 2^-b · 0.1f is kept per bias: it is subnormal for the usual biases (b near
  // 127), and a multiply with a subnormal result per block took a third of the kernel's time.
  const T& tab = T::of(s);
  const bool fold = L.mase_fold;
  const std::int32_t* ceil_t = log2_thresholds(Log2Op::ceil).t.data();  // looked up per block
  const std::int32_t itop = s.top(), ibmax = s.bias_max();
  auto bias_of = [&](float block_max) {  // clamp(top - ceil(log2 max), 0, bmax), integers on the bits
    const std::uint32_t mb = float_bits(block_max);
    if (qd::log2_positive_normal(mb)) [[likely]] {
      const auto f = static_cast<std::int32_t>(mb >> 23);
      const std::int32_t lg = f - 127 + (static_cast<std::int32_t>(mb) >= ceil_t[f] ? 1 : 0);
      return static_cast<float>(std::clamp(itop - lg, 0, ibmax));
    }
    return qd::mase_clamp(top - log2_op(Log2Op::ceil, block_max), 0.0f, bmax);
  };
  auto scalar_run = [&](const float* x, float* y, std::int64_t len, float bias) {
    for (std::int64_t i = 0; i < len; ++i) y[i] = qd::mase_fold_add(qd::log_mase_element(s.width, bias, x[i]), fold);
  };
  auto run_biased = [&](const float* x, float* y, std::int64_t len, float bias) __attribute__((always_inline)) {
    if (bias != bias) [[unlikely]]
      return scalar_run(x, y, len, bias);
    const auto b = static_cast<std::size_t>(bias);
    const T::Kind kind = tab.kind[b];
    const Log2Lookup& l = tab.lk[b];
    const bf<A> C(tab.offset[b]);
    std::int64_t i = 0;
    if (kind == T::narrow) {
      for (; i + N <= len; i += N) {
        const bf<A> v = bf<A>::load_unaligned(x + i);
        const bi<A> f = log2_exponent_field<A>(xsimd::abs(v) + C, l);
        bf<A> q = xsimd::select(xsimd::isnan(v), v, signed_pow2_field_i<A>(v + C, f));
        if (fold) q = bf<A>(0.0f) + q;
        q.store_unaligned(y + i);
      }
    } else if (kind == T::wide) {
      const bi<A> EZ(tab.zero_e[b]), SUB(0x00800000), ONE(0x3f800000);
      for (; i + N <= len; i += N) {
        const bf<A> v = bf<A>::load_unaligned(x + i);
        const bf<A> w = xsimd::abs(v) + C;
        const bi<A> wb = as_int<A>(w);
        const auto sub = wb < SUB;  // |x| + c subnormal: x = ±0 (then w = c), or a subnormal x
        if (xsimd::any(sub & (as_int<A>(xsimd::abs(v)) != bi<A>(0)))) [[unlikely]] {
          scalar_run(x + i, y + i, N, bias);
          continue;
        }
        const bi<A> e = select_i<A>(sub, EZ, log2_exponent<A>(as_float<A>(select_i<A>(sub, ONE, wb)), l));
        bf<A> q = xsimd::select(xsimd::isnan(v), v, signed_pow2_wide_i<A>(v + C, e));
        if (fold) q = bf<A>(0.0f) + q;
        q.store_unaligned(y + i);
      }
    }
    if (i < len) scalar_run(x + i, y + i, len - i, bias);
  };
  if (mase_row_local_runs<A>(L, in, out, bias_of, run_biased)) return;
  mase_tile_runs<A>(L, in, out, [&](const float* x, float* y, std::int64_t len, float block_max) {
    run_biased(x, y, len, bias_of(block_max));
  });
}

// ---- mase mxfp ----------------------------------------------------------------------------

/// MASE mxfp (its codec and bugs, mx.hpp's mase_mxfp_block), blocks of MASE's order threaded.
/// In place with quantile search stays on the reference: its error term reads the unpermuted
/// input, which the reference may already have overwritten.
inline bool mase_mxfp_threaded(const Format& f, std::span<const float> in, std::span<float> out) {
  const auto* s = std::get_if<MXFPSpec>(&f.spec);
  return s && f.policy.is_mase() && !(s->quantile_search && in.data() == out.data());
}

inline void mase_mxfp_tiles(const MXFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape) {
  const auto order = qnum::detail::mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  const auto nb = static_cast<std::int64_t>(order.size()) / s.block_size;
  parallel_for(nb, std::max<std::int64_t>(1, kQuantizeGrain / s.block_size), [&](std::int64_t b0, std::int64_t b1) {
    qnum::detail::MaseMXFPScratch w;
    for (std::int64_t b = b0; b < b1; ++b)
      qnum::detail::mase_mxfp_block(s, in, out, order, static_cast<std::size_t>(b), w);
  });
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
