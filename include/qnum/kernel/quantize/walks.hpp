// How the quantize kernels walk a tensor, written once for every family: row runs cut at row
// boundaries (per-row and per-channel families), blocks along rows with their maxima in
// groups (for_each_row_block: block_fp, MX, block_minifloat, block_log in exact mode; MASE's
// one-pass mase_row_local_runs), MASE's tiles spanning rows (mase_tile_runs), and any tile of
// a BlockLayout by its block id (quantize_tiles_threaded). Chunks of every walk depend only on
// the sizes, so results never depend on the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "qnum/format/block.hpp"
#include "qnum/kernel/quantize/plan.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

// ---- blocks along rows -----------------------------------------------------------------------

/// Whether every block of L lies inside one row (tile 1 along every leading dim): the blocked
/// vector kernels walk rows (for_each_row_block).
inline bool blocks_inside_rows(const BlockLayout& L) {
  for (std::size_t d = 0; d + 1 < L.rank(); ++d)
    if (L.tile[d] > 1) return false;
  return true;
}

/// The tensors MASE's blocked quantizers accept for a role (1-D weights and biases, 2-D
/// anything, 3-D activations); the others stay on the reference, which raises MASE's error.
inline bool mase_tiles_accepted(const Shape& shape, Role role) {
  const bool activation = role == Role::activation;
  return (shape.size() == 1 && !activation) || shape.size() == 2 || (shape.size() == 3 && activation);
}

/// The BlockScan the reference would compute for a block whose max |x| bits are mb (no NaN).
inline qnum::detail::BlockScan scan_of_bits(std::int32_t mb) {
  qnum::detail::BlockScan sc;
  sc.has_inf = mb == 0x7f800000;
  if (!sc.has_inf) sc.max = static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)));
  return sc;
}

/// NaN block (kept out of line).
[[gnu::noinline]] inline void fill_nan(float* y, std::int64_t len) { std::fill(y, y + len, qnum::detail::kNaN); }

/// Max of the magnitude bits of x[0, len) (len a multiple of the vector size).
template <class A>
inline std::int32_t block_max_bits(const float* x, std::int64_t len) {
  constexpr std::int64_t N = bf<A>::size;
  bi<A> m(0);
  for (std::int64_t i = 0; i < len; i += N) {
    const bi<A> a = as_int<A>(bf<A>::load_unaligned(x + i)) & bi<A>(0x7fffffff);
    m = select_i<A>(a > m, a, m);
  }
  // xsimd 8.1 has no integer max reduction: the intrinsics where present (a store and a
  // scalar loop over 16 lanes cost as much as the elements of a 32-element block)
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) return _mm512_reduce_max_epi32(static_cast<__m512i>(m));
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, A> && !std::is_base_of_v<xsimd::avx512f, A>) {
    __m128i v = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0x4e));
    v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0xb1));
    return _mm_cvtsi128_si32(v);
  }
#endif
  alignas(64) std::int32_t lanes[bi<A>::size];
  m.store_aligned(lanes);
  std::int32_t r = lanes[0];
  for (std::size_t i = 1; i < bi<A>::size; ++i) r = std::max(r, lanes[i]);
  return r;
}

/// qnum::detail::pow2f, always inlined: GCC kept the library's copy out of line, a call or two
/// per block in the blocked kernels' per-block step.
[[gnu::always_inline]] inline float pow2f_inline(int e) {
  if (e > 127) return std::numeric_limits<float>::infinity();
  if (e >= -126) return bits_float(static_cast<std::uint32_t>(e + 127) << 23);
  if (e >= -149) return bits_float(std::uint32_t{1} << (e + 149));
  return 0.0f;
}

/// Round to nearest even of a non-negative float (libm's nearbyintf saves and restores the
/// floating-point environment: far slower).
inline float rne_nonneg(float v) { return v < 8388608.0f ? (v + 8388608.0f) - 8388608.0f : v; }

/// Per-block parameters: `kind` 0 = vector rounding with (a, b), 1 = NaN block, 2 = the
/// reference for this block (rare exponent ranges).
struct BlockParams {
  int kind;
  float a, b;
};

/// For every block of every row: params = prep(max magnitude bits of the block), then
/// apply(x, y, len, params). Blocks are numbered row by row and split across threads in
/// chunks of whole blocks (so a single long row is parallel too; chunks depend only on the
/// sizes). Full blocks go in groups of G: first every block max of the group (a tight loop
/// of independent loads, next group prefetched: per-block scalar work otherwise leaves too
/// few cache misses in flight and the loop runs at memory latency, ~2 GB/s), then the params,
/// then the elements. A row's last, partial block runs through a zero-padded buffer (zeros
/// never change a block's max).
template <class A, class Prep, class Apply>
void for_each_row_block(std::span<const float> in, std::span<float> out, std::int64_t row, std::int64_t bs, Prep&& prep,
                        Apply&& apply) {
  constexpr std::int64_t N = bf<A>::size;
  constexpr std::int64_t G = 16;
  if (row <= 0 || in.empty()) return;
  const std::int64_t rows = static_cast<std::int64_t>(in.size()) / row;
  const std::int64_t per_row = (row + bs - 1) / bs;      // blocks per row
  const std::int64_t full = bs % N == 0 ? row / bs : 0;  // of which on the grouped path
  const float* src = in.data();
  float* dst = out.data();
  parallel_for(rows * per_row, std::max<std::int64_t>(1, kQuantizeGrain / bs), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> xb, yb;
    BlockParams params[G];
    std::int32_t maxbits[G];
    for (std::int64_t b = b0; b < b1;) {
      const std::int64_t r = b / per_row, j0 = b % per_row;
      const float* xr = src + r * row;
      float* yr = dst + r * row;
      // full blocks [j0, j1) of this row within the chunk
      const std::int64_t j1 = std::min(full, j0 + (b1 - b));
      for (std::int64_t g = j0; g < j1; g += G) {
        const std::int64_t n = std::min(G, j1 - g);
        const float* xg = xr + g * bs;
        for (std::int64_t k = 0; k < n * bs; k += 16) __builtin_prefetch(xg + G * bs + k);
        if (bs == N && n == G) {  // one vector per block (MASE's 16 on AVX-512): constant trip counts
          for (std::int64_t k = 0; k < G; ++k) maxbits[k] = block_max_bits<A>(xg + k * N, N);
          for (std::int64_t k = 0; k < G; ++k) params[k] = prep(maxbits[k]);
          for (std::int64_t k = 0; k < G; ++k) apply(xg + k * N, yr + g * N + k * N, N, params[k]);
          continue;
        }
        for (std::int64_t k = 0; k < n; ++k) maxbits[k] = block_max_bits<A>(xg + k * bs, bs);
        for (std::int64_t k = 0; k < n; ++k) params[k] = prep(maxbits[k]);
        for (std::int64_t k = 0; k < n; ++k) apply(xr + (g + k) * bs, yr + (g + k) * bs, bs, params[k]);
      }
      std::int64_t j = std::max(j0, j1);
      b += j - j0;
      // remaining blocks of this row in the chunk (partial ones or bs % N != 0): padded
      for (; j < per_row && b < b1; ++j, ++b) {
        const std::int64_t start = j * bs, len = std::min(bs, row - start);
        const std::int64_t padded = (len + N - 1) / N * N;
        xb.assign(static_cast<std::size_t>(padded), 0.0f);
        yb.resize(static_cast<std::size_t>(padded));
        std::copy(xr + start, xr + start + len, xb.begin());
        const BlockParams bp = prep(block_max_bits<A>(xb.data(), padded));
        if (bp.kind == 2) {  // the reference sees the real length
          apply(xr + start, yr + start, len, bp);
          continue;
        }
        apply(xb.data(), yb.data(), padded, bp);
        std::copy(yb.begin(), yb.begin() + len, yr + start);
      }
    }
  });
}

/// ceil(float32 log2(m)) for a positive normal float m given by its bits `mb`, exactly as the
/// references compute it (float(log2(double m)), then ceil), from the per-binade thresholds.
inline float ceil_log2_normal(std::int32_t mb) {
  static const Log2Thresholds& t = log2_thresholds(Log2Op::ceil);
  const std::int32_t f = mb >> 23;
  return static_cast<float>(f - 127 + (mb >= t.t[static_cast<std::size_t>(f)] ? 1 : 0));
}

/// Max of the magnitude bits of x[0, len) (any len).
template <class A>
inline std::int32_t max_abs_bits(const float* x, std::int64_t len) {
  constexpr std::int64_t N = bf<A>::size;
  const std::int64_t vec = len / N * N;
  std::int32_t r = vec > 0 ? block_max_bits<A>(x, vec) : 0;
  for (std::int64_t i = vec; i < len; ++i)
    r = std::max(r, static_cast<std::int32_t>(qnum::detail::float_bits(x[i]) & 0x7fffffffu));
  return r;
}

/// MASE's blocked formats in one pass when every tile lies inside one row (1-D tensors, activations,
/// biases): each block's max as it is read (for_each_row_block), then run(x, y, len, max).
/// MASE's zero-block rule needs the whole tensor's smallest non-zero max, known only at the
/// end; an all-zero block gives +0 under almost any borrowed max (0 * q + x, then F.fold's
/// 0 + v), so zero blocks are written +0 first and run again with the borrowed max only if a
/// probe of +0 and -0 says otherwise (a NaN block poisons them, for one). False (nothing
/// done) for tiles spanning rows and in place.
/// `prepare(max) -> float` turns a block max into what `run` takes (a scale, a bias); it runs
/// in the grouped pass over a few blocks' maxima, so its latency (libm-free log2 lookups,
/// conversions) overlaps instead of sitting between a block's loads and its elements.
template <class A, class Prepare, class Run>
bool mase_row_local_runs(const BlockLayout& L, std::span<const float> in, std::span<float> out, Prepare&& prepare,
                         Run&& run) {
  for (std::size_t d = 0; d + 1 < L.rank(); ++d)
    if (L.tile[d] != 1) return false;
  // In place the input is gone when the zero blocks are found (and a block whose output is all
  // zero would pass for one): the callers' two-pass paths read every block max first.
  const float* src = in.data();
  float* dst = out.data();
  if (src < dst + out.size() && dst < src + in.size()) return false;
  const std::int64_t n = numel(L.shape);
  if (n == 0) return true;
  const std::int64_t C = L.shape.back(), rows = n / C, tc = std::max<std::int64_t>(L.tile.back(), 1);
  const std::int64_t per_row = (C + tc - 1) / tc;
  std::atomic<std::uint32_t> min_key{~0u};
  std::atomic<bool> saw_zero{false};
  auto lower_min_key = [&](std::uint32_t key) {
    for (std::uint32_t m = min_key.load(std::memory_order_relaxed);
         key < m && !min_key.compare_exchange_weak(m, key, std::memory_order_relaxed);) {
    }
  };
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb == 0) {
      if (!saw_zero.load(std::memory_order_relaxed)) saw_zero.store(true, std::memory_order_relaxed);
      return {3, 0.0f, 0.0f};
    }
    return {0, prepare(bits_float(static_cast<std::uint32_t>(mb))), 0.0f};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) __attribute__((always_inline)) {
    if (bp.kind == 3) return std::fill(y, y + len, 0.0f);
    run(x, y, len, bp.a);
  };
  for_each_row_block<A>(in, out, C, tc, prep, apply);
  if (!saw_zero) return true;
  // The zero-block rule's smallest non-zero max matters only when some block is all zero
  // (rare): found by a second read of the input rather than an atomic min per block (that
  // was ~15% of block_minifloat's time).
  parallel_for(rows, std::max<std::int64_t>(1, kQuantizeGrain / C), [&](std::int64_t r0, std::int64_t r1) {
    std::uint32_t local = ~0u;
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < per_row; ++j) {
        const std::int32_t mb = max_abs_bits<A>(src + r * C + j * tc, std::min(tc, C - j * tc));
        if (mb != 0)
          local = std::min(local, qnum::detail::mase_zero_rule_key(bits_float(static_cast<std::uint32_t>(mb))));
      }
    lower_min_key(local);
  });
  const float borrowed = prepare(qnum::detail::mase_zero_rule_apply(0.0f, min_key.load()));
  constexpr std::int64_t N = bf<A>::size;
  std::array<float, 2 * N> probe{}, probe_out{};
  for (std::int64_t i = 0; i < 2 * N; i += 2) probe[static_cast<std::size_t>(i + 1)] = -0.0f;
  run(probe.data(), probe_out.data(), 2 * N, borrowed);
  bool plus_zero = true;
  for (const float v : probe_out) plus_zero &= qnum::detail::float_bits(v) == 0u;
  if (plus_zero) return true;
  for (std::int64_t r = 0; r < rows; ++r)  // rare: the zero blocks with their borrowed max
    for (std::int64_t j = 0; j < per_row; ++j) {
      const std::int64_t off = r * C + j * tc, len = std::min(tc, C - j * tc);
      if (max_abs_bits<A>(src + off, len) == 0) run(src + off, dst + off, len, borrowed);
    }
  return true;
}

/// MASE's blocked formats for every tile (tiles spanning rows, in place): block maxima as
/// integer maxima of |x|'s bits over each row's run of a tile (the float max the reference
/// takes, NaN for a NaN block), combined per block, MASE's zero-block rule on those floats,
/// then `prepare(max)` once per block (a scale, a bias) and run(x, y, len, prepared) for every
/// row run of every tile, rows in parallel.
template <class A, class Prepare, class Run>
void mase_tile_runs(const BlockLayout& L, std::span<const float> in, std::span<float> out, Prepare&& prepare,
                    Run&& run) {
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
  std::vector<float> prepared(maxima.size());
  for (std::size_t b = 0; b < maxima.size(); ++b) prepared[b] = prepare(maxima[b]);
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < per_row; ++j) {
        const std::int64_t off = r * C + j * tc;
        run(src + off, dst + off, std::min(tc, C - j * tc),
            prepared[static_cast<std::size_t>(row_block[static_cast<std::size_t>(r)] + j)]);
      }
  });
}

// ---- row runs -------------------------------------------------------------------------------

/// Max |x| bits of every row of `row` elements (rows in parallel, long rows in segments).
template <class A>
std::vector<std::int32_t> row_max_bits(const float* src, std::int64_t n, std::int64_t row) {
  const std::int64_t rows = n / row, seg = std::min(row, kQuantizeGrain), segs = (row + seg - 1) / seg;
  std::vector<std::int32_t> part(static_cast<std::size_t>(rows * segs));
  parallel_for(rows * segs, std::max<std::int64_t>(1, kQuantizeGrain / seg), [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t r = t / segs, j = t % segs, off = r * row + j * seg;
      part[static_cast<std::size_t>(t)] = max_abs_bits<A>(src + off, std::min(seg, row - j * seg));
    }
  });
  std::vector<std::int32_t> m(static_cast<std::size_t>(rows), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < segs; ++j)
      m[static_cast<std::size_t>(r)] =
          std::max(m[static_cast<std::size_t>(r)], part[static_cast<std::size_t>(r * segs + j)]);
  return m;
}

/// Calls f(row, begin, end) for the runs of [0, n) cut at row boundaries, in parallel chunks
/// of kQuantizeGrain elements (boundaries depend only on the sizes).
template <class F>
void for_each_row_run(std::int64_t n, std::int64_t row, F&& f) {
  parallel_for(n, kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e;) {
      const std::int64_t r = i / row, end = std::min(e, (r + 1) * row);
      f(r, i, end);
      i = end;
    }
  });
}

// ---- any tile, by block id ------------------------------------------------------------------

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
      qnum::tile_indices(L, b, idx);
      x.resize(idx.size());
      y.resize(idx.size());
      for (std::size_t j = 0; j < idx.size(); ++j) x[j] = src[idx[j]];
      block(b, std::span<const float>(x), std::span<const std::int64_t>(idx), std::span<float>(y));
      for (std::size_t j = 0; j < idx.size(); ++j) dst[idx[j]] = y[j];
    }
  });
}

/// The exact blocked tensor quantize (qnum::detail::quantize_blocks_exact) threaded over blocks.
template <class Spec, qnum::detail::BlockEncodeExact<Spec> Encode, qnum::detail::BlockDecodeExact<Spec> Decode>
void quantize_blocks_exact_threaded(const Spec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                                    const Shape& shape) {
  quantize_tiles_threaded(
      exact_block_layout(shape, s.block_size), in, out,
      [&](std::int64_t, std::span<const float> x, std::span<const std::int64_t> idx, std::span<float> y) {
        thread_local std::vector<std::uint32_t> codes;
        qnum::detail::quantize_block_exact<Spec, Encode, Decode>(s, p, x, idx, y, codes);
      });
}

/// One block of consecutive elements through the reference codec: the blocks a vector kernel
/// leaves out (rare exponent ranges), kept out of line so that the hot loop stays small.
/// Nearest rounding only (no draw is keyed by the index).
template <class Spec, qnum::detail::BlockEncodeExact<Spec> Encode, qnum::detail::BlockDecodeExact<Spec> Decode>
[[gnu::noinline]] void reference_block(const Spec& s, const Policy& p, const float* x, float* y, std::int64_t len) {
  const auto n = static_cast<std::size_t>(len);
  const std::vector<std::int64_t> idx(n, 0);
  std::vector<std::uint32_t> codes;
  qnum::detail::quantize_block_exact<Spec, Encode, Decode>(s, p, {x, n}, idx, {y, n}, codes);
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
