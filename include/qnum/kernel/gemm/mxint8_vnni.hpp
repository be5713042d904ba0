// The MXINT8 block-dot GEMM on AVX512-VNNI: A as u8 rows, B as VNNI panels with per (panel,
// block) column scales and -128·Σb offsets, vnni_tile per 32-element block, float
// accumulators kMMR x 32 (int and float accumulators: 16 zmm).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/gemm/int8_vnni.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum::detail {

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/// MXINT8 C = A·Bᵀ on VNNI (gemm_mxint8_nt's definition): per 32-element block the int8 dot
/// product in int32 (vnni_tile, offset by -128·Σb), then fma(float(d), sa·sb, acc) per
/// block in order, chunks of kChunk blocks added in order. sa, sb: the blocks' scales.
inline void gemm_mxint8_vnni(const MXInt8* A, const MXInt8* B, const float* sa_in, const float* sb_in, float* C,
                             std::int64_t M, std::int64_t N, std::int64_t nb, std::int64_t kChunk) {
  const std::int64_t Kp = nb * 32, Mp = ceil_div(M, kMMR) * kMMR, panels = ceil_div(N, kINR);
  // A: u8 rows (k + 128), padded rows zero-valued with scale 0.
  thread_local std::vector<std::uint8_t> ap_buf;  // reused across calls: no page faults
  thread_local std::vector<float> sap_buf;
  ap_buf.assign(static_cast<std::size_t>(Mp * Kp), 0x80);
  sap_buf.assign(static_cast<std::size_t>(Mp * nb), 0.0f);
  std::uint8_t* apd = ap_buf.data();
  float* sapd = sap_buf.data();
  const float* sad = sa_in;
  parallel_for(M, 64, [=](std::int64_t ib, std::int64_t ie) {
    for (std::int64_t i = ib; i < ie; ++i)
      for (std::int64_t b = 0; b < nb; ++b) {
        xor80_row(reinterpret_cast<const std::int8_t*>(A[i * nb + b].data), apd + i * Kp + b * 32, 32);
        sapd[i * nb + b] = sad[i * nb + b];
      }
  });
  // B: VNNI panels, per (panel, block) the 32 column scales and -128·Σb per column.
  thread_local std::vector<std::int8_t> bp_buf;
  thread_local std::vector<float> sbp_buf;
  thread_local std::vector<std::int32_t> ncomp_buf;
  bp_buf.assign(static_cast<std::size_t>(panels * Kp * kINR), 0);
  sbp_buf.assign(static_cast<std::size_t>(panels * nb * kINR), 0.0f);
  ncomp_buf.assign(static_cast<std::size_t>(panels * nb * kINR), 0);
  std::int8_t* bpd = bp_buf.data();
  float* sbpd = sbp_buf.data();
  const float* sbd = sb_in;
  std::int32_t* ncd = ncomp_buf.data();
  parallel_for(N, kINR, [=](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      const std::int64_t q = j / kINR, jj = j % kINR;
      std::int8_t* d = bpd + q * Kp * kINR + jj * 4;
      for (std::int64_t b = 0; b < nb; ++b) {
        ncd[(q * nb + b) * kINR + jj] =
            -128 * vnni_block(reinterpret_cast<const std::int8_t*>(B[j * nb + b].data), d + b * 32 * kINR);
        sbpd[(q * nb + b) * kINR + jj] = sbd[j * nb + b];
      }
    }
  });
  // Workers see their own thread_locals: hand them the caller's buffers as pointers.
  const std::uint8_t* ap = ap_buf.data();
  const float* sap = sap_buf.data();
  const std::int8_t* bp = bp_buf.data();
  const float* sbp = sbp_buf.data();
  const std::int32_t* ncomp = ncomp_buf.data();
  gemm_tiles(M, N, kMMR * 8, kINR * 8, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; j += kINR) {
      const std::int64_t q = j / kINR;
      const std::int8_t* bpan = bp + q * Kp * kINR;
      const int nr = static_cast<int>(std::min<std::int64_t>(kINR, j1 - j));
      for (std::int64_t r = i0; r < i1; r += kMMR) {
        alignas(64) float tile[kMMR][kINR] = {};
        for (std::int64_t c0 = 0; c0 < nb; c0 += kChunk) {
          __m512 facc[kMMR][2];
          for (auto& row : facc) row[0] = row[1] = _mm512_setzero_ps();
          const std::int64_t c1 = std::min(nb, c0 + kChunk);
          for (std::int64_t b = c0; b < c1; ++b) {
            const std::int32_t* nc = ncomp + (q * nb + b) * kINR;
            const float* sv = sbp + (q * nb + b) * kINR;
            const __m512i n0 = _mm512_loadu_si512(nc), n1 = _mm512_loadu_si512(nc + 16);
            __m512i acc[kMMR][2];
            for (auto& row : acc) row[0] = n0, row[1] = n1;
            vnni_tile(ap + r * Kp + b * 32, Kp, bpan + b * 8 * 128, 8, acc);
            const __m512 s0 = _mm512_loadu_ps(sv), s1 = _mm512_loadu_ps(sv + 16);
#pragma GCC unroll 8
            for (int i = 0; i < kMMR; ++i) {
              const __m512 a = _mm512_set1_ps(sap[(r + i) * nb + b]);
              facc[i][0] =
                  _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, acc[i][0]), _mm512_mul_ps(a, s0), facc[i][0]);
              facc[i][1] =
                  _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, acc[i][1]), _mm512_mul_ps(a, s1), facc[i][1]);
            }
          }
          for (int i = 0; i < kMMR; ++i) {
            _mm512_store_ps(&tile[i][0], _mm512_add_ps(_mm512_load_ps(&tile[i][0]), facc[i][0]));
            _mm512_store_ps(&tile[i][16], _mm512_add_ps(_mm512_load_ps(&tile[i][16]), facc[i][1]));
          }
        }
        const int mr = static_cast<int>(std::min<std::int64_t>(kMMR, i1 - r));
        for (int i = 0; i < mr; ++i)
          for (int jj = 0; jj < nr; ++jj) C[(r + i) * N + j + jj] = tile[i][jj];
      }
    }
  });
}
#endif

}  // namespace qnum::detail
