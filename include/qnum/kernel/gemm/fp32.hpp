// fp32 GEMM: C = op(A)·op(B) (+ bias) in float32, row-major, NT (a Linear's y = x·Wᵀ), NN,
// TN (A read transposed while packing: backward's dW = dYᵀ·X) and strided blocks of larger
// tensors. B is packed once into 64-byte aligned panels (16x16 register transposes for NT),
// each A strip copied right before use so it sits in L1 while B panels stream from L2; the
// register tile is gemm/fp32_micro.hpp. Every element is one fixed chain (K in chunks of kKC,
// an FMA chain per chunk, chunks added in order) and tiles depend only on the sizes, so the
// bits never depend on the thread count (Eigen's do). Speed against Eigen and MKL: docs/perf.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/gemm/fp32_micro.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/kernel/transpose.hpp"

namespace qnum {

namespace detail {

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
/// transposes into the row-major strip: they cost a visible share of a QAT step).
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
/// and the pass that packs B is gone (a Linear's dW = dYᵀ·X). From 2 KB on, a panel's rows
/// collide in L2's sets, so wider B is packed (measurements: docs/perf.md, "GEMM: B in place").
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
          // for a broadcast-from-L1 micro-kernel), rather than all strips first. A is packed
          // even at K <= kKC: read in place, a runtime row stride costs a register per row and
          // the 14-row tile spills.
          const float* bias_here = p0 + kc == K ? bias : nullptr;
          for (std::int64_t r = i0; r < i1; r += kFMR) {
            const int mr = static_cast<int>(std::min<std::int64_t>(kFMR, i1 - r));
            // A transposed with rows up to kBInPlaceMaxN floats apart is read in place: each k
            // is a run of mr values, one pointer step apart (bert-tiny's dW = dYᵀ·X); wider rows
            // share too few L1 sets, so they are copied first.
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

}  // namespace qnum
