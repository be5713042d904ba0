// The int8 dot product of the paths without a register-tiled kernel (no VNNI, no AVX2 madd16
// tile): Σ a_k·b_k exact in int32. AVX2/SSE2 sign-extend to int16 and (v)pmaddwd (int16 pairs
// summed into int32 without saturation); otherwise a scalar loop.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum::detail {

/// Σ a_k·b_k over int8, exact in int32 (the non-VNNI path). AVX2/SSE2: sign-extend to int16
/// and (v)pmaddwd (int16 pairs summed into int32 without saturation).
inline std::int32_t dot_s8(const std::int8_t* a, const std::int8_t* b, std::int64_t n) {
  std::int64_t k = 0;
  std::int32_t s = 0;
#if defined(__AVX2__)
  __m256i acc = _mm256_setzero_si256();
  for (; k + 16 <= n; k += 16) {
    const __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k)));
    const __m256i y = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
  }
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  for (std::int32_t l : lanes) s += l;
#elif defined(__SSE2__)
  __m128i acc = _mm_setzero_si128();
  for (; k + 16 <= n; k += 16) {  // sign-extend by unpacking a byte with itself, then >> 8
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k));
    const __m128i xl = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8), xh = _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8);
    const __m128i yl = _mm_srai_epi16(_mm_unpacklo_epi8(y, y), 8), yh = _mm_srai_epi16(_mm_unpackhi_epi8(y, y), 8);
    acc = _mm_add_epi32(acc, _mm_add_epi32(_mm_madd_epi16(xl, yl), _mm_madd_epi16(xh, yh)));
  }
  alignas(16) std::int32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), acc);
  for (std::int32_t l : lanes) s += l;
#endif
  for (; k < n; ++k) s += static_cast<std::int32_t>(a[k]) * static_cast<std::int32_t>(b[k]);
  return s;
}

}  // namespace qnum::detail
