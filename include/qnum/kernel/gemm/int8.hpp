// int8 x int8 -> int32 GEMM (fixed point), exact for K <= kGemmInt8MaxK: AMX-INT8 tiles where
// kernel::amx_enabled() (gemm/int8_amx.hpp; same sums, same epilogue), else AVX512-VNNI when
// compiled with it (gemm/int8_vnni.hpp), else AVX2's register-tiled vpmaddwd kernels on
// operands widened to int16 while packing (gemm/int8_madd16.hpp), else the SSE2/scalar dot
// product (gemm/int8_dot.hpp). gemm_fixed8_nt scales the int32 sums to float (one rounding).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/kernel/amx.hpp"
#include "qnum/kernel/gemm/int8_amx.hpp"
#include "qnum/kernel/gemm/int8_dot.hpp"
#include "qnum/kernel/gemm/int8_madd16.hpp"
#include "qnum/kernel/gemm/int8_vnni.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace qnum {

/// Largest K of the int8 paths: |Σ a·b| <= K·2^14 must fit int32.
inline constexpr std::int64_t kGemmInt8MaxK = (std::int64_t{1} << 17) - 1;

/// C[M,N] (int32) = A[M,K] · B[N,K]ᵀ over int8, exact (K <= kGemmInt8MaxK).
inline void gemm_s8_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::int64_t M, std::int64_t N,
                       std::int64_t K) {
  detail::gemm_check("gemm_s8_nt", M, N, K, A, B, C);
  detail::require(K <= kGemmInt8MaxK, "gemm_s8_nt: K=", K, " must be <= ", kGemmInt8MaxK, " (int32 accumulators)");
  if constexpr (detail::kHaveVnni) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    const auto store = [=](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
      const auto [m0, m1] = detail::column_masks(nr);
      _mm512_mask_storeu_epi32(C + row * N + j, m0, lo);
      _mm512_mask_storeu_epi32(C + row * N + j + 16, m1, hi);
    };
    if (detail::kGemmS8AmxCompiled && kernel::amx_enabled())
      detail::gemm_s8_amx(A, B, M, N, K, store);
    else
      detail::gemm_s8_vnni(A, B, M, N, K, store);
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

namespace detail {
/// 2^e scales float(acc) exactly (one rounding, none from the scale) for e in this range.
inline bool fixed8_float_scale(int e) { return e >= -90 && e <= 90; }

/// gemm_fixed8_nt's epilogue from int32 sums acc [M,N]: C = float(acc)·2^e (+ bias[j]).
inline void fixed8_epilogue(const std::int32_t* acc, float* C, std::int64_t M, std::int64_t N, int e,
                            const float* bias) {
  if (fixed8_float_scale(e)) {
    const float s = static_cast<float>(pow2(e));
    parallel_for(M, std::max<std::int64_t>(1, (1 << 16) / N), [=](std::int64_t b, std::int64_t en) {
      for (std::int64_t i = b; i < en; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          const float v = static_cast<float>(acc[i * N + j]) * s;
          C[i * N + j] = bias ? v + bias[j] : v;
        }
    });
  } else {
    const double s = pow2(e);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        const float v = static_cast<float>(static_cast<double>(acc[i * N + j]) * s);
        C[i * N + j] = bias ? v + bias[j] : v;
      }
  }
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/// The same epilogue on the int8 kernels' registers (fixed8_float_scale(e) only): store(row,
/// j, nr, lo, hi) of gemm_s8_vnni / gemm_s8_amx.
inline auto fixed8_register_store(float* C, std::int64_t N, int e, const float* bias) {
  const __m512 s = _mm512_set1_ps(static_cast<float>(pow2(e)));
  return [=](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
    const auto [m0, m1] = column_masks(nr);
    __m512 y0 = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), s), y1 = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), s);
    if (bias) {
      y0 = _mm512_add_ps(y0, _mm512_maskz_loadu_ps(m0, bias + j));
      y1 = _mm512_add_ps(y1, _mm512_maskz_loadu_ps(m1, bias + j + 16));
    }
    _mm512_mask_storeu_ps(C + row * N + j, m0, y0);
    _mm512_mask_storeu_ps(C + row * N + j + 16, m1, y1);
  };
}
#endif
}  // namespace detail

/// Fixed-point GEMM: A holds codes k_a with value k_a·2^-Fa, B codes k_b·2^-Fb (8-bit signed
/// fixed point, e.g. FixedSpec{8, F}); C = (A·Bᵀ in int32) · 2^-(Fa+Fb) (+ bias[j] when given,
/// one more rounding). The product is exact whenever it is a float: K <= kGemmFixed8ExactK
/// (beyond, one rounding of the exact sum). With VNNI the scale and bias are the int8
/// (or AMX) kernel's epilogue; otherwise a pass over an int32 product.
inline void gemm_fixed8_nt(const std::int8_t* A, int Fa, const std::int8_t* B, int Fb, float* C, std::int64_t M,
                           std::int64_t N, std::int64_t K, const float* bias = nullptr) {
  detail::gemm_check("gemm_fixed8_nt", M, N, K, A, B, C);
  detail::require(K <= kGemmInt8MaxK, "gemm_fixed8_nt: K=", K, " must be <= ", kGemmInt8MaxK, " (int32 accumulators)");
  const int e = -(Fa + Fb);
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  if (detail::fixed8_float_scale(e)) {
    const auto store = detail::fixed8_register_store(C, N, e, bias);
    if (detail::kGemmS8AmxCompiled && kernel::amx_enabled())
      detail::gemm_s8_amx(A, B, M, N, K, store);
    else
      detail::gemm_s8_vnni(A, B, M, N, K, store);
    return;
  }
#endif
  thread_local std::vector<std::int32_t> acc;  // reused across calls (only this thread touches it)
  acc.resize(static_cast<std::size_t>(M * N));
  gemm_s8_nt(A, B, acc.data(), M, N, K);
  detail::fixed8_epilogue(acc.data(), C, M, N, e, bias);
}

/// An int8 weight B [N,K] packed once for the int8 GEMM (a quantized Linear's weight: its
/// codes are never expanded to float). Where VNNI is compiled: the 32-column panels that both
/// the AMX and the VNNI kernel read (pack_b_vnni's layout, K padded to a multiple of 64) and
/// VNNI's column offsets; otherwise the codes row-major. ~N·K bytes.
struct Int8Weights {
  std::int64_t N = 0, K = 0, Kp = 0;                               ///< Kp: the panels' row stride
  std::vector<std::int8_t, detail::CacheAligned<std::int8_t>> codes;  ///< panels, or row-major codes
  std::vector<std::int32_t> column_offsets;  ///< VNNI's 128·Σ_k b per column (VNNI builds only)
  std::size_t bytes() const { return codes.size() + column_offsets.size() * sizeof(std::int32_t); }
};

/// Packs B [N,K] of int8 codes for gemm_fixed8_nt(A, Fa, weights, Fb, ...).
inline Int8Weights pack_int8_weights(const std::int8_t* B, std::int64_t N, std::int64_t K) {
  detail::require(N > 0 && K > 0 && B != nullptr, "pack_int8_weights: sizes N=", N, " K=", K,
                  " must be positive and B not null");
  detail::require(K <= kGemmInt8MaxK, "pack_int8_weights: K=", K, " must be <= ", kGemmInt8MaxK,
                  " (int32 accumulators)");
  Int8Weights w;
  w.N = N;
  w.K = K;
  if constexpr (detail::kHaveVnni) {
    w.Kp = detail::ceil_div(K, 64) * 64;
    detail::pack_b_vnni(B, N, K, w.Kp, w.codes);
    w.column_offsets.resize(static_cast<std::size_t>(detail::ceil_div(N, detail::kINR) * detail::kINR));
    detail::vnni_column_offsets(B, N, K, w.column_offsets.data());
  } else {
    w.Kp = K;
    w.codes.assign(B, B + N * K);
  }
  return w;
}

/// The codes B [N,K] row-major that pack_int8_weights packed.
inline std::vector<std::int8_t> unpack_int8_weights(const Int8Weights& w) {
  std::vector<std::int8_t> b(static_cast<std::size_t>(w.N * w.K));
  if constexpr (detail::kHaveVnni) {  // panels [N/32][Kp/4][32][4]
    for (std::int64_t j = 0; j < w.N; ++j)
      for (std::int64_t k = 0; k < w.K; ++k)
        b[static_cast<std::size_t>(j * w.K + k)] =
            w.codes[static_cast<std::size_t>((j / detail::kINR) * w.Kp * detail::kINR + (k / 4) * detail::kINR * 4 +
                                             (j % detail::kINR) * 4 + k % 4)];
  } else {
    std::copy(w.codes.begin(), w.codes.begin() + w.N * w.K, b.begin());
  }
  return b;
}

/// gemm_fixed8_nt with the weight packed once (pack_int8_weights): the same bits.
inline void gemm_fixed8_nt(const std::int8_t* A, int Fa, const Int8Weights& B, int Fb, float* C, std::int64_t M,
                           const float* bias = nullptr) {
  const std::int64_t N = B.N, K = B.K;
  detail::gemm_check("gemm_fixed8_nt", M, N, K, A, B.codes.data(), C);
  const int e = -(Fa + Fb);
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  if (detail::fixed8_float_scale(e)) {
    const auto store = detail::fixed8_register_store(C, N, e, bias);
    if (detail::kGemmS8AmxCompiled && kernel::amx_enabled())
      detail::gemm_s8_amx_packed(A, M, K, B.codes.data(), N, B.Kp, store);
    else
      detail::gemm_s8_vnni_packed(A, M, K, B.codes.data(), B.column_offsets.data(), N, B.Kp, store);
    return;
  }
  thread_local std::vector<std::int32_t> acc;  // scales outside 2^±90: int32 sums, then a pass
  acc.resize(static_cast<std::size_t>(M * N));
  std::int32_t* const pa = acc.data();  // workers see their own thread_locals: pass the pointer
  const auto store = [=](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
    const auto [m0, m1] = detail::column_masks(nr);
    _mm512_mask_storeu_epi32(pa + row * N + j, m0, lo);
    _mm512_mask_storeu_epi32(pa + row * N + j + 16, m1, hi);
  };
  if (detail::kGemmS8AmxCompiled && kernel::amx_enabled())
    detail::gemm_s8_amx_packed(A, M, K, B.codes.data(), N, B.Kp, store);
  else
    detail::gemm_s8_vnni_packed(A, M, K, B.codes.data(), B.column_offsets.data(), N, B.Kp, store);
  detail::fixed8_epilogue(acc.data(), C, M, N, e, bias);
#else
  thread_local std::vector<std::int32_t> acc;  // reused across calls (only this thread touches it)
  acc.resize(static_cast<std::size_t>(M * N));
  gemm_s8_nt(A, B.codes.data(), acc.data(), M, N, K);
  detail::fixed8_epilogue(acc.data(), C, M, N, e, bias);
#endif
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

}  // namespace qnum
