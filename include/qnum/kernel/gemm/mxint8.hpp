// MXINT8 (32 int8 elements sharing a power-of-two scale, OCP MX) quantize, dequantize and
// the ggml-style block-dot GEMM: the int8 dot product of each block pair in int32, then one
// float multiply-add per block. AVX512-VNNI (gemm/mxint8_vnni.hpp), else AVX2's madd16 tile
// (gemm/int8_madd16.hpp), else the SSE2/scalar dot product; quantize_mxint8 takes its block
// max and codes 32 lanes at a time on AVX-512 / AVX2.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/kernel/gemm/int8_dot.hpp"
#include "qnum/kernel/gemm/int8_madd16.hpp"
#include "qnum/kernel/gemm/int8_vnni.hpp"
#include "qnum/kernel/gemm/mxint8_vnni.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum {

/// Blocks of an MXINT8 row of K values (32 per block, the last padded with zeros).
inline std::int64_t mxint8_blocks(std::int64_t K) { return detail::ceil_div(K, 32); }

/// Quantizes `rows` rows of K floats (row-major) to MXINT8 blocks along K, mxint8_blocks(K)
/// per row, the last block of a row padded with zeros (padding never changes a scale or a
/// dot product). Bit-identical to MXInt8::from_floats on each (padded) block: scale = floor(log2
/// max|x|) clamped to [-127, 127] (+127 biased; all-zero block 0), k = clamp(RNE(x·2^(6-e)),
/// -128, 127); a block holding NaN or ±Inf gets scale 0xFF (NaN) and zero codes.
namespace detail {
/// MXINT8 block exponent from `top`, the largest |x| bit pattern of a block: floor(log2 max|x|)
/// (-127 for zero and subnormal maxima). A NaN or Inf block is written here (scale 0xFF, zero
/// codes) and gets kMxNaNBlock.
inline constexpr int kMxNaNBlock = -1000;
inline int mxint8_block_exponent(std::uint32_t top, MXInt8& o) {
  if (top >= 0x7F800000u) {
    std::memset(o.data, 0, sizeof(o.data));
    o.scale = 0xFF;
    return kMxNaNBlock;
  }
  const int field = static_cast<int>(top >> 23);
  return field == 0 ? -127 : field - 127;
}
}  // namespace detail

inline void quantize_mxint8(const float* x, std::int64_t rows, std::int64_t K, MXInt8* out) {
  detail::require(rows >= 0 && K > 0 && x != nullptr && out != nullptr, "quantize_mxint8: bad arguments rows=", rows,
                  " K=", K);
  const std::int64_t nb = mxint8_blocks(K);
  parallel_for(rows, 64, [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t r = rb; r < re; ++r)
      for (std::int64_t b = 0; b < nb; ++b) {
        const float* v = x + r * K + b * 32;
        const int n = static_cast<int>(std::min<std::int64_t>(32, K - b * 32));
        MXInt8& o = out[r * nb + b];
#if defined(__AVX512F__) && defined(__AVX512BW__)
        if (n == 32) {  // same decisions as below, 32 lanes at a time
          const __m512 x0 = _mm512_loadu_ps(v), x1 = _mm512_loadu_ps(v + 16);
          const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF);
          const __m512i a0 = _mm512_and_si512(_mm512_castps_si512(x0), mag);
          const __m512i a1 = _mm512_and_si512(_mm512_castps_si512(x1), mag);
          const __m512i amax_bits = _mm512_max_epu32(a0, a1);  // |x| orders like its bits
          const std::uint32_t top = static_cast<std::uint32_t>(_mm512_reduce_max_epu32(amax_bits));
          const int e = detail::mxint8_block_exponent(top, o);
          if (e == detail::kMxNaNBlock) continue;  // written
          if (e >= -121) {                         // else x·2^(6-e) could underflow: the scalar code below
            o.scale = static_cast<std::uint8_t>(e + 127);
            const __m512 f = _mm512_set1_ps(static_cast<float>(detail::pow2(6 - e)));
            const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
            auto q = [&](__m512 x) {
              const __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(x, f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
              return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(y, lo), hi)));
            };
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o.data), q(x0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o.data + 16), q(x1));
            continue;
          }
        }
#elif defined(__AVX2__)
        if (n == 32) {  // the same decisions as below, 8 lanes x 4
          __m256 xs[4];
          const __m256i mag = _mm256_set1_epi32(0x7FFFFFFF);
          __m256i amax_bits = _mm256_setzero_si256();
          for (int t = 0; t < 4; ++t) {
            xs[t] = _mm256_loadu_ps(v + 8 * t);
            amax_bits = _mm256_max_epu32(amax_bits, _mm256_and_si256(_mm256_castps_si256(xs[t]), mag));
          }
          __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(amax_bits), _mm256_extracti128_si256(amax_bits, 1));
          m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4E));
          m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xB1));
          const std::uint32_t top = static_cast<std::uint32_t>(_mm_cvtsi128_si32(m4));  // |x| orders like its bits
          const int e = detail::mxint8_block_exponent(top, o);
          if (e == detail::kMxNaNBlock) continue;  // written
          if (e >= -121) {  // else x·2^(6-e) could underflow: the scalar code below
            o.scale = static_cast<std::uint8_t>(e + 127);
            const __m256 f = _mm256_set1_ps(static_cast<float>(detail::pow2(6 - e)));
            const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
            __m256i k[4];
            for (int t = 0; t < 4; ++t) {
              const __m256 y = _mm256_round_ps(_mm256_mul_ps(xs[t], f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
              k[t] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(y, lo), hi));
            }
            // int32 -> int8 (values already in range): the packs interleave 128-bit lanes,
            // the permute restores element order.
            const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(k[0], k[1]), _mm256_packs_epi32(k[2], k[3]));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.data),
                                _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            continue;
          }
        }
#endif
        float amax = 0.0f;
        bool special = false;
        for (int i = 0; i < n; ++i) {
          special |= !std::isfinite(v[i]);
          amax = std::max(amax, std::fabs(v[i]));
        }
        std::memset(o.data, 0, sizeof(o.data));
        if (special) {
          o.scale = 0xFF;
          continue;
        }
        int e = -127;
        if (amax > 0.0f) e = std::clamp(detail::ilog2(static_cast<double>(amax)), -127, 127);
        o.scale = static_cast<std::uint8_t>(e + 127);
        if (e >= -121) {  // 2^(6-e) is a float; x·2^(6-e) is exact unless below 2^-126, where it rounds to 0 anyway
          const float f = static_cast<float>(detail::pow2(6 - e));
          float y[32];
          for (int i = 0; i < n; ++i) y[i] = std::clamp(std::rint(v[i] * f), -128.0f, 127.0f);  // RNE
          for (int i = 0; i < n; ++i) o.data[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(y[i]));
        } else {
          const double f = detail::pow2(6 - e);
          for (int i = 0; i < n; ++i) {
            const double k = std::clamp(std::nearbyint(static_cast<double>(v[i]) * f), -128.0, 127.0);
            o.data[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(k));
          }
        }
      }
  });
}

/// The values of MXINT8 rows (k·2^(S-133); NaN for S = 0xFF), rows x (32·blocks) floats.
inline void dequantize_mxint8(const MXInt8* q, std::int64_t rows, std::int64_t blocks, float* out) {
  for (std::int64_t i = 0; i < rows * blocks; ++i) {
    const MXInt8& b = q[i];
    const float s = b.scale == 0xFF ? std::numeric_limits<float>::quiet_NaN()
                                    : static_cast<float>(detail::pow2(static_cast<int>(b.scale) - 133));
    for (int t = 0; t < 32; ++t) out[i * 32 + t] = static_cast<float>(static_cast<std::int8_t>(b.data[t])) * s;
  }
}

namespace detail {
/// Scale of a block as float: 2^(S-133) (exact, subnormal below S = 7), NaN for 0xFF.
inline float mx_block_scale(std::uint8_t S) {
  return S == 0xFF ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(pow2(static_cast<int>(S) - 133));
}
}  // namespace detail

/// C[M,N] = A · Bᵀ with A [M, blocks] and B [N, blocks] MXINT8 blocks along K
/// (blocks = mxint8_blocks(K); K itself only names the logical length, padding elements are
/// multiplied like the others, so they must be zero as quantize_mxint8 writes them).
/// Per block: the int8 dot product d (exact int32), then acc = fma(float(d), sa·sb, acc),
/// blocks in order, in chunks of 32 blocks added in order. Error bound (no underflow:
/// Sa + Sb >= 140 for every block pair, so sa·sb is a normal float): |C - C_ref| <=
/// γ_nb · Σ_k |a_k b_k| with nb = blocks, γ_n = n·2^-24/(1-n·2^-24), against the exact
/// product of the dequantized operands. NaN blocks give NaN.
inline void gemm_mxint8_nt(const MXInt8* A, const MXInt8* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_mxint8_nt", M, N, K, A, B, C);
  const std::int64_t nb = mxint8_blocks(K);
  std::vector<float> sa(static_cast<std::size_t>(M * nb)), sb(static_cast<std::size_t>(N * nb));
  for (std::int64_t i = 0; i < M * nb; ++i) sa[static_cast<std::size_t>(i)] = detail::mx_block_scale(A[i].scale);
  for (std::int64_t i = 0; i < N * nb; ++i) sb[static_cast<std::size_t>(i)] = detail::mx_block_scale(B[i].scale);
  constexpr std::int64_t kChunk = 32;  // blocks per float chain
  if constexpr (detail::kHaveVnni) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    detail::gemm_mxint8_vnni(A, B, sa.data(), sb.data(), C, M, N, nb, kChunk);
#endif
  } else {
#if defined(QNUM_GEMM_MADD16)
    detail::gemm_mxint8_madd16(
        [A, nb](std::int64_t i, std::int64_t b) { return reinterpret_cast<const std::int8_t*>(A[i * nb + b].data); },
        sa.data(),
        [B, nb](std::int64_t j, std::int64_t b) { return reinterpret_cast<const std::int8_t*>(B[j * nb + b].data); },
        sb.data(), C, M, N, nb, kChunk);
    return;
#endif
    detail::gemm_tiles(M, N, 16, 64, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          float total = 0.0f;
          for (std::int64_t c0 = 0; c0 < nb; c0 += kChunk) {
            float acc = 0.0f;
            for (std::int64_t b = c0; b < std::min(nb, c0 + kChunk); ++b) {
              const MXInt8& x = A[i * nb + b];
              const MXInt8& y = B[j * nb + b];
              const std::int32_t d = detail::dot_s8(reinterpret_cast<const std::int8_t*>(x.data),
                                                    reinterpret_cast<const std::int8_t*>(y.data), 32);
              acc = std::fma(static_cast<float>(d),
                             sa[static_cast<std::size_t>(i * nb + b)] * sb[static_cast<std::size_t>(j * nb + b)], acc);
            }
            total += acc;
          }
          C[i * N + j] = total;
        }
    });
  }
}

/// y[M,N] = x[M,K] · Wᵀ with the activations x quantized to MXINT8 on the fly
/// (quantize_mxint8) and W given as MXINT8 [N, mxint8_blocks(K)] blocks.
inline void gemm_mxint8_f32_nt(const float* x, const MXInt8* W, float* y, std::int64_t M, std::int64_t N,
                               std::int64_t K) {
  detail::gemm_check("gemm_mxint8_f32_nt", M, N, K, x, W, y);
  thread_local std::vector<MXInt8> xq;  // reused across calls (only this thread touches it)
  xq.resize(static_cast<std::size_t>(M * mxint8_blocks(K)));
  quantize_mxint8(x, M, K, xq.data());
  gemm_mxint8_nt(xq.data(), W, y, M, N, K);
}

}  // namespace qnum
