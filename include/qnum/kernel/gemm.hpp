// GEMM kernels: fp32, int8 x int8 -> int32 (fixed point), MXINT8 (ggml-style block dots) and
// binary XNOR-popcount.
//
// Layout: everything is row-major and in the "NT" form a Linear layer wants,
//     C[M,N] = A[M,K] · B[N,K]ᵀ      (y = x · Wᵀ with W [out, in]),
// so both operands run contiguously along K. gemm_f32_nn covers B given as [K,N], and
// gemm_f32_tn A given as [K,M] (read transposed while packing: backward's dW = dYᵀ·X).
//
// Determinism: work is cut into (row chunk, column chunk) tiles whose boundaries depend only
// on M, N and K; every output element is summed in one fixed order (K in chunks of
// kKC, each chunk an FMA chain, chunks added in order), so results are bit-identical for
// any qnum::set_num_threads. Integer paths are exact, so their order does not matter.
//
// Instruction sets (chosen at compile time): fp32 uses GCC vector extensions (AVX-512: a
// 14x32 register tile; B packed once into 64-byte aligned 32-column panels by 16x16 register
// transposes; each A strip of up to 14 rows copied right before use, so it sits in L1 while B
// panels stream from L2 with software prefetch; short last strips use a narrower tile; AVX:
// 6x16; otherwise 4x8). It is the library's fp32 GEMM: at 1024^3 on one thread it measured
// ~1.1x Eigen 3.4 and ~0.97x torch.matmul (MKL) (docs/perf.md), and unlike Eigen its bits do
// not depend on the thread count.
// int8 and MXINT8 use AVX512-VNNI (vpdpbusd with the u8 offset trick: (a+128)·b - 128·Σb, exact
// in wrap-around int32) when compiled with it; otherwise AVX2's register-tiled vpmaddwd kernels on
// operands widened to int16 while packing (gemm_madd16.hpp), else an SSE2 dot product (vpmaddwd
// likewise: maddubs is not used because its int16 pair sums saturate) or a scalar loop. Binary uses
// AVX512-VPOPCNTDQ when present, else std::popcount.
// Tuning knobs (QNUM_GEMM_KC, _MR, _NV, _MCS, _NCS, _IMR, _KC4) change speed, never the bounds;
// KC (the fp32 chain length) does change fp32 bits, so keep it fixed within one comparison.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/tensor_quantize.hpp"  // before mx: mx_element.hpp needs stochastic_draw

#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"
#include "qnum/kernel/gemm_madd16.hpp"
#include "qnum/kernel/gemm_tiles.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/kernel/transpose.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_* sources when inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qnum {

namespace detail {

// ---- fp32 ---------------------------------------------------------------------------------

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

/// Minimal 64-byte aligned allocator: packed panels start on a cache line, so no vector load
/// of the micro-kernel splits across two lines.
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const {
    return true;
  }
};
using AlignedF32 = std::vector<float, CacheAligned<float>>;

/// One NT panel: d[k][j] = src[j·ldb + k] for nj <= kFNR rows of B (the rest zero).
inline void pack_b_panel_nt(const float* src, std::int64_t nj, std::int64_t K, std::int64_t ldb, float* d) {
  std::int64_t k0 = 0;
#if defined(__AVX512F__)
  if (nj == kFNR)
    for (; k0 + 16 <= K; k0 += 16)
      for (int v = 0; v < kFNV; ++v) transpose16(src + v * kFV * ldb + k0, ldb, d + k0 * kFNR + v * kFV, kFNR);
#endif
  for (; k0 < K; k0 += 16)  // 16 k at a time: nj read streams, 16 write lines
    for (std::int64_t j = 0; j < kFNR; ++j)
      for (std::int64_t k = k0; k < std::min(K, k0 + 16); ++k) d[k * kFNR + j] = j < nj ? src[j * ldb + k] : 0.0f;
}

/// B [N,K] (NT) or [K,N] (NN), rows ldb apart -> panels of kFNR columns, each [K][kFNR], zero
/// padded.
inline void pack_b_f32(const float* B, std::int64_t N, std::int64_t K, std::int64_t ldb, bool nt, AlignedF32& p,
                       bool parallel = true) {
  const std::int64_t panels = ceil_div(N, kFNR);
  p.resize(static_cast<std::size_t>(panels * K * kFNR));
  float* pd = p.data();
  parallel_for(parallel ? panels : 1, parallel ? 4 : 1, [=](std::int64_t qb, std::int64_t qe) {
    const std::int64_t pb = parallel ? qb : 0, pe = parallel ? qe : panels;
    for (std::int64_t q = pb; q < pe; ++q) {
      float* d = pd + q * K * kFNR;
      const std::int64_t j0 = q * kFNR, nj = std::min<std::int64_t>(kFNR, N - j0);
      if (nt) {
        pack_b_panel_nt(B + j0 * ldb, nj, K, ldb, d);
      } else {
        if (nj == kFNR) {  // a fixed-size copy per k (inlined; a memcpy call per 64 bytes cost more)
          for (std::int64_t k = 0; k < K; ++k) std::memcpy(d + k * kFNR, B + k * ldb + j0, sizeof(float) * kFNR);
        } else {
          for (std::int64_t k = 0; k < K; ++k) {
            std::memcpy(d + k * kFNR, B + k * ldb + j0, sizeof(float) * static_cast<std::size_t>(nj));
            std::fill(d + k * kFNR + nj, d + (k + 1) * kFNR, 0.0f);
          }
        }
      }
    }
  });
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

/// Rows r0.. r0+mr of A (rows lda apart), columns p0.. p0+kc, into a strip of rows with
/// stride kKC. Whole vectors by fixed-size copies (inlined: a memcpy call per row of an
/// attention head's 64 floats cost more than the copy).
inline void pack_a_strip(const float* A, std::int64_t lda, std::int64_t r0, int mr, std::int64_t p0, std::int64_t kc,
                         float* d) {
  const std::int64_t whole = kc - kc % kFV;
  for (int i = 0; i < mr; ++i) {
    const float* src = A + (r0 + i) * lda + p0;
    float* dst = d + i * kKC;
    for (std::int64_t k = 0; k < whole; k += kFV) std::memcpy(dst + k, src + k, sizeof(fvec));
    for (std::int64_t k = whole; k < kc; ++k) dst[k] = src[k];
  }
}

/// The same strip from A stored transposed, [K, M] with rows lda apart (A's row r is column
/// r), in the k-major layout: d[k·kAK + i] = A[(p0 + k)·lda + r0 + i]. Each k is a run of mr
/// consecutive values, so this is a plain copy (no transposed copy of A, no register
/// transposes: 16x16 transposes into the row-major strip took 5% of a bert-tiny QAT step).
/// Whole 16-value runs while the row has them (lanes past mr are never read).
inline void pack_a_strip_t(const float* A, std::int64_t M, std::int64_t lda, std::int64_t r0, int mr, std::int64_t p0,
                           std::int64_t kc, float* d) {
  const float* a = A + p0 * lda + r0;
  if (r0 + kAK <= M) {
    for (std::int64_t k = 0; k < kc; ++k) std::memcpy(d + k * kAK, a + k * lda, sizeof(float) * kAK);
    return;
  }
  for (std::int64_t k = 0; k < kc; ++k)
    for (int i = 0; i < mr; ++i) d[k * kAK + i] = a[k * lda + i];
}

/// Widest B [K,N] the micro-kernel reads in place. Its kFNR-column panels are then rows of
/// 128 bytes, N floats apart: up to 1 KB apart they stream from L2 as well as packed panels,
/// and the pass that packs B is gone (a Linear's dW = dYᵀ·X from memory, K = 4096: 81 -> 86
/// GFLOP/s at N = 128, 85 -> 96 at N = 256; bench LinearGradShape). From 2 KB on, a panel's
/// rows collide in L2's sets (N = 512: 87 -> 83; 1024³: 103 -> 90), so wider B is packed.
inline constexpr std::int64_t kBInPlaceMaxN = 256;

/// Row strides of the three operands (0: dense, the row length). Strided operands let a caller
/// multiply blocks of larger tensors in place, e.g. one attention head of a [T, heads·D] tensor.
struct GemmLd {
  std::int64_t a = 0, b = 0, c = 0;
};

/// C = op(A)·op(B) (+ bias[j] when given): A [M,K] or, when a_t, [K,M] read transposed;
/// B [N,K] (nt) or [K,N]; rows ld apart. B [K,N] with N a multiple of kFNR and rows up to
/// kBInPlaceMaxN floats apart is read in place unless pack_b (the benchmarks' baseline);
/// otherwise packed. Either way every product is the same FMA chain: the same bits.
inline void gemm_f32_impl(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K,
                          bool nt, bool a_t = false, const float* bias = nullptr, bool pack_b = false, GemmLd ld = {}) {
  thread_local AlignedF32 bbuf;  // reused: no page faults per call
  const std::int64_t lda = ld.a ? ld.a : a_t ? M : K, ldb = ld.b ? ld.b : nt ? K : N, ldc = ld.c ? ld.c : N;
  const bool parallel =
      2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= kGemmSerialFlops;
  const bool b_in_place = !pack_b && !nt && N % kFNR == 0 && ldb <= kBInPlaceMaxN;
  if (!b_in_place) pack_b_f32(B, N, K, ldb, nt, bbuf, parallel);
  const float* bp = bbuf.data();
  constexpr std::int64_t MC = kFMR * QNUM_GEMM_MCS, NC = kFNR * QNUM_GEMM_NCS;
  gemm_tiles(
      M, N, MC, NC,
      [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
        thread_local AlignedF32 ap(static_cast<std::size_t>(std::max<int>(kFMR, kAK) * kKC));
        for (std::int64_t p0 = 0; p0 < K; p0 += kKC) {
          const std::int64_t kc = std::min(kKC, K - p0);
          // Each A strip (broadcast operand, mr x kc) is packed right before its use, so it is
          // still in L1, and stays there while the tile's B panels stream from L2 (BLIS's order
          // for a broadcast-from-L1 micro-kernel). Packing all strips first measured ~2% slower.
          // Packing A measured faster than reading it in place even at K <= kKC (a runtime row
          // stride costs a register per row; the 14-row tile then spills), and prefetching the
          // next strip's rows during this one measured no gain.
          const float* bias_here = p0 + kc == K ? bias : nullptr;
          for (std::int64_t r = i0; r < i1; r += kFMR) {
            const int mr = static_cast<int>(std::min<std::int64_t>(kFMR, i1 - r));
            // A transposed with rows up to kBInPlaceMaxN floats apart is read in place: each k
            // is a run of mr values, one pointer step apart (bert-tiny's dW = dYᵀ·X, M = N = 128:
            // 106 -> 111 GFLOP/s); wider rows share too few L1 sets, so they are copied first.
            const bool a_in_place = a_t && lda <= kBInPlaceMaxN;
            if (!a_t)
              pack_a_strip(A, lda, r, mr, p0, kc, ap.data());
            else if (!a_in_place)
              pack_a_strip_t(A, M, lda, r, mr, p0, kc, ap.data());
            const float* as = a_in_place ? A + p0 * lda + r : ap.data();
            const std::int64_t as_k = a_in_place ? lda : kAK;  // k stride of the k-major strip
            const F32Micro micro = (a_t ? kF32MicroKMajor : kF32Micro)[mr - 1];
            for (std::int64_t j = j0; j < j1; j += kFNR) {
              const float* b = b_in_place ? B + p0 * ldb + j : bp + (j / kFNR) * K * kFNR + p0 * kFNR;
              const int nr = static_cast<int>(std::min<std::int64_t>(kFNR, j1 - j));
              micro(as, b, b_in_place ? ldb : kFNR, kc, C + r * ldc + j, ldc, nr, p0 > 0,
                    bias_here ? bias_here + j : nullptr, as_k);
            }
          }
        }
      },
      parallel);
}

}  // namespace detail

/// C[M,N] = A[M,K] · B[N,K]ᵀ in float32 (own blocked kernel; the library's fp32 GEMM).
/// Each C element: K in chunks of 256, an FMA chain per chunk, chunks added in order; the
/// error is at most γ_K·Σ_k|a_ik b_jk| (γ_n = n·2^-24/(1-n·2^-24)). Any alignment.
inline void gemm_f32_nt(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_f32_nt", M, N, K, A, B, C);
  detail::gemm_f32_impl(A, B, C, M, N, K, true);
}

/// C[M,N] = A[M,K] · B[N,K]ᵀ + bias[N] (broadcast over rows): gemm_f32_nt with the bias added
/// to each finished element in the kernel's epilogue, bit-identical to gemm_f32_nt followed by
/// C[i][j] += bias[j] (a Linear layer's forward without a second pass over C).
inline void gemm_f32_nt_bias(const float* A, const float* B, const float* bias, float* C, std::int64_t M,
                             std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_f32_nt_bias", M, N, K, A, B, C);
  detail::require(bias != nullptr, "gemm_f32_nt_bias: bias is null");
  detail::gemm_f32_impl(A, B, C, M, N, K, true, false, bias);
}

/// C[M,N] = A[M,K] · B[K,N] (B not transposed); same kernel and bound as gemm_f32_nt.
inline void gemm_f32_nn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_f32_nn", M, N, K, A, B, C);
  detail::gemm_f32_impl(A, B, C, M, N, K, false);
}

/// C[M,N] = A[K,M]ᵀ · B[K,N] (A read transposed in place: dW = dYᵀ·X of a Linear layer);
/// same kernel, order and bound as gemm_f32_nn of the transposed A, so the same bits.
inline void gemm_f32_tn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_f32_tn", M, N, K, A, B, C);
  detail::gemm_f32_impl(A, B, C, M, N, K, false, true);
}

/// The three products on blocks of larger row-major tensors: A, B and C rows lda, ldb and ldc
/// floats apart (each at least its row length), e.g. one head of a [T, heads·D] activation.
/// Same kernel, order and bits as the dense forms above.
enum class GemmForm { nt, nn, tn };
inline void gemm_f32_strided(GemmForm form, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                             float* C, std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_check("gemm_f32_strided", M, N, K, A, B, C);
  const bool nt = form == GemmForm::nt, a_t = form == GemmForm::tn;
  const std::int64_t a_row = a_t ? M : K, b_row = nt ? K : N;
  detail::require(lda >= a_row && ldb >= b_row && ldc >= N, "gemm_f32_strided: strides lda=", lda, " ldb=", ldb,
                  " ldc=", ldc, " are shorter than the rows (", a_row, ", ", b_row, ", ", N, ")");
  detail::gemm_f32_impl(A, B, C, M, N, K, nt, a_t, nullptr, false, {lda, ldb, ldc});
}

/// Span overloads: sizes checked against the shapes.
inline void gemm_f32_nt(std::span<const float> A, std::span<const float> B, std::span<float> C, std::int64_t M,
                        std::int64_t N, std::int64_t K) {
  detail::require(M > 0 && N > 0 && K > 0, "gemm_f32_nt: sizes M=", M, " N=", N, " K=", K, " must all be positive");
  detail::require(static_cast<std::int64_t>(A.size()) == M * K && static_cast<std::int64_t>(B.size()) == N * K &&
                      static_cast<std::int64_t>(C.size()) == M * N,
                  "gemm_f32_nt: buffers of ", A.size(), ", ", B.size(), ", ", C.size(), " floats do not match M=", M,
                  " N=", N, " K=", K, " (need M*K, N*K, M*N)");
  gemm_f32_nt(A.data(), B.data(), C.data(), M, N, K);
}

// ---- int8 x int8 -> int32 ---------------------------------------------------------------

/// Largest K of the int8 paths: |Σ a·b| <= K·2^14 must fit int32.
inline constexpr std::int64_t kGemmInt8MaxK = (std::int64_t{1} << 17) - 1;

namespace detail {

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
inline void pack_b_vnni(const std::int8_t* B, std::int64_t N, std::int64_t K, std::int64_t Kp,
                        std::vector<std::int8_t>& p) {
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

}  // namespace detail

namespace detail {

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/// The VNNI int8 GEMM: Σ_k A[i,k]·B[j,k] exact in int32, handed to store(row, j, nr, lo, hi)
/// as two 16-lane vectors (columns j.. j+15 and j+16.. j+31; only the first nr < 32 are
/// columns of C), so the caller's epilogue (int32 store, or scale and bias to float) runs on
/// registers, not on a second pass over C.
template <class Store>
void gemm_s8_vnni(const std::int8_t* A, const std::int8_t* B, std::int64_t M, std::int64_t N, std::int64_t K,
                  Store&& store) {
  const std::int64_t Kp = ceil_div(K, 4) * 4;
  thread_local std::vector<std::uint8_t> ap_buf;  // reused across calls: no page faults
  thread_local std::vector<std::int8_t> bp_buf;
  thread_local std::vector<std::int32_t> comp_buf;  // 128 * Σ_k b_jk, zero past N (whole panels)
  pack_a_u8(A, M, K, Kp, ap_buf);
  pack_b_vnni(B, N, K, Kp, bp_buf);
  comp_buf.assign(static_cast<std::size_t>(ceil_div(N, kINR) * kINR), 0);
  // Workers see their own thread_locals: hand them the caller's buffers as pointers.
  const std::uint8_t* ap = ap_buf.data();
  const std::int8_t* bp = bp_buf.data();
  std::int32_t* comp = comp_buf.data();
  parallel_for(N, 64, [=](std::int64_t jb, std::int64_t je) {
    for (std::int64_t j = jb; j < je; ++j) {
      std::int32_t sum = 0;
      for (std::int64_t k = 0; k < K; ++k) sum += B[j * K + k];
      comp[j] = 128 * sum;
    }
  });
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

/// Lane masks for the first nr <= 32 columns of a 32-column tile, as two 16-lane halves.
inline std::pair<__mmask16, __mmask16> column_masks(int nr) {
  const std::uint32_t m = nr >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << nr) - 1;
  return {static_cast<__mmask16>(m & 0xFFFF), static_cast<__mmask16>(m >> 16)};
}
#endif

}  // namespace detail

/// C[M,N] (int32) = A[M,K] · B[N,K]ᵀ over int8, exact (K <= kGemmInt8MaxK).
inline void gemm_s8_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::int64_t M, std::int64_t N,
                       std::int64_t K) {
  detail::gemm_check("gemm_s8_nt", M, N, K, A, B, C);
  detail::require(K <= kGemmInt8MaxK, "gemm_s8_nt: K=", K, " must be <= ", kGemmInt8MaxK, " (int32 accumulators)");
  if constexpr (detail::kHaveVnni) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    detail::gemm_s8_vnni(A, B, M, N, K, [=](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
      const auto [m0, m1] = detail::column_masks(nr);
      _mm512_mask_storeu_epi32(C + row * N + j, m0, lo);
      _mm512_mask_storeu_epi32(C + row * N + j + 16, m1, hi);
    });
#endif
  } else {
#if defined(QNUM_GEMM_MADD16)
    detail::gemm_s8_madd16(A, B, C, M, N, K);
    return;
#endif
    detail::gemm_tiles(M, N, 16, 64, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          C[i * N + j] = detail::dot_s8(A + i * K, B + j * K, K);
        }
    });
  }
}

/// Largest K at which gemm_fixed8_nt's sums are exact in float: |Σ| <= K·2^14 <= 2^24. Up to
/// it, every partial sum of the fp32 GEMM over the dequantized operands is exact as well, so
/// the two give the same bits (a quantized Linear takes the int8 path only then).
inline constexpr std::int64_t kGemmFixed8ExactK = 1024;

/// Fixed-point GEMM: A holds codes k_a with value k_a·2^-Fa, B codes k_b·2^-Fb (8-bit signed
/// fixed point, e.g. FixedSpec{8, F}); C = (A·Bᵀ in int32) · 2^-(Fa+Fb) (+ bias[j] when given,
/// one more rounding). The product is exact whenever it is a float: K <= kGemmFixed8ExactK
/// (beyond, one rounding of the exact sum). With VNNI the scale and bias are the int8
/// kernel's epilogue; otherwise a pass over an int32 product.
inline void gemm_fixed8_nt(const std::int8_t* A, int Fa, const std::int8_t* B, int Fb, float* C, std::int64_t M,
                           std::int64_t N, std::int64_t K, const float* bias = nullptr) {
  detail::gemm_check("gemm_fixed8_nt", M, N, K, A, B, C);
  detail::require(K <= kGemmInt8MaxK, "gemm_fixed8_nt: K=", K, " must be <= ", kGemmInt8MaxK, " (int32 accumulators)");
  const int e = -(Fa + Fb);
  const bool float_scale = e >= -90 && e <= 90;  // float(acc)·2^e: one rounding, 2^e scales exactly
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  if (float_scale) {
    const __m512 s = _mm512_set1_ps(static_cast<float>(detail::pow2(e)));
    detail::gemm_s8_vnni(A, B, M, N, K, [=](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
      const auto [m0, m1] = detail::column_masks(nr);
      __m512 y0 = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), s), y1 = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), s);
      if (bias) {
        y0 = _mm512_add_ps(y0, _mm512_maskz_loadu_ps(m0, bias + j));
        y1 = _mm512_add_ps(y1, _mm512_maskz_loadu_ps(m1, bias + j + 16));
      }
      _mm512_mask_storeu_ps(C + row * N + j, m0, y0);
      _mm512_mask_storeu_ps(C + row * N + j + 16, m1, y1);
    });
    return;
  }
#endif
  thread_local std::vector<std::int32_t> acc;  // reused across calls (only this thread touches it)
  acc.resize(static_cast<std::size_t>(M * N));
  gemm_s8_nt(A, B, acc.data(), M, N, K);
  const std::int32_t* a = acc.data();
  if (float_scale) {
    const float s = static_cast<float>(detail::pow2(e));
    parallel_for(M, std::max<std::int64_t>(1, (1 << 16) / N), [=](std::int64_t b, std::int64_t en) {
      for (std::int64_t i = b; i < en; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          const float v = static_cast<float>(a[i * N + j]) * s;
          C[i * N + j] = bias ? v + bias[j] : v;
        }
    });
  } else {
    const double s = detail::pow2(e);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        const float v = static_cast<float>(static_cast<double>(a[i * N + j]) * s);
        C[i * N + j] = bias ? v + bias[j] : v;
      }
  }
}

/// int8 codes of x under 8-bit signed fixed point with `frac` fraction bits (round to
/// nearest even, saturating): k = clamp(RNE(x·2^frac), -128, 127). NaN -> qnum::Error.
inline std::vector<std::int8_t> quantize_fixed8(std::span<const float> x, int frac) {
  std::vector<std::int8_t> k(x.size());
  const double f = detail::pow2(frac);
  for (std::size_t i = 0; i < x.size(); ++i) {
    detail::require(x[i] == x[i], "quantize_fixed8: NaN has no fixed-point code");
    const double v = std::nearbyint(static_cast<double>(x[i]) * f);
    k[i] = static_cast<std::int8_t>(std::clamp(v, -128.0, 127.0));
  }
  return k;
}

// ---- MXINT8 ---------------------------------------------------------------------------------

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
    using namespace detail;
    const std::int64_t Kp = nb * 32, Mp = ceil_div(M, kMMR) * kMMR, panels = ceil_div(N, kINR);
    // A: u8 rows (k + 128), padded rows zero-valued with scale 0.
    thread_local std::vector<std::uint8_t> ap_buf;  // reused across calls: no page faults
    thread_local std::vector<float> sap_buf;
    ap_buf.assign(static_cast<std::size_t>(Mp * Kp), 0x80);
    sap_buf.assign(static_cast<std::size_t>(Mp * nb), 0.0f);
    std::uint8_t* apd = ap_buf.data();
    float* sapd = sap_buf.data();
    const float* sad = sa.data();
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
    const float* sbd = sb.data();
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

// ---- binary (±1) ----------------------------------------------------------------------------

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

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
