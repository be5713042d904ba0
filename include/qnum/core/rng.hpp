// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011): the draw for element i
// depends only on (seed, i), so stochastic rounding gives the same bits on any thread count,
// SIMD width or device.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "qnum/core/hd.hpp"

#if defined(__AVX2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif
namespace qnum {

/// Philox4x32-10 keyed by a 64-bit seed; `draw(counter)` returns four 32-bit words.
class CounterRng {
 public:
  QNUM_HD constexpr explicit CounterRng(std::uint64_t seed = 0) : seed_(seed) {}

  QNUM_HD constexpr std::array<std::uint32_t, 4> draw(std::uint64_t counter, std::uint64_t stream = 0) const {
    std::array<std::uint32_t, 4> c{static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
                                   static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
    std::uint32_t k0 = static_cast<std::uint32_t>(seed_), k1 = static_cast<std::uint32_t>(seed_ >> 32);
    for (int round = 0; round < 10; ++round) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0];
      const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2];
      c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return c;
  }

  /// Uniform float in [0, 1) with 24 random bits, for element `counter`.
  QNUM_HD constexpr float uniform(std::uint64_t counter) const {
    return static_cast<float>(draw(counter)[0] >> 8) * (1.0f / 16777216.0f);
  }

  /// uniform(first + i) into out[i] for i < n: the same values, 16 counters at a time in
  /// lane arrays that the compiler vectorises (dropout masks draw millions per step).
  void uniform_n(std::uint64_t first, std::size_t n, float* out) const {
    constexpr int kL = 16;
    std::size_t i = 0;
#if defined(__AVX512F__) && !defined(__CUDACC__)
    // AVX-512: 16-lane vectors, two groups in flight (philox16_avx512)
    for (; i + 2 * kL <= n; i += 2 * kL) {
      __m512i c[4][2];
      philox16_avx512<2>(first + i, c);
      for (int h = 0; h < 2; ++h) _mm512_storeu_ps(out + i + static_cast<std::size_t>(kL * h), to_uniform(c[0][h]));
    }
#endif
#if defined(__AVX2__) && !defined(__CUDACC__)
    // AVX2 by hand: 32x32 -> 64-bit products of the even lanes and of the odd lanes
    // (vpmuludq), halves recombined by blends; two 8-lane groups in flight.
    for (; i + kL <= n; i += kL) {
      alignas(32) std::uint32_t lo[kL], hi[kL];
      for (int l = 0; l < kL; ++l) {
        const std::uint64_t ctr = first + i + static_cast<std::uint64_t>(l);
        lo[l] = static_cast<std::uint32_t>(ctr), hi[l] = static_cast<std::uint32_t>(ctr >> 32);
      }
      const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
      __m256i c0[2], c1[2], c2[2], c3[2];
      for (int h = 0; h < 2; ++h) {
        c0[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo + 8 * h));
        c1[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi + 8 * h));
        c2[h] = c3[h] = _mm256_setzero_si256();
      }
      std::uint32_t k0 = static_cast<std::uint32_t>(seed_), k1 = static_cast<std::uint32_t>(seed_ >> 32);
      for (int round = 0; round < 10; ++round) {
        const __m256i vk0 = _mm256_set1_epi32(static_cast<int>(k0)), vk1 = _mm256_set1_epi32(static_cast<int>(k1));
        for (int h = 0; h < 2; ++h) {
          const __m256i e0 = _mm256_mul_epu32(c0[h], m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0[h], 32), m0);
          const __m256i e1 = _mm256_mul_epu32(c2[h], m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2[h], 32), m1);
          const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
          const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
          const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
          const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
          c0[h] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[h]), vk0);
          c2[h] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[h]), vk1);
          c1[h] = lo1;
          c3[h] = lo0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      const __m256 scale = _mm256_set1_ps(1.0f / 16777216.0f);
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(out + i + 8 * static_cast<std::size_t>(h),
                         _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c0[h], 8)), scale));
    }
#endif
    for (; i + kL <= n; i += kL) {
      std::uint32_t c[4][16];
      philox16_lanes(first + i, c);
      for (int l = 0; l < kL; ++l) out[i + static_cast<std::size_t>(l)] = to_uniform(c[0][l]);
    }
    for (; i < n; ++i) out[i] = uniform(first + i);
  }

  /// Uniform float in [0, 1) with 24 random bits for element i of the four-words-per-draw
  /// stream (dropout masks): element i takes word (i mod 64) / 16 of draw(16 (i / 64) + i mod
  /// 16), so 64 consecutive elements use all four words of 16 draws — a quarter of uniform()'s
  /// Philox rounds — laid out so that 16-lane vectors store each word without a shuffle.
  QNUM_HD constexpr float uniform4(std::uint64_t i) const {
    return static_cast<float>(draw(16 * (i / 64) + i % 16)[(i % 64) / 16] >> 8) * (1.0f / 16777216.0f);
  }

  /// uniform4(first + i) into out[i] for i < n: the same values, 64 at a time in vectors.
  void uniform4_n(std::uint64_t first, std::size_t n, float* out) const {
    std::size_t i = 0;
    for (; i < n && (first + i) % 64 != 0; ++i) out[i] = uniform4(first + i);
    for (; i + 128 <= n; i += 128) words16<2>(16 * ((first + i) / 64), out + i);
    for (; i + 64 <= n; i += 64) words16<1>(16 * ((first + i) / 64), out + i);
    for (; i < n; ++i) out[i] = uniform4(first + i);
  }

  /// Standard normal float for element `counter` (Box-Muller on two words of its draw, in
  /// double; the same on every thread count).
  float normal(std::uint64_t counter) const {
    const auto w = draw(counter, 1);                                // stream 1: independent of uniform()'s draws
    const double u1 = (static_cast<double>(w[0]) + 1.0) * 0x1p-32;  // (0, 1]
    const double u2 = static_cast<double>(w[1]) * 0x1p-32;          // [0, 1)
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  /// The four words of draws c0 + j (j < 16 G) as uniforms: out[64 g + 16 w + l] = word w of
  /// draw(c0 + 16 g + l) >> 8, times 2^-24 (uniform4's layout; G groups in flight).
  template <int G>
  void words16(std::uint64_t c0, float* out) const {
#if defined(__AVX512F__) && !defined(__CUDACC__)
    __m512i c[4][G];
    philox16_avx512<G>(c0, c);
    for (int g = 0; g < G; ++g)
      for (int w = 0; w < 4; ++w) _mm512_storeu_ps(out + 64 * g + 16 * w, to_uniform(c[w][g]));
#else
    for (int g = 0; g < G; ++g) {
      std::uint32_t c[4][16];
      philox16_lanes(c0 + static_cast<std::uint64_t>(16 * g), c);
      for (int w = 0; w < 4; ++w)
        for (int l = 0; l < 16; ++l) out[64 * g + 16 * w + l] = to_uniform(c[w][l]);
    }
#endif
  }

  /// A 32-bit word as uniform()'s float: its top 24 bits times 2^-24.
  static float to_uniform(std::uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }

  /// draw(c0 + l) for the 16 lanes l, word w in c[w][l]: arrays the compiler vectorises.
  void philox16_lanes(std::uint64_t c0, std::uint32_t (&c)[4][16]) const {
    for (int l = 0; l < 16; ++l) {
      const std::uint64_t ctr = c0 + static_cast<std::uint64_t>(l);
      c[0][l] = static_cast<std::uint32_t>(ctr), c[1][l] = static_cast<std::uint32_t>(ctr >> 32), c[2][l] = 0,
      c[3][l] = 0;
    }
    std::uint32_t k0 = static_cast<std::uint32_t>(seed_), k1 = static_cast<std::uint32_t>(seed_ >> 32);
    for (int round = 0; round < 10; ++round) {
      for (int l = 0; l < 16; ++l) {
        const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0][l];
        const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2][l];
        const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c[1][l] ^ k0;
        const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c[3][l] ^ k1;
        c[1][l] = static_cast<std::uint32_t>(p1), c[3][l] = static_cast<std::uint32_t>(p0), c[0][l] = n0, c[2][l] = n2;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
  }

#if defined(__AVX512F__) && !defined(__CUDACC__)
  static __m512 to_uniform(__m512i w) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), _mm512_set1_ps(1.0f / 16777216.0f));
  }

  /// draw(c0 + 16 g + l) for G groups of 16 lanes l, word w in lane l of c[w][g]: the AVX2
  /// scheme of uniform_n on 16-lane vectors, G groups in flight; counters built in lanes
  /// (low word + lane index, carry into the high word).
  template <int G>
  void philox16_avx512(std::uint64_t c0, __m512i (&c)[4][G]) const {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
    for (int g = 0; g < G; ++g) {
      const std::uint64_t base = c0 + static_cast<std::uint64_t>(16 * g);
      const __m512i blo = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(base)));
      c[0][g] = _mm512_add_epi32(blo, iota);
      const __mmask16 carry = _mm512_cmplt_epu32_mask(c[0][g], blo);
      const __m512i bhi = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(base >> 32)));
      c[1][g] = _mm512_mask_add_epi32(bhi, carry, bhi, _mm512_set1_epi32(1));
      c[2][g] = c[3][g] = _mm512_setzero_si512();
    }
    std::uint32_t k0 = static_cast<std::uint32_t>(seed_), k1 = static_cast<std::uint32_t>(seed_ >> 32);
    for (int round = 0; round < 10; ++round) {  // draw()'s round
      const __m512i vk0 = _mm512_set1_epi32(static_cast<int>(k0)), vk1 = _mm512_set1_epi32(static_cast<int>(k1));
      for (int g = 0; g < G; ++g) {
        const __m512i e0 = _mm512_mul_epu32(c[0][g], m0), o0 = _mm512_mul_epu32(_mm512_srli_epi64(c[0][g], 32), m0);
        const __m512i e1 = _mm512_mul_epu32(c[2][g], m1), o1 = _mm512_mul_epu32(_mm512_srli_epi64(c[2][g], 32), m1);
        const __m512i lo0 = _mm512_mask_blend_epi32(0xAAAA, e0, _mm512_slli_epi64(o0, 32));
        const __m512i hi0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e0, 32), o0);
        const __m512i lo1 = _mm512_mask_blend_epi32(0xAAAA, e1, _mm512_slli_epi64(o1, 32));
        const __m512i hi1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e1, 32), o1);
        c[0][g] = _mm512_ternarylogic_epi32(hi1, c[1][g], vk0, 0x96);  // three-way xor
        c[2][g] = _mm512_ternarylogic_epi32(hi0, c[3][g], vk1, 0x96);
        c[1][g] = lo1;
        c[3][g] = lo0;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
  }
#endif

  std::uint64_t seed_;
};

}  // namespace qnum

#include <random>
#include <vector>

namespace qnum {

/// PyTorch's CPU generator as `torch.manual_seed(seed); torch.rand_like(x)` draws float32:
/// mt19937 seeded with the low 32 bits, one draw per element in C order, u = (r & 2^24-1)·2^-24.
/// Used only to reproduce MASE's stochastic binarization bit for bit (mase_compat).
inline std::vector<float> torch_cpu_rand(std::uint64_t seed, std::size_t n) {
  std::mt19937 mt(static_cast<std::uint32_t>(seed));
  std::vector<float> u(n);
  for (auto& v : u) v = static_cast<float>(static_cast<double>(mt() & 0xFFFFFFu) * (1.0 / 16777216.0));
  return u;
}

}  // namespace qnum
