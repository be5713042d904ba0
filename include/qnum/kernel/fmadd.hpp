// The fused multiply-add on float SIMD lanes: one rounding where the target has FMA.
// xsimd 8.1 has no AVX-512 fma (its generic a * b + c fuses only under FP contraction, and
// GCC may then fuse a different product than the one written), so AVX-512 goes through the
// intrinsic; AVX2+FMA3 and NEON through xsimd::fma, which is fused there.
#pragma once

#include <xsimd/xsimd.hpp>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace qnum::detail {

using FloatBatch = xsimd::batch<float>;

/// a·b + c, rounded once on AVX-512, FMA3 and NEON builds (FP_FAST_FMAF is then defined);
/// elsewhere xsimd's a * b + c.
[[gnu::always_inline]] inline FloatBatch fmadd(const FloatBatch& a, const FloatBatch& b, const FloatBatch& c) {
#if defined(__AVX512F__)
  if constexpr (FloatBatch::size == 16) return _mm512_fmadd_ps(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

}  // namespace qnum::detail
