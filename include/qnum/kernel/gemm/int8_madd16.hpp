// AVX2 register-tiled int8 GEMM kernels for CPUs without AVX512-VNNI (gemm/int8.hpp and
// MXINT8 paths there).
//
// Operands are widened to int16 once, while packing, and multiplied with vpmaddwd: 8 int32
// lanes, each the sum of two int16 products, with no saturation (|a·b| <= 2^14). vpmaddubsw
// (u8 x s8, twice the products per instruction) is not used: its int16 pair sums saturate,
// e.g. 255·(-128)·2 with the u8 offset trick, or 128·128·2 with the sign trick (and -128 has
// no negation), so it is not exact on every int8 input.
//
// Register tile: kHMR = 6 rows x kHNR = 16 columns, 12 ymm int32 accumulators, 2 B vectors and
// one broadcast (15 of AVX2's 16 registers), the shape of the AVX fp32 kernel. Per pair of k:
// 2 loads, 6 broadcast loads, 12 vpmaddwd, 12 vpaddd — twice the multiply-adds of one fp32
// k step, for the same number of multiply instructions.
//
// Packed layouts:
//   A: int16 rows of Kp (K rounded up to even) elements, Mp (M rounded up to kHMR) rows, zeros
//      beyond M and K (zero rows and columns add nothing to an exact sum);
//   B: panels of kHNR columns, each [Kp/2][kHNR][2] int16 (a k pair of one column is the
//      32-bit lane vpmaddwd pairs with a broadcast k pair of A), zero padded.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#define QNUM_GEMM_MADD16 1

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum::detail {

inline constexpr int kHMR = 6, kHNR = 16;

/// A [M,K] int8 (row-major) -> int16 rows (see above).
inline void pack_a_s16(const std::int8_t* A, std::int64_t M, std::int64_t K, std::int64_t Kp, std::int64_t Mp,
                       std::vector<std::int16_t>& p) {
  p.assign(static_cast<std::size_t>(Mp * Kp), 0);
  std::int16_t* pd = p.data();  // raw pointer: workers must not touch the caller's vector
  parallel_for(M, 64, [=](std::int64_t ib, std::int64_t ie) {
    for (std::int64_t i = ib; i < ie; ++i)
      for (std::int64_t k = 0; k < K; ++k) pd[i * Kp + k] = A[i * K + k];
  });
}

/// B [N,K] int8 -> kHNR-column panels of k pairs (see above).
inline void pack_b_s16(const std::int8_t* B, std::int64_t N, std::int64_t K, std::int64_t Kp,
                       std::vector<std::int16_t>& p) {
  const std::int64_t panels = (N + kHNR - 1) / kHNR;
  p.assign(static_cast<std::size_t>(panels * Kp * kHNR), 0);
  std::int16_t* pd = p.data();
  parallel_for(N, kHNR, [=](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      std::int16_t* d = pd + (j / kHNR) * Kp * kHNR + (j % kHNR) * 2;
      const std::int8_t* b = B + j * K;
      for (std::int64_t k = 0; k < K; ++k) d[(k / 2) * (2 * kHNR) + (k % 2)] = b[k];
    }
  });
}

/// acc += m, in place. GCC 12 gives vpaddd's result a fresh register and copies it back to
/// the accumulator's; with 12 accumulators it runs out of registers and spills in the k loop
/// (measured: half the accumulators on the stack). The asm keeps each one in one register.
[[gnu::always_inline]] inline void add_in_place(__m256i& acc, __m256i m) {
#if defined(__GNUC__)
  asm("vpaddd %1, %0, %0" : "+x"(acc) : "x"(m));
#else
  acc = _mm256_add_epi32(acc, m);
#endif
}

/// acc[i][c] += Σ_t madd(a pair t of row i, B pair t of columns c·8 ..) for t < kpairs.
/// a: strip base (row stride lda int16); b: panel base at the first pair.
[[gnu::always_inline]] inline void madd16_tile(const std::int16_t* __restrict a, std::int64_t lda,
                                               const std::int16_t* __restrict b, std::int64_t kpairs,
                                               __m256i (&acc)[kHMR][2]) {
#pragma GCC unroll 1
  for (std::int64_t t = 0; t < kpairs; ++t) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 2 * kHNR));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 2 * kHNR + 16));
#pragma GCC unroll 6
    for (int i = 0; i < kHMR; ++i) {
      std::int32_t pair;
      std::memcpy(&pair, a + i * lda + 2 * t, 4);
      const __m256i av = _mm256_set1_epi32(pair);
      add_in_place(acc[i][0], _mm256_madd_epi16(av, b0));
      add_in_place(acc[i][1], _mm256_madd_epi16(av, b1));
    }
  }
}

/// One MXINT8 block (16 k pairs) of a kHMR x kHNR tile (the int8 kernel's shape): facc[i][c] = fma(float(d_ic),
/// sa_i·sb_c, facc[i][c]). The accumulators are named variables and add in place: as an array inlined into the tile
/// loops, GCC kept them in memory. The float sums stay in L1.
[[gnu::always_inline]] inline void mxint8_block_tile(const std::int16_t* a, std::int64_t lda, const std::int16_t* b,
                                                     const float* sa, std::int64_t sa_stride, const float* sb,
                                                     float (&facc)[kHMR][kHNR]) {
  static_assert(kHMR == 6);  // the six named rows below
  auto bcast = [a, lda](int i, int t) {
    std::int32_t pair;
    std::memcpy(&pair, a + i * lda + 2 * t, 4);
    return _mm256_set1_epi32(pair);
  };
  const __m256i z = _mm256_setzero_si256();
  __m256i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
  for (int t = 0; t < 16; ++t) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 2 * kHNR));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 2 * kHNR + 16));
    __m256i x = bcast(0, t);
    add_in_place(c00, _mm256_madd_epi16(x, b0));
    add_in_place(c01, _mm256_madd_epi16(x, b1));
    x = bcast(1, t);
    add_in_place(c10, _mm256_madd_epi16(x, b0));
    add_in_place(c11, _mm256_madd_epi16(x, b1));
    x = bcast(2, t);
    add_in_place(c20, _mm256_madd_epi16(x, b0));
    add_in_place(c21, _mm256_madd_epi16(x, b1));
    x = bcast(3, t);
    add_in_place(c30, _mm256_madd_epi16(x, b0));
    add_in_place(c31, _mm256_madd_epi16(x, b1));
    x = bcast(4, t);
    add_in_place(c40, _mm256_madd_epi16(x, b0));
    add_in_place(c41, _mm256_madd_epi16(x, b1));
    x = bcast(5, t);
    add_in_place(c50, _mm256_madd_epi16(x, b0));
    add_in_place(c51, _mm256_madd_epi16(x, b1));
  }
  const __m256 s0 = _mm256_loadu_ps(sb), s1 = _mm256_loadu_ps(sb + 8);
  auto row = [&](int i, __m256i d0, __m256i d1) {
    const __m256 av = _mm256_set1_ps(sa[i * sa_stride]);
    _mm256_store_ps(&facc[i][0],
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_mul_ps(av, s0), _mm256_load_ps(&facc[i][0])));
    _mm256_store_ps(&facc[i][8],
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_mul_ps(av, s1), _mm256_load_ps(&facc[i][8])));
  };
  row(0, c00, c01);
  row(1, c10, c11);
  row(2, c20, c21);
  row(3, c30, c31);
  row(4, c40, c41);
  row(5, c50, c51);
}

/// Stores the first `nr` columns of a kHNR-wide row (full rows as two vector stores: a
/// variable-length memcpy becomes `rep movs`, slow for 64 bytes).
template <class T>
[[gnu::always_inline]] inline void store_row16(T* dst, const T* src, int nr) {
  static_assert(sizeof(T) == 4);
  if (nr == kHNR) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 8)));
  } else {
    for (int c = 0; c < nr; ++c) dst[c] = src[c];
  }
}

/// C[M,N] (int32) = A[M,K] · B[N,K]ᵀ over int8, exact (the caller checks K against int32).
/// Blocking: output tiles of 8 strips x 8 panels; within a tile, for each panel, K in chunks
/// of kKC16 pairs (the panel's slice, 8 KB, stays in L1 across the strips), partial sums of
/// every strip kept in a tile-local array between chunks.
inline void gemm_s8_madd16(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::int64_t M, std::int64_t N,
                           std::int64_t K) {
  constexpr std::int64_t kKC16 = 128, kStrips = 8;
  const std::int64_t Kp = (K + 1) / 2 * 2, Mp = ceil_div(M, kHMR) * kHMR;
  thread_local std::vector<std::int16_t> ap_buf, bp_buf;  // reused across calls: no page faults
  pack_a_s16(A, M, K, Kp, Mp, ap_buf);
  pack_b_s16(B, N, K, Kp, bp_buf);
  const std::int16_t* ap = ap_buf.data();  // workers see their own thread_locals: pass pointers
  const std::int16_t* bp = bp_buf.data();
  const std::int64_t pairs = Kp / 2;
  gemm_tiles(M, N, kHMR * kStrips, kHNR * 8, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    alignas(32) std::int32_t part[kStrips][kHMR][kHNR];
    const std::int64_t strips = ceil_div(i1 - i0, kHMR);
    for (std::int64_t j = j0; j < j1; j += kHNR) {
      const std::int16_t* b = bp + (j / kHNR) * Kp * kHNR;
      for (std::int64_t t0 = 0; t0 < pairs; t0 += kKC16) {
        for (std::int64_t s = 0; s < strips; ++s) {
          __m256i acc[kHMR][2];
          for (int i = 0; i < kHMR; ++i)
            for (int c = 0; c < 2; ++c)
              acc[i][c] =
                  t0 ? _mm256_load_si256(reinterpret_cast<const __m256i*>(&part[s][i][8 * c])) : _mm256_setzero_si256();
          madd16_tile(ap + (i0 + s * kHMR) * Kp + 2 * t0, Kp, b + t0 * 2 * kHNR, std::min(kKC16, pairs - t0), acc);
          for (int i = 0; i < kHMR; ++i)
            for (int c = 0; c < 2; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(&part[s][i][8 * c]), acc[i][c]);
        }
      }
      const int nr = static_cast<int>(std::min<std::int64_t>(kHNR, j1 - j));
      for (std::int64_t s = 0; s < strips; ++s) {
        const std::int64_t r = i0 + s * kHMR;
        const int mr = static_cast<int>(std::min<std::int64_t>(kHMR, i1 - r));
        for (int i = 0; i < mr; ++i) store_row16(C + (r + i) * N + j, part[s][i], nr);
      }
    }
  });
}

/// MXINT8 C[M,N] = A·Bᵀ from int8 codes (`a(i, b)` / `b(j, b)`: the 32 codes of row i's block
/// b) and float block scales sa [M, nb], sb [N, nb], in gemm_mxint8_nt's order: per chunk of
/// `chunk` blocks acc = fma(float(d_b), sa·sb, acc) block by block, chunks added in order.
template <class CodesA, class CodesB>
void gemm_mxint8_madd16(CodesA&& codes_a, const float* sa, CodesB&& codes_b, const float* sb, float* C, std::int64_t M,
                        std::int64_t N, std::int64_t nb, std::int64_t chunk) {
  const std::int64_t Kp = nb * 32, Mp = ceil_div(M, kHMR) * kHMR, panels = ceil_div(N, kHNR);
  thread_local std::vector<std::int16_t> ap_buf, bp_buf;
  thread_local std::vector<float> sap_buf, sbp_buf;
  ap_buf.assign(static_cast<std::size_t>(Mp * Kp), 0);
  sap_buf.assign(static_cast<std::size_t>(Mp * nb), 0.0f);  // padded rows: zero codes, scale 0
  bp_buf.assign(static_cast<std::size_t>(panels * Kp * kHNR), 0);
  sbp_buf.assign(static_cast<std::size_t>(panels * nb * kHNR), 0.0f);
  std::int16_t* apd = ap_buf.data();
  std::int16_t* bpd = bp_buf.data();
  float* sapd = sap_buf.data();
  float* sbpd = sbp_buf.data();
  parallel_for(M, 64, [=, &codes_a](std::int64_t ib, std::int64_t ie) {
    for (std::int64_t i = ib; i < ie; ++i)
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::int8_t* x = codes_a(i, b);
        for (int t = 0; t < 32; ++t) apd[i * Kp + b * 32 + t] = x[t];
        sapd[i * nb + b] = sa[i * nb + b];
      }
  });
  parallel_for(N, kHNR, [=, &codes_b](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      const std::int64_t q = j / kHNR, jj = j % kHNR;
      std::int16_t* d = bpd + q * Kp * kHNR + jj * 2;
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::int8_t* x = codes_b(j, b);
        for (int t = 0; t < 32; ++t) d[(b * 16 + t / 2) * (2 * kHNR) + t % 2] = x[t];
        sbpd[(q * nb + b) * kHNR + jj] = sb[j * nb + b];
      }
    }
  });
  const std::int16_t* ap = apd;
  const std::int16_t* bp = bpd;
  const float* sap = sapd;
  const float* sbp = sbpd;
  // Tile: 8 strips of 6 rows x 8 panels. Per panel, blocks are taken kSub at a time across
  // all strips, so the panel's slice (kSub KB) stays in L1 while the strips use it; each
  // strip's float sums wait in tile-local arrays (the per-lane order of operations is the
  // block order either way).
  constexpr std::int64_t kStrips = 8, kSub = 8;
  gemm_tiles(M, N, kHMR * kStrips, kHNR * 8, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    alignas(32) float total[kStrips][kHMR][kHNR];
    alignas(32) float facc[kStrips][kHMR][kHNR];
    const std::int64_t strips = ceil_div(i1 - i0, kHMR);
    for (std::int64_t j = j0; j < j1; j += kHNR) {
      const std::int64_t q = j / kHNR;
      const std::int16_t* bpan = bp + q * Kp * kHNR;
      const float* sbq = sbp + q * nb * kHNR;
      std::memset(total, 0, sizeof(float) * static_cast<std::size_t>(strips * kHMR * kHNR));
      for (std::int64_t c0 = 0; c0 < nb; c0 += chunk) {
        const std::int64_t c1 = std::min(nb, c0 + chunk);
        std::memset(facc, 0, sizeof(float) * static_cast<std::size_t>(strips * kHMR * kHNR));
        for (std::int64_t s0 = c0; s0 < c1; s0 += kSub)
          for (std::int64_t s = 0; s < strips; ++s) {
            const std::int64_t r = i0 + s * kHMR;
            for (std::int64_t b = s0; b < std::min(c1, s0 + kSub); ++b)
              mxint8_block_tile(ap + r * Kp + b * 32, Kp, bpan + b * 16 * 2 * kHNR, sap + r * nb + b, nb,
                                sbq + b * kHNR, facc[s]);
          }
        for (std::int64_t s = 0; s < strips; ++s)
          for (int i = 0; i < kHMR; ++i)
            for (int c = 0; c < 2; ++c)
              _mm256_store_ps(&total[s][i][8 * c],
                              _mm256_add_ps(_mm256_load_ps(&total[s][i][8 * c]), _mm256_load_ps(&facc[s][i][8 * c])));
      }
      const int nr = static_cast<int>(std::min<std::int64_t>(kHNR, j1 - j));
      for (std::int64_t s = 0; s < strips; ++s) {
        const std::int64_t r = i0 + s * kHMR;
        const int mr = static_cast<int>(std::min<std::int64_t>(kHMR, i1 - r));
        for (int i = 0; i < mr; ++i) store_row16(C + (r + i) * N + j, total[s][i], nr);
      }
    }
  });
}

}  // namespace qnum::detail

#endif  // __AVX2__ && __FMA__
