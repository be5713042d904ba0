// SIMD kernels for blocked formats in exact mode: block_fp (1-D blocks along the last axis)
// and MX (mxint, mxfp; blocks along the last axis, no quantile search), nearest-even rounding.
// Per block: the max magnitude as an integer max over the bits (NaN > Inf > finite), the
// shared exponent as the reference computes it, then the elements in vector registers;
// partial blocks run through a zero-padded buffer (zeros never change a block's max).
// Included by quantize.hpp; everything else falls back to the reference there.
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

#include "qnum/format/block_fp.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Which blocked formats the vector path covers (exact semantics, RNE, blocks along the
/// last axis of a tensor of rank >= 1).
inline bool block_supported(const Format& f, const Shape& shape) {
  const Policy& p = f.policy;
  if (p.is_mase() || p.rounding != Rounding::nearest_even) return false;
  if (const auto* s = std::get_if<BlockFPSpec>(&f.spec)) {
    if (shape.empty()) return false;
    const auto L = exact_block_layout(shape, s->block_size);
    for (std::size_t d = 0; d + 1 < L.rank(); ++d)
      if (L.tile[d] > 1) return false;
    return true;
  }
  auto mx_ok = [&](const auto& s) {
    if (s.quantile_search) return false;
    const std::size_t rank = shape.empty() ? 1 : shape.size();
    return s.block_dim == -1 || s.block_dim == static_cast<int>(rank) - 1;
  };
  if (const auto* s = std::get_if<MXIntSpec>(&f.spec)) return mx_ok(*s);
  if (const auto* s = std::get_if<MXFPSpec>(&f.spec)) return mx_ok(*s) && s->element().grid().emin >= -126;
  return false;
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

/// MX exact (OCP): scale exponent from the block max, y = x 2^-s, element rounding, y' 2^s.
template <class A>
void mx_quantize_simd(const MXElement& e, int scale_bits, const Policy& p, std::span<const float> in,
                      std::span<float> out, const Shape& shape, std::int64_t bs) {
  constexpr std::int64_t N = bf<A>::size;
  const std::int64_t row = shape.empty() ? 1 : shape.back();
  const GridKernel<MXElement> grid(e, p, e.grid(p.subnormals == Subnormals::keep), false);
  const float kscale = qnum::detail::pow2f(e.frac_width), kinv = qnum::detail::pow2f(-e.frac_width);
  const auto kmin = static_cast<float>(e.kmin()), kmax = static_cast<float>(e.kmax());
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // NaN or Inf: NaN scale, the whole block is NaN
    const int sexp = qnum::detail::mx_exact_scale_exp(e, scale_bits,
                                                      static_cast<double>(bits_float(static_cast<std::uint32_t>(mb))));
    return {0, pow2f_inline(-sexp), pow2f_inline(sexp)};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    const bf<A> down(bp.a), up(bp.b);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i) * down;  // == float(x 2^-s), one rounding
      bf<A> q;
      if (e.is_int) {
        bf<A> k = xsimd::nearbyint(v * bf<A>(kscale));  // exact product; keeps the sign of zero
        k = xsimd::select(k < bf<A>(kmin), bf<A>(kmin), k);
        k = xsimd::select(k > bf<A>(kmax), bf<A>(kmax), k);
        q = k * bf<A>(kinv);
      } else {
        q = grid.template apply<A>(v);
      }
      (q * up).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

/// One block through the reference codec (kept out of line: the hot loop stays small).
[[gnu::noinline]] inline void block_fp_reference_block(const BlockFPSpec& s, const Policy& p, const float* x, float* y,
                                                       std::int64_t len) {
  std::vector<float> xs(x, x + len);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(len), 0);
  std::vector<std::uint32_t> codes(static_cast<std::size_t>(len));
  const int e = qnum::detail::block_fp_encode_exact(s, p, xs, idx, codes);
  for (std::int64_t j = 0; j < len; ++j) y[j] = qnum::detail::block_fp_decode_exact(s, e, codes[j]);
}

/// block_fp exact along the last axis.
template <class A>
void block_fp_quantize_simd(const BlockFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                            const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int M = s.mantissa_bits(), emin = s.emin(), emax = s.emax_exact();
  const float kmax = static_cast<float>(qnum::detail::pow2(M) - 1.0);
  // max/2^lg >= 2 - 2^-M rounds up to 2^M (M >= 24: max 2^(M-e) is an integer, no carry)
  const std::int32_t carry_mant = M >= 24 ? 0x800000 : 0x800000 - (1 << (23 - M));
  auto pow2_fast = [](int t) {  // 2^t, t in [-149, 127]
    return t >= -126 ? bits_float(static_cast<std::uint32_t>(t + 127) << 23) : qnum::detail::pow2f(t);
  };
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x00800000 && mb < 0x7f800000) {  // normal max: integer arithmetic on its bits
      const int lg = (mb >> 23) - 127;
      int e = std::clamp(lg + 1, emin, emax);
      if (M - e > 127) return {2, 0.0f, 0.0f};
      // carry (see below): only when e = lg + 1 < emax, decided by the max's mantissa
      if (e == lg + 1 && e < emax && (mb & 0x7fffff) >= carry_mant) ++e;
      return {0, pow2_fast(M - e), pow2_fast(e - M)};
    }
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    const bool has_inf = mb == 0x7f800000;
    int e = emin;
    if (has_inf)
      e = emax;
    else if (mb > 0)
      e = std::clamp(qnum::detail::ilog2(static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)))) + 1, emin,
                     emax);
    if (M - e > 127) return {2, 0.0f, 0.0f};  // 2^(M-e) is no float (blocks below 2^-104)
    // Carry: some element reaches 2^M at step 2^(e-M); rounding is monotone, so it is the
    // max that does (Inf blocks keep e = emax and saturate).
    if (!has_inf && e < emax &&
        rne_nonneg(bits_float(static_cast<std::uint32_t>(mb)) * qnum::detail::pow2f(M - e)) > kmax)
      ++e;
    // |x| 2^(M-e) is exact in float, or below 2^-126, which rounds to 0 either way; 2^(M-e)
    // and 2^(e-M) are exact floats (M - e in [-127, 127], e - M >= -149 by validation).
    return {0, qnum::detail::pow2f(M - e), qnum::detail::pow2f(e - M)};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2) return block_fp_reference_block(s, p, x, y, len);
    const bf<A> scale(bp.a), step(bp.b);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> k = xsimd::nearbyint(xsimd::abs(v) * scale);
      const bf<A> mag = xsimd::min(k, bf<A>(kmax)) * step;
      const bi<A> sgn = as_int<A>(v) & bi<A>(static_cast<std::int32_t>(0x80000000u));
      as_float<A>(as_int<A>(mag) | sgn).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

// ---- mase mode ------------------------------------------------------------------------------
// The same float32 steps as the references in block_fp.hpp / mx.hpp (shared per-element
// functions for the tails), on whole vectors; block maxima as integer maxima of |x|'s bits
// (NaN > Inf > finite), which give the same float as the reference's max for every non-NaN
// block and a NaN for a NaN block.

/// Which mase-mode blocked formats the vector path covers: block_fp (any MASE tile), mxint
/// and mxfp without quantile search, blocked along the last axis. Cases MASE rejects stay on the
/// reference, which raises its error.
inline bool mase_block_supported(const Format& f, const Shape& shape, Role role) {
  if (!f.policy.is_mase() || shape.empty()) return false;
  if (std::holds_alternative<BlockFPSpec>(f.spec)) {
    const bool activation = role == Role::activation;
    return (shape.size() == 1 && !activation) || shape.size() == 2 || (shape.size() == 3 && activation);
  }
  auto mx_ok = [&](const auto& s) {
    const int rank = static_cast<int>(shape.size());
    return !s.quantile_search && s.block_size >= 1 && (s.block_dim == -1 || s.block_dim == rank - 1) &&
           numel(shape) % s.block_size == 0;
  };
  if (const auto* s = std::get_if<MXIntSpec>(&f.spec)) return mx_ok(*s);
  if (const auto* s = std::get_if<MXFPSpec>(&f.spec)) return mx_ok(*s);
  return false;
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

/// One run of a MASE block_fp block with scale p: the reference's float32 steps on vectors.
template <class A>
inline void mase_block_fp_run(const float* x, float* y, std::int64_t len, float p, float shift, float kmax, bool fold) {
  constexpr std::int64_t N = bf<A>::size;
  // Dividing by a power of two p is multiplying by 1/p whenever 1/p is a float (p >= 2^-127,
  // Inf, NaN, 0 included): both round the same exact quotient once. Also k / shift.
  const bool reciprocal = !(p > 0.0f && p < 0x1p-127f);
  const bf<A> P(p), R(1.0f / p), SHIFT(shift), INV_SHIFT(1.0f / shift), ZERO(0.0f);
  const bi<A> SIGN(static_cast<std::int32_t>(0x80000000u));
  std::int64_t i = 0;
  // MASE's steps in fewer operations, the same floats, for a finite non-zero scale p:
  // sign(x + 1e-9) · p · (k / 2^M) is ±(p · (k / 2^M)) with x's sign wherever it is used
  // (|x| > 1e-8; k / 2^M is exact, so one rounding either way), and the blend (1 - c) q + c x
  // is x + 0 on c lanes (0 · q is a zero there: q is finite, and x = -0 gives +0 both ways)
  // and q + 0 · x on the others (NaN for x = ±Inf, as MASE's 0 · x). A NaN scale (a NaN
  // block, or one borrowing its max) makes c lanes NaN too: MASE's own steps then.
  if (p > 0.0f && p < std::numeric_limits<float>::infinity()) [[likely]] {
    for (; i + N <= len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> av = xsimd::abs(v);
      const bf<A> a = av + bf<A>(1e-9f);
      const bf<A> k = clamp_t<A>(xsimd::nearbyint((reciprocal ? a * R : a / P) * SHIFT), 0.0f, kmax);
      bf<A> q = as_float<A>(as_int<A>(P * (k * INV_SHIFT)) | (as_int<A>(v) & SIGN));
      if (fold) q = ZERO + q;
      xsimd::select(av <= bf<A>(1e-8f), v + ZERO, xsimd::fma(v, ZERO, q)).store_unaligned(y + i);
    }
  } else {
    for (; i + N <= len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> a = xsimd::abs(v) + bf<A>(1e-9f);
      const bf<A> k = clamp_t<A>(xsimd::nearbyint((reciprocal ? a * R : a / P) * SHIFT), 0.0f, kmax);
      bf<A> q = sign_t<A>(v + bf<A>(1e-9f)) * P * (k * INV_SHIFT);
      if (fold) q = ZERO + q;
      const bf<A> c = xsimd::select((v == ZERO) | (xsimd::abs(v) <= bf<A>(1e-8f)), bf<A>(1.0f), ZERO);
      ((bf<A>(1.0f) - c) * q + c * v).store_unaligned(y + i);
    }
  }
  for (; i < len; ++i) y[i] = qnum::detail::mase_block_fp_element(x[i], p, shift, kmax, fold);
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

/// MASE block_fp. Tiles inside one row (bias, activations) take one pass
/// (mase_row_local_runs); tiles spanning rows (2-D weights) two: block maxima, then the
/// elements.
template <class A>
void block_fp_mase_simd(const BlockFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape,
                        Role role) {
  const BlockLayout L = mase_block_layout(s.name, shape, s.block_size, role);
  const std::int64_t n = numel(shape);
  if (n == 0) return;
  const std::int64_t C = shape.back(), rows = n / C, tc = std::max<std::int64_t>(L.tile.back(), 1);
  const std::int64_t per_row = (C + tc - 1) / tc;
  const float emin = static_cast<float>(s.emin()), emax = static_cast<float>(s.emax());
  const float shift = qnum::detail::pow2f(s.mantissa_bits()), kmax = shift - 1.0f;
  const bool fold = L.mase_fold;
  const float* src = in.data();
  float* dst = out.data();
  auto scale_of = [&](float block_max) { return qnum::detail::mase_block_fp_scale(block_max, emin, emax); };
  auto scale_of_bits = [&](std::int32_t mb) {  // the same, without libm's log2 for normal maxima
    if (mb >= 0x00800000 && mb < 0x7f800000) {
      const float e = qnum::detail::mase_clamp(ceil_log2_normal(mb), emin, emax);
      return pow2f_inline(static_cast<int>(e));  // = mase_exp2(e) for a finite integral e
    }
    return scale_of(bits_float(static_cast<std::uint32_t>(mb)));
  };

  auto scale_of_bits_f = [&](float block_max) {
    return scale_of_bits(static_cast<std::int32_t>(qnum::detail::float_bits(block_max) & 0x7fffffffu));
  };
  auto run_scaled = [&](const float* x, float* y, std::int64_t len, float scale) {
    mase_block_fp_run<A>(x, y, len, scale, shift, kmax, fold);
  };
  if (mase_row_local_runs<A>(L, in, out, scale_of_bits_f, run_scaled)) return;

  const std::int64_t grain = std::max<std::int64_t>(1, kQuantizeGrain / C);
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
  std::vector<float> scale(block_bits.size());
  for (std::size_t b = 0; b < scale.size(); ++b) scale[b] = bits_float(static_cast<std::uint32_t>(block_bits[b]));
  qnum::detail::mase_fix_zero_blocks(scale);
  for (float& v : scale) v = scale_of_bits(static_cast<std::int32_t>(qnum::detail::float_bits(v) & 0x7fffffffu));
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < per_row; ++j) {
        const std::int64_t off = r * C + j * tc;
        const float p = scale[static_cast<std::size_t>(row_block[static_cast<std::size_t>(r)] + j)];
        mase_block_fp_run<A>(src + off, dst + off, std::min(tc, C - j * tc), p, shift, kmax, fold);
      }
  });
}

/// MASE mxint (no quantile search) along the last axis: blocks of B consecutive elements of
/// the flattened tensor (they may straddle rows, as in MASE).
template <class A>
void mxint_mase_simd(const MXIntSpec& s, std::span<const float> in, std::span<float> out) {
  constexpr std::int64_t N = bf<A>::size;
  const auto base = qnum::detail::mase_mxint_params(s, 1.0f);  // mul, lo, hi: the same for every block
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // torch.quantile of a block with NaN or Inf is NaN
    // clip = max(block max, tiny): its exponent without libm's log2
    const float sc = mb < 0x00800000 ? -126.0f : ceil_log2_normal(mb);
    const auto q = qnum::detail::mase_mxint_params_at(s, sc);
    return {0, q.p2, q.outscale};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    // p = 2^sc with sc in [-126, 128] and mul = 2^(w-1): their reciprocals are floats (or 0
    // for 2^128 = Inf), so multiplying rounds exactly as the reference's divisions do.
    const bf<A> R(1.0f / bp.a), OUT(bp.b), MUL(base.mul), INV_MUL(1.0f / base.mul), LO(base.lo), HI(base.hi);
    for (std::int64_t i = 0; i < len; i += N) {
      bf<A> m = xsimd::nearbyint(bf<A>::load_unaligned(x + i) * R * MUL);
      m = xsimd::select(m < LO, LO, m);
      m = xsimd::select(m > HI, HI, m);
      (m * INV_MUL * OUT).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, static_cast<std::int64_t>(in.size()), s.block_size, prep, apply);
}

/// One MASE mxfp block through the reference codec (blocks with Inf or NaN; kept out of line).
[[gnu::noinline]] inline void mxfp_mase_reference_block(const MXFPSpec& s, const float* x, float* y, std::int64_t len) {
  std::vector<float> scratch;
  std::vector<std::uint16_t> codes(static_cast<std::size_t>(len));
  const std::uint8_t S =
      qnum::detail::mase_mxfp_extract(s, 1.0f, {x, static_cast<std::size_t>(len)}, codes.data(), scratch);
  for (std::int64_t i = 0; i < len; ++i) y[i] = qnum::detail::mase_mxfp_value(s, S, codes[static_cast<std::size_t>(i)]);
}

/// MASE mxfp (no quantile search) along the last axis: blocks of B consecutive elements of the
/// flattened tensor, as mxint. Per block the shared exponent floor(log2 amax) - emax from the
/// log2 thresholds; per element MASE's codec (mx_element.hpp: truncation to 15 fraction bits,
/// RNE to M, the carry OR-ed into the exponent field, its one subnormal binade, saturation)
/// and its decode, in integer lanes on the bits of y = x 2^-shared. Blocks holding Inf or NaN
/// take the reference (torch.quantile makes their scale NaN).
template <class A>
void mxfp_mase_simd(const MXFPSpec& s, std::span<const float> in, std::span<float> out) {
  constexpr std::int64_t N = bf<A>::size;
  const int E = s.exponent_width, M = s.frac_width;
  const int bias = qnum::detail::mase_mx_bias(E), emax = qnum::detail::mase_mx_emax(E), exp_max = (1 << E) - 1;
  const int sh = 15 - M;  // the 15 kept fraction bits rounded to M
  const Log2Thresholds& floor_t = log2_thresholds(Log2Op::floor);
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {2, 0.0f, 0.0f};
    if (mb < 0x00800000) return {0, 1.0f, 0.0f};  // every element flushed: +0 (its y is 0)
    // floor(float32 log2(block max)) as the reference computes it (log2_op_scalar's thresholds)
    const std::int32_t f = mb >> 23, fl = f - 127 + (mb >= floor_t.t[static_cast<std::size_t>(f)] ? 1 : 0);
    const int shared = std::clamp(fl - emax, -127, 128);  // <= 127 for a finite block max
    return {0, pow2f_inline(-shared), pow2f_inline(shared)};
  };
  const float sub_scale = qnum::detail::pow2f(1 - bias - M);
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 2) return mxfp_mase_reference_block(s, x, y, len);
    // 2^-shared is a float (|shared| <= 127), so x * 2^-shared rounds as the reference's x / 2^shared.
    const bf<A> R(bp.a), OUT(bp.b), SUB_SCALE(sub_scale);
    const bi<A> HALF_M1((1 << (sh - 1)) - 1), ONE(1), IMPLICIT(1 << M);
    const bi<A> MAX_CODE((exp_max << M) | ((1 << M) - 1)), NORMAL_BIAS((127 - bias) << 23);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> xv = bf<A>::load_unaligned(x + i);
      // float32 subnormal or zero inputs are flushed (|x| < 2^-126; no NaN reaches this loop)
      const bf<A> yv = xsimd::select(xsimd::abs(xv) < bf<A>(0x1p-126f), bf<A>(0.0f), xv * R);
      const bi<A> yb = as_int<A>(yv);
      const bi<A> ef = (yb >> 23) & bi<A>(0xff);
      const bi<A> top15 = (yb & bi<A>(0x7fffff)) >> 8;
      bi<A> yf = (top15 + HALF_M1 + ((top15 >> sh) & ONE)) >> sh;  // RNE, may reach 2^M
      const bi<A> ye = ef + bi<A>(bias - 127);
      yf = select_i<A>((ye == bi<A>(0)) & (yf != bi<A>(0)), (yf | IMPLICIT) >> 1, yf);
      // the carry is OR-ed, not added (MASE); above the top binade the largest code
      bi<A> code = select_i<A>(ye > bi<A>(exp_max), MAX_CODE, (ye << M) | yf);
      code = select_i<A>((ye < bi<A>(0)) | (ef == bi<A>(0)), bi<A>(0), code);
      // decode: a normal code's bits are code << (23 - M) (exponent field over fraction) plus
      // the rebias; codes below 2^M are subnormal, code · 2^(1-bias-M) (exact; 0 for 0)
      const bf<A> normal = as_float<A>((code << (23 - M)) + NORMAL_BIAS);
      const bf<A> sub = xsimd::batch_cast<float>(code) * SUB_SCALE;
      // both selects on integer masks (a float mask from an integer compare, or back, costs a
      // select and a compare on every ISA)
      const bf<A> v = as_float<A>(select_i<A>(code < IMPLICIT, as_int<A>(sub), as_int<A>(normal))) * OUT;
      // y's sign where y < 0 (not for -0, which an underflowing x * 2^-shared can give)
      const bi<A> sign = select_i<A>((yb & bi<A>(0x7fffffff)) != bi<A>(0),
                                     yb & bi<A>(static_cast<std::int32_t>(0x80000000u)), bi<A>(0));
      as_float<A>(as_int<A>(v) | sign).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, static_cast<std::int64_t>(in.size()), s.block_size, prep, apply);
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
