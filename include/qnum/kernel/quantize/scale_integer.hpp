// scale_integer, rows along the last axis: row maxima as integer maxima of |x|'s bits over
// segments of at most kQuantizeGrain elements (a max is exact, so the split changes nothing;
// NaN bits > Inf), then the elements. mase: MASE's float32 ops on vectors (x * s, round half
// even, clamp, k / s: the same IEEE operations as scale_integer_code_mase); exact (double
// arithmetic): round to nearest even in double vector lanes (the reference's operations),
// other roundings by the reference's element function; threaded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "qnum/format/scale_integer.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// scale_integer, both bundles, rows along the last axis.
template <class A>
void scale_integer_kernel(const ScaleIntegerSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                          const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const std::int64_t n = static_cast<std::int64_t>(in.size()), row = shape.empty() ? 1 : shape.back();
  if (n == 0 || row == 0) return;
  const float* src = in.data();
  float* dst = out.data();
  const auto mb = row_max_bits<A>(src, n, row);
  auto row_max = [&](std::int64_t r) {
    return bits_float(static_cast<std::uint32_t>(mb[static_cast<std::size_t>(r)]));
  };
  if (!p.is_mase()) {
    using bd = xsimd::batch<double, A>;
    constexpr std::int64_t D = bd::size;
    const bool vector_path = p.rounding == Rounding::nearest_even;
    const double kmax = static_cast<double>(s.kmax()), kmin = static_cast<double>(s.kmin());
    for_each_row_run(n, row, [&](std::int64_t r, std::int64_t b, std::int64_t e) {
      const float m = row_max(r);
      if (!std::isfinite(m)) return std::fill(dst + b, dst + e, qnum::detail::kNaN);  // no finite scale
      std::int64_t i = b;
      if (vector_path && m != 0.0f) {
        // The reference's double operations on D lanes: k = clamp(rne((x·kmax)/m)), value =
        // float((k·m)/kmax); a zero value takes x's sign when signed (as the reference).
        const bd KMAX(kmax), KMIN(kmin), M(static_cast<double>(m));
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
        if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
          // 16 floats a step, widened and narrowed in registers (the generic loop below goes
          // through arrays one lane at a time): 0.22 -> see docs/perf.md.
          const __m512i sign_mask = _mm512_set1_epi32(s.is_signed ? INT32_MIN : 0);
          auto half = [&](__m256 x) {
            const bd k = xsimd::min(xsimd::max(xsimd::nearbyint((bd(_mm512_cvtps_pd(x)) * KMAX) / M), KMIN), KMAX);
            return _mm512_cvtpd_ps(static_cast<__m512d>((k * M) / KMAX));
          };
          for (; i + 16 <= e; i += 16) {
            const __m512 x = _mm512_loadu_ps(src + i);
            const __m512 v = _mm512_insertf32x8(_mm512_castps256_ps512(half(_mm512_castps512_ps256(x))),
                                                half(_mm512_extractf32x8_ps(x, 1)), 1);
            // a zero value takes x's sign when signed, else +0 (as the reference)
            const __mmask16 zero = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ);
            _mm512_storeu_si512(dst + i,
                                _mm512_mask_and_epi32(_mm512_castps_si512(v), zero, _mm512_castps_si512(x), sign_mask));
          }
        }
#endif
        for (; i + D <= e; i += D) {
          alignas(64) double xd[D], vd[D];
          for (std::int64_t j = 0; j < D; ++j) xd[j] = static_cast<double>(src[i + j]);
          bd k = xsimd::nearbyint((bd::load_aligned(xd) * KMAX) / M);
          k = xsimd::min(xsimd::max(k, KMIN), KMAX);
          ((k * M) / KMAX).store_aligned(vd);
          for (std::int64_t j = 0; j < D; ++j) {
            const float v = static_cast<float>(vd[j]);
            dst[i + j] = v != 0.0f ? v : (s.is_signed ? std::copysign(0.0f, src[i + j]) : 0.0f);
          }
        }
      }
      for (; i < e; ++i)
        dst[i] = qnum::detail::scale_integer_element_exact(s, p, src[i], m, static_cast<std::uint64_t>(i));
    });
    return;
  }
  const auto lo = static_cast<float>(s.kmin()), hi = static_cast<float>(s.kmax());
  const bool stream = stream_output(in, out);  // large outputs past the caches (simd.hpp)
  for_each_row_run(n, row, [&](std::int64_t r, std::int64_t b, std::int64_t e) {
    // a NaN max gives a NaN scale and Inf a zero one: every output NaN, as in the reference
    const float scale = qnum::detail::scale_integer_mase_scale(s, row_max(r));
    const bf<A> S(scale), LO(lo), HI(hi);
    std::int64_t i = b;
    if (stream)
      for (; i < e && !batch_aligned<A>(dst + i); ++i)
        dst[i] = qnum::detail::scale_integer_code_mase(s, src[i], scale) / scale;
    for (; i + N <= e; i += N) {
      // nearbyint keeps NaN and the sign of zero; the selects let NaN through (torch.clamp)
      bf<A> k = xsimd::nearbyint(bf<A>::load_unaligned(src + i) * S);
      k = xsimd::select(k < LO, LO, k);
      k = xsimd::select(k > HI, HI, k);
      if (stream)
        store_stream<A>(k / S, dst + i);
      else
        (k / S).store_unaligned(dst + i);
    }
    if (stream) stream_fence();
    for (; i < e; ++i) dst[i] = qnum::detail::scale_integer_code_mase(s, src[i], scale) / scale;
  });
}

/// ScaleIntegerSpec's row of the kernel table.
template <>
struct FamilyKernel<ScaleIntegerSpec> {
  template <class A>
  static QuantizePlan plan(const ScaleIntegerSpec& s, const Policy& p, const QuantizeCall& c) {
    // exact: round to nearest even in vector lanes; other roundings per element
    const bool vector = p.is_mase() || p.rounding == Rounding::nearest_even;
    return {vector ? QuantizePath::simd : QuantizePath::scalar,
            [&s, &p, shape = &c.shape](std::span<const float> in, std::span<float> out) {
              scale_integer_kernel<A>(s, p, in, out, *shape);
            }};
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
