// AVX512-VNNI int8 kernels (vpdpbusd with the u8 offset trick: (a+128)·b - 128·Σb, exact in
// wrap-around int32): the operand packs (A as u8 rows, B as VNNI-ordered 32-column panels),
// the register tile vnni_tile (kIMR rows x 32 columns) and the int8 GEMM driver gemm_s8_vnni,
// whose epilogue (int32 store, or scale and bias to float) runs on registers. kHaveVnni says
// whether this translation unit has them; the packs are plain C++ and shared with MXINT8.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum::detail {

#ifndef QNUM_GEMM_IMR
#define QNUM_GEMM_IMR 8
#endif
inline constexpr int kIMR = QNUM_GEMM_IMR, kINR = 32;  // VNNI register tile: kIMR rows x 32 columns
#ifndef QNUM_GEMM_KC4
#define QNUM_GEMM_KC4 128
#endif
inline constexpr int kMMR = 4;  // MXINT8: 4 x 32 (int and float accumulators: 16 zmm)

/// A [M,K] int8 -> u8 (a + 128) rows of Kp bytes (Kp = K rounded up to 4; pad = value 0).
/// d[k] = a[k] + 128 as u8 (arguments by value: u8 stores cannot alias them, so it vectorizes).
inline void xor80_row(const std::int8_t* __restrict a, std::uint8_t* __restrict d, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) d[k] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(a[k]) ^ 0x80u);
}

/// One column's 32-element block into VNNI order (4 bytes per k/4 group, groups kINR·4 apart);
/// returns Σ of the 32 values.
inline std::int32_t vnni_block(const std::int8_t* __restrict src, std::int8_t* __restrict d) {
  for (int g = 0; g < 8; ++g) std::memcpy(d + g * kINR * 4, src + 4 * g, 4);
  std::int32_t s = 0;
  for (int t = 0; t < 32; ++t) s += src[t];
  return s;
}

inline void pack_a_u8(const std::int8_t* A, std::int64_t M, std::int64_t K, std::int64_t Kp,
                      std::vector<std::uint8_t>& p) {
  const std::int64_t Mp = ceil_div(M, kIMR) * kIMR;
  p.assign(static_cast<std::size_t>(Mp * Kp), 0x80);
  std::uint8_t* pd = p.data();  // raw pointers: u8 stores may alias a captured vector's internals
  parallel_for(M, 64, [=](std::int64_t ib, std::int64_t ie) {
    for (std::int64_t i = ib; i < ie; ++i) {
      const std::int8_t* a = A + i * K;
      std::uint8_t* d = pd + i * Kp;
      xor80_row(a, d, K);
    }
  });
}

/// B [N,K] int8 -> panels of kINR columns, each [Kp/4][kINR][4] bytes (VNNI order), zero padded.
template <class Alloc>
void pack_b_vnni(const std::int8_t* B, std::int64_t N, std::int64_t K, std::int64_t Kp,
                 std::vector<std::int8_t, Alloc>& p) {
  const std::int64_t panels = ceil_div(N, kINR);
  p.assign(static_cast<std::size_t>(panels * Kp * kINR), 0);
  std::int8_t* pd = p.data();
  parallel_for(N, kINR, [=](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      std::int8_t* d = pd + (j / kINR) * Kp * kINR + (j % kINR) * 4;
      const std::int8_t* b = B + j * K;
      std::int64_t k = 0;
      for (; k + 4 <= K; k += 4) std::memcpy(d + k * kINR, b + k, 4);  // (k/4)·kINR·4 = k·kINR
      for (; k < K; ++k) d[(k / 4) * kINR * 4 + k % 4] = b[k];
    }
  });
}

/// comp[j] = 128·Σ_k B[j,k] for j < N and 0 up to whole panels of kINR (VNNI's u8 offset: the
/// kernel sums (a+128)·b and subtracts this).
inline void vnni_column_offsets(const std::int8_t* B, std::int64_t N, std::int64_t K, std::int32_t* comp) {
  std::fill(comp + N, comp + ceil_div(N, kINR) * kINR, 0);
  parallel_for(N, 64, [=](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      std::int32_t sum = 0;
      for (std::int64_t k = 0; k < K; ++k) sum += B[j * K + k];
      comp[j] = 128 * sum;
    }
  });
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
inline constexpr bool kHaveVnni = true;

inline __m512i bcast4(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// int acc[kIMR][32] = Σ_{k in [k0,k1)} (a+128)·b, k0, k1 multiples of 4.
/// a: row-strip base (row stride lda bytes); b: panel base at k0.
template <int MR>
inline void vnni_tile(const std::uint8_t* a, std::int64_t lda, const std::int8_t* b, std::int64_t k4s,
                      __m512i (&acc)[MR][2]) {
  for (std::int64_t t = 0; t < k4s; ++t) {
    const __m512i b0 = _mm512_loadu_si512(b + t * 128), b1 = _mm512_loadu_si512(b + t * 128 + 64);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i av = bcast4(a + i * lda + t * 4);
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], av, b1);
    }
  }
}
#else
inline constexpr bool kHaveVnni = false;
#endif

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/// gemm_s8_vnni on B packed already (a weight packed once: pack_b_vnni's panels with row
/// stride Kp, a multiple of 4, and comp from vnni_column_offsets).
template <class Store>
void gemm_s8_vnni_packed(const std::int8_t* A, std::int64_t M, std::int64_t K, const std::int8_t* bp,
                         const std::int32_t* comp, std::int64_t N, std::int64_t Kp, Store&& store) {
  thread_local std::vector<std::uint8_t> ap_buf;  // reused across calls: no page faults
  pack_a_u8(A, M, K, Kp, ap_buf);
  const std::uint8_t* ap = ap_buf.data();  // workers see their own thread_locals: pass the pointer
  constexpr std::int64_t KC4 = QNUM_GEMM_KC4;  // k/4 steps per chunk: the B panel slice is KC4·128 bytes
  gemm_tiles(M, N, kIMR * 8, kINR * 8, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    constexpr std::int64_t kStrips = 8;
    alignas(64) std::int32_t part[kStrips][kIMR][kINR];  // the tile's int32 sums across K chunks
    for (std::int64_t j = j0; j < j1; j += kINR) {
      const std::int8_t* b = bp + (j / kINR) * Kp * kINR;
      const int nr = static_cast<int>(std::min<std::int64_t>(kINR, j1 - j));
      const std::int64_t strips = ceil_div(i1 - i0, kIMR);
      for (std::int64_t t0 = 0; t0 < Kp / 4; t0 += KC4) {  // B slice stays in L1 across the strips
        for (std::int64_t st = 0; st < strips; ++st) {
          const std::int64_t r = i0 + st * kIMR;
          __m512i acc[kIMR][2];
          for (int i = 0; i < kIMR; ++i) {
            acc[i][0] = t0 ? _mm512_load_si512(&part[st][i][0]) : _mm512_setzero_si512();
            acc[i][1] = t0 ? _mm512_load_si512(&part[st][i][16]) : _mm512_setzero_si512();
          }
          vnni_tile(ap + r * Kp + t0 * 4, Kp, b + t0 * 128, std::min(KC4, Kp / 4 - t0), acc);
          for (int i = 0; i < kIMR; ++i) {
            _mm512_store_si512(&part[st][i][0], acc[i][0]);
            _mm512_store_si512(&part[st][i][16], acc[i][1]);
          }
        }
      }
      // Wrap-around int32 arithmetic (vpsubd): exact whenever the result fits.
      const __m512i c0 = _mm512_loadu_si512(comp + j), c1 = _mm512_loadu_si512(comp + j + 16);
      for (std::int64_t st = 0; st < strips; ++st) {
        const std::int64_t r = i0 + st * kIMR;
        const int mr = static_cast<int>(std::min<std::int64_t>(kIMR, i1 - r));
        for (int i = 0; i < mr; ++i)
          store(r + i, j, nr, _mm512_sub_epi32(_mm512_load_si512(&part[st][i][0]), c0),
                _mm512_sub_epi32(_mm512_load_si512(&part[st][i][16]), c1));
      }
    }
  });
}

/// The VNNI int8 GEMM: Σ_k A[i,k]·B[j,k] exact in int32, handed to store(row, j, nr, lo, hi)
/// as two 16-lane vectors (columns j.. j+15 and j+16.. j+31; only the first nr < 32 are
/// columns of C), so the caller's epilogue (int32 store, or scale and bias to float) runs on
/// registers, not on a second pass over C.
template <class Store>
void gemm_s8_vnni(const std::int8_t* A, const std::int8_t* B, std::int64_t M, std::int64_t N, std::int64_t K,
                  Store&& store) {
  const std::int64_t Kp = ceil_div(K, 4) * 4;
  thread_local std::vector<std::int8_t> bp_buf;  // reused across calls: no page faults
  thread_local std::vector<std::int32_t> comp_buf;
  pack_b_vnni(B, N, K, Kp, bp_buf);
  comp_buf.resize(static_cast<std::size_t>(ceil_div(N, kINR) * kINR));
  vnni_column_offsets(B, N, K, comp_buf.data());
  gemm_s8_vnni_packed(A, M, K, bp_buf.data(), comp_buf.data(), N, Kp, store);
}

/// Lane masks for the first nr <= 32 columns of a 32-column tile, as two 16-lane halves.
inline std::pair<__mmask16, __mmask16> column_masks(int nr) {
  const std::uint32_t m = nr >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << nr) - 1;
  return {static_cast<__mmask16>(m & 0xFFFF), static_cast<__mmask16>(m >> 16)};
}
#endif

}  // namespace qnum::detail
