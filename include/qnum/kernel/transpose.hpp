// 16x16 float transposes in AVX-512 registers: the packing step of the GEMM's B panels and
// transposed A strips, and of attention's Kᵀ tiles.
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace qnum::detail {

#if defined(__AVX512F__)
/// dst[c·ldd + r] = src[r·lds + c] for a 16x16 block, in registers (a gather per row would
/// touch 16 pages per instruction).
inline void transpose16(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    t[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // r[4j+e], 128-bit lane L: rows 4j..4j+3 of column 4L+e
    r[4 * j] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0x44);
    r[4 * j + 1] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0xEE);
    r[4 * j + 2] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0x44);
    r[4 * j + 3] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88), w0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xDD);
    const __m512 v1 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xDD);
    _mm512_storeu_ps(dst + e * ldd, _mm512_shuffle_f32x4(v0, v1, 0x88));
    _mm512_storeu_ps(dst + (4 + e) * ldd, _mm512_shuffle_f32x4(w0, w1, 0x88));
    _mm512_storeu_ps(dst + (8 + e) * ldd, _mm512_shuffle_f32x4(v0, v1, 0xDD));
    _mm512_storeu_ps(dst + (12 + e) * ldd, _mm512_shuffle_f32x4(w0, w1, 0xDD));
  }
}
#endif

}  // namespace qnum::detail
