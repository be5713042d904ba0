// The fp32 GEMM's register tile, per instruction set (chosen at compile time, GCC vector
// extensions): AVX-512 a 14x32 tile (kFMR rows x kFNV vectors of kFV lanes), AVX 6x16,
// otherwise 4x8; the K chunk kKC (the FMA chain length per chunk: it fixes the bits, so keep
// it fixed within one comparison) and the cache blocking knobs (QNUM_GEMM_KC, _MR, _NV, _MCS,
// _NCS change speed only). f32_micro is the tile: kc FMA steps into registers, then the
// epilogue (accumulate into C, optional bias).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum::detail {

#if defined(__AVX512F__)
#ifndef QNUM_GEMM_MR
#define QNUM_GEMM_MR 14
#endif
#ifndef QNUM_GEMM_NV
#define QNUM_GEMM_NV 2
#endif
inline constexpr int kFV = 16, kFMR = QNUM_GEMM_MR, kFNV = QNUM_GEMM_NV;
#elif defined(__AVX__)
inline constexpr int kFV = 8, kFMR = 6, kFNV = 2;
#else
inline constexpr int kFV = 4, kFMR = 4, kFNV = 2;
#endif
inline constexpr int kFNR = kFV * kFNV;
#ifndef QNUM_GEMM_KC
#define QNUM_GEMM_KC 256
#endif
#ifndef QNUM_GEMM_MCS
#define QNUM_GEMM_MCS 10
#endif
#ifndef QNUM_GEMM_NCS
#define QNUM_GEMM_NCS 32
#endif
inline constexpr std::int64_t kKC = QNUM_GEMM_KC;  // K chunk: the FMA chain length per chunk
inline constexpr std::int64_t kPrefetch = 32;      // B prefetch distance in k steps
inline constexpr int kAK = kFMR > 16 ? kFMR : 16;  // k-major A strip: values per k (a cache line)
typedef float fvec __attribute__((vector_size(kFV * 4)));

/// a·b + c with one rounding where the target has FMA (ISO C++ mode does not contract).
inline fvec vfma(fvec a, fvec b, fvec c) {
#if defined(__AVX512F__)
  return (fvec)(_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)));
#elif defined(__AVX__) && defined(__FMA__)
  return (fvec)(_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)));
#else
  return a * b + c;
#endif
}

/// x in every lane (a broadcast load, not 0 + x).
inline fvec vbcast(const float* x) {
#if defined(__AVX512F__)
  return (fvec)(_mm512_set1_ps(*x));
#elif defined(__AVX__)
  return (fvec)(_mm256_set1_ps(*x));
#elif defined(__SSE2__)
  return (fvec)(_mm_set1_ps(*x));
#else
  fvec v;
  for (int l = 0; l < kFV; ++l) v[l] = *x;
  return v;
#endif
}

/// The register tile: acc[MR][kFNR] = Σ_k a[i][k] b[k][j] over kc steps, then C (+)= acc, then
/// C += bias[j] when bias is given (the last K chunk passes it: the same two roundings, in the
/// same order, as a separate bias pass over C).
/// a: the packed A strip, kept in L1: MR rows of stride kKC (row-major: the constant stride
/// makes every broadcast address an immediate offset), or with KMajor kc steps of MR values
/// a_k apart (a[k·a_k + i]: a transposed A, copied into a k-major strip or read in place; one
/// pointer step per k, the row offsets immediate).
/// b: kc rows of kFNR values, ldb apart (a packed panel: ldb = kFNR; B read in place: its row
/// stride). Streams from L2.
template <int MR, bool KMajor = false>
void f32_micro(const float* __restrict a, const float* __restrict b, std::int64_t ldb, std::int64_t kc, float* c,
               std::int64_t ldc, int nr, bool accumulate, const float* bias, std::int64_t a_k) {
  fvec acc[MR][kFNV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kFNV; ++v) acc[i][v] = fvec{};
  for (std::int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 4
    for (int v = 0; v < kFNV; ++v) __builtin_prefetch(b + (k + kPrefetch) * ldb + v * kFV);
    fvec bv[kFNV];
#pragma GCC unroll 4
    for (int v = 0; v < kFNV; ++v) std::memcpy(&bv[v], b + k * ldb + v * kFV, sizeof(fvec));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const fvec s = KMajor ? vbcast(a + k * a_k + i) : vbcast(a + i * kKC + k);
#pragma GCC unroll 4
      for (int v = 0; v < kFNV; ++v) acc[i][v] = vfma(s, bv[v], acc[i][v]);
    }
  }
  if (nr == kFNR) {
    fvec bv[kFNV] = {};
    if (bias)
#pragma GCC unroll 4
      for (int v = 0; v < kFNV; ++v) std::memcpy(&bv[v], bias + v * kFV, sizeof(fvec));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kFNV; ++v) {
        float* p = c + i * ldc + v * kFV;
        fvec out = acc[i][v];
        if (accumulate) {
          fvec old;
          std::memcpy(&old, p, sizeof(fvec));
          out = old + out;
        }
        if (bias) out = out + bv[v];
        std::memcpy(p, &out, sizeof(fvec));
      }
    return;
  }
  alignas(64) float t[MR][kFNR];
  std::memcpy(t, acc, sizeof(t));
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < nr; ++j) {
      float out = accumulate ? c[i * ldc + j] + t[i][j] : t[i][j];
      if (bias) out += bias[j];
      c[i * ldc + j] = out;
    }
}

using F32Micro = void (*)(const float*, const float*, std::int64_t, std::int64_t, float*, std::int64_t, int, bool,
                          const float*, std::int64_t);

/// f32_micro<MR> for MR = 1..kFMR: a short last strip costs its own rows, not kFMR.
template <bool KMajor, int... I>
constexpr std::array<F32Micro, sizeof...(I)> f32_micro_table(std::integer_sequence<int, I...>) {
  return {&f32_micro<I + 1, KMajor>...};
}
inline constexpr auto kF32Micro = f32_micro_table<false>(std::make_integer_sequence<int, kFMR>{});
inline constexpr auto kF32MicroKMajor = f32_micro_table<true>(std::make_integer_sequence<int, kFMR>{});

}  // namespace qnum::detail
