// Binary (±1) GEMM: rows packed 64 values per word, dot = K - 2·popcount(a XOR b) over the
// first K bits, exact. AVX512-VPOPCNTDQ when present (4x4 rows x columns, 8 words a step),
// else std::popcount.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/gemm/tiles.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum {

/// 64-bit words per packed binary row of K elements.
inline std::int64_t binary_words(std::int64_t K) { return detail::ceil_div(K, 64); }

/// Packs rows of ±1 values (x >= 0 -> bit 1 = +1, else bit 0 = -1, as encode(BinarySpec) with
/// bipolar) 64 per word, element k at bit k%64 of word k/64; padding bits are 0.
inline std::vector<std::uint64_t> pack_binary(const float* x, std::int64_t rows, std::int64_t K) {
  detail::require(rows >= 0 && K > 0 && x != nullptr, "pack_binary: bad arguments rows=", rows, " K=", K);
  const std::int64_t W = binary_words(K);
  std::vector<std::uint64_t> p(static_cast<std::size_t>(rows * W), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < K; ++k)
      if (x[r * K + k] >= 0.0f) p[static_cast<std::size_t>(r * W + k / 64)] |= std::uint64_t{1} << (k % 64);
  return p;
}

/// C[M,N] (int32) = A·Bᵀ over ±1 values packed by pack_binary (binary_words(K) words per row):
/// dot = K - 2·popcount(a XOR b) over the first K bits only (padding bits are ignored
/// whatever they hold). Exact.
inline void gemm_binary_nt(const std::uint64_t* A, const std::uint64_t* B, std::int32_t* C, std::int64_t M,
                           std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_binary_nt", M, N, K, A, B, C);
  const std::int64_t W = binary_words(K);
  const std::uint64_t last = (K % 64) ? (std::uint64_t{1} << (K % 64)) - 1 : ~std::uint64_t{0};
  constexpr int T = 4;
  detail::gemm_tiles(M, N, 32, 128, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    for (std::int64_t i = i0; i < i1; i += T)
      for (std::int64_t j = j0; j < j1; j += T) {
        const int mi = static_cast<int>(std::min<std::int64_t>(T, i1 - i));
        const int nj = static_cast<int>(std::min<std::int64_t>(T, j1 - j));
        const std::uint64_t* a[T];
        const std::uint64_t* b[T];
        for (int t = 0; t < T; ++t) {
          a[t] = A + (i + std::min(t, mi - 1)) * W;
          b[t] = B + (j + std::min(t, nj - 1)) * W;
        }
        std::int64_t cnt[T][T] = {};
        const std::int64_t Wf = W - 1;  // full words; the last one is masked
        std::int64_t w = 0;
#if defined(__AVX512F__) && defined(__AVX512VPOPCNTDQ__)
        __m512i acc[T][T];
        for (auto& row : acc)
          for (auto& v : row) v = _mm512_setzero_si512();
        for (; w + 8 <= Wf; w += 8) {
          __m512i av[T], bv[T];
          for (int t = 0; t < T; ++t) av[t] = _mm512_loadu_si512(a[t] + w), bv[t] = _mm512_loadu_si512(b[t] + w);
#pragma GCC unroll 4
          for (int s = 0; s < T; ++s)
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
              acc[s][t] = _mm512_add_epi64(acc[s][t], _mm512_popcnt_epi64(_mm512_xor_si512(av[s], bv[t])));
        }
        for (int s = 0; s < T; ++s)
          for (int t = 0; t < T; ++t) {
            alignas(64) std::int64_t lanes[8];
            _mm512_store_si512(lanes, acc[s][t]);
            for (std::int64_t l : lanes) cnt[s][t] += l;
          }
#endif
        for (; w < Wf; ++w)
          for (int s = 0; s < T; ++s)
            for (int t = 0; t < T; ++t) cnt[s][t] += std::popcount(a[s][w] ^ b[t][w]);
        for (int s = 0; s < mi; ++s)
          for (int t = 0; t < nj; ++t) {
            const std::int64_t c = cnt[s][t] + std::popcount((a[s][Wf] ^ b[t][Wf]) & last);
            C[(i + s) * N + j + t] = static_cast<std::int32_t>(K - 2 * c);
          }
      }
  });
}

/// Float output of gemm_binary_nt (exact: |dot| <= K <= 2^24 is checked).
inline void gemm_binary_f32_nt(const std::uint64_t* A, const std::uint64_t* B, float* C, std::int64_t M, std::int64_t N,
                               std::int64_t K) {
  detail::gemm_check("gemm_binary_f32_nt", M, N, K, A, B, C);
  detail::require(K <= (std::int64_t{1} << 24), "gemm_binary_f32_nt: K=", K, " must be <= 2^24 for exact floats");
  std::vector<std::int32_t> acc(static_cast<std::size_t>(M * N));
  gemm_binary_nt(A, B, acc.data(), M, N, K);
  for (std::int64_t i = 0; i < M * N; ++i) C[i] = static_cast<float>(acc[static_cast<std::size_t>(i)]);
}

}  // namespace qnum
