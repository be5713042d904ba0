// ternary. exact: channel statistics in vector lanes, in the reference's lane_sum order (8
// interleaved double lanes; channels run in parallel), then the elements as x > T / x < -T
// against T = the largest float <= delta (for a float x, x > delta exactly when x > T).
// mase: ternary_sample_mase per sample, samples in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "qnum/core/lane_sum.hpp"
#include "qnum/format/ternary.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Σ op(double(x[k])) for k < n in lane_sum's order (qnum/core/lane_sum.hpp): lane j of the
/// double accumulators sums k ≡ j mod 8, as the scalar definition does, so the bits are the
/// same. AVX-512: one 8-lane accumulator; AVX2: two 4-lane ones; other ISAs: the scalar loop.
/// `op` takes a double batch or a double.
template <class A, class Op>
double lane_sum_f32(const float* x, std::int64_t n, Op op) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t k = 0;
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    using bd = xsimd::batch<double, A>;
    bd s(0.0);
    for (; k + 8 <= n; k += 8) s += op(bd(_mm512_cvtps_pd(_mm256_loadu_ps(x + k))));
    s.store_unaligned(acc);
  }
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, A> && !std::is_base_of_v<xsimd::avx512f, A>) {
    using bd = xsimd::batch<double, A>;
    bd lo(0.0), hi(0.0);
    for (; k + 8 <= n; k += 8) {
      const __m256 v = _mm256_loadu_ps(x + k);
      lo += op(bd(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
      hi += op(bd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
    }
    lo.store_unaligned(acc);
    hi.store_unaligned(acc + 4);
  }
#endif
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += op(static_cast<double>(x[k + j]));
  for (int j = 0; k < n; ++k, ++j) acc[j] += op(static_cast<double>(x[k]));
  return qnum::detail::lane_sum_combine(acc);
}

/// Whether x[0, n) holds a NaN (vector compares, one reduction per 64 elements).
template <class A>
bool has_nan(const float* x, std::int64_t n) {
  constexpr std::int64_t N = bf<A>::size;
  std::int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto m = xsimd::isnan(bf<A>::load_unaligned(x + i)) | xsimd::isnan(bf<A>::load_unaligned(x + i + N)) |
                   xsimd::isnan(bf<A>::load_unaligned(x + i + 2 * N)) |
                   xsimd::isnan(bf<A>::load_unaligned(x + i + 3 * N));
    if (xsimd::any(m)) return true;
  }
  for (; i < n; ++i)
    if (x[i] != x[i]) return true;
  return false;
}

/// ternary_channel_exact (format/ternary.hpp) with its sums in vector lanes: the same bits.
template <class A>
TernaryChannel ternary_channel_simd(const TernarySpec& s, const float* x, std::int64_t n) {
  using qnum::detail::ternary_delta_exact;
  const auto vabs = [](auto v) {
    if constexpr (std::is_same_v<decltype(v), double>)
      return std::fabs(v);
    else
      return xsimd::abs(v);
  };
  TernaryChannel c;
  // Σ|x| is NaN exactly when a NaN is present; with a given threshold the sum is not needed
  if (s.threshold) {
    c.delta = ternary_delta_exact(s, 0.0, n, has_nan<A>(x, n));
  } else {
    const double sum = lane_sum_f32<A>(x, n, vabs);
    c.delta = ternary_delta_exact(s, sum, n, sum != sum);
  }
  if (!s.scaling_factor) return c;
  const double d = c.delta;
  const auto above = [&](auto v, double yes) {
    if constexpr (std::is_same_v<decltype(v), double>)
      return std::fabs(v) > d ? (yes != 0.0 ? yes : std::fabs(v)) : 0.0;
    else {
      using bd = decltype(v);
      const bd a = xsimd::abs(v);
      return xsimd::select(a > bd(d), yes != 0.0 ? bd(yes) : a, bd(0.0));
    }
  };
  const double sum = lane_sum_f32<A>(x, n, [&](auto v) { return above(v, 0.0); });
  const double count = lane_sum_f32<A>(x, n, [&](auto v) { return above(v, 1.0); });
  c.alpha = qnum::detail::ternary_alpha_exact(d, sum, count);
  return c;
}

/// ternary, both bundles.
template <class A>
void ternary_kernel(const TernarySpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                    const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const float* src = in.data();
  float* dst = out.data();
  if (p.is_mase()) {
    qnum::detail::require_mase_4d(s.name, "ternary_quantizer", shape);
    if (shape[0] == 0) return;
    const std::int64_t n = numel(shape) / shape[0];
    // the reference reads a sample fully before writing it: in place stays correct
    parallel_for(shape[0], 1, [&](std::int64_t g0, std::int64_t g1) {
      std::vector<float> scratch;
      for (std::int64_t g = g0; g < g1; ++g) qnum::detail::ternary_sample_mase(s, src + g * n, dst + g * n, n, scratch);
    });
    return;
  }
  const auto groups = qnum::detail::channel_groups(shape);
  const std::int64_t n = numel(shape);
  if (n == 0 || groups.size == 0) return;
  std::vector<TernaryChannel> ch(static_cast<std::size_t>(groups.count));
  parallel_for(groups.count, 1, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g)
      ch[static_cast<std::size_t>(g)] = ternary_channel_simd<A>(s, src + g * groups.size, groups.size);
  });
  for_each_row_run(n, groups.size, [&](std::int64_t g, std::int64_t b, std::int64_t e) {
    const TernaryChannel& c = ch[static_cast<std::size_t>(g)];
    const auto alpha = static_cast<float>(c.alpha);
    if (c.delta != c.delta) return std::fill(dst + b, dst + e, qnum::detail::kNaN);
    const float t = float_at_or_below(c.delta);
    const bf<A> T(t), NT(-t), AL(alpha), NAL(-alpha), ZERO(0.0f), NAN_(qnum::detail::kNaN);
    std::int64_t i = b;
    for (; i + N <= e; i += N) {
      const bf<A> x = bf<A>::load_unaligned(src + i);
      const bf<A> r = xsimd::select(x > T, AL, xsimd::select(x < NT, NAL, ZERO));
      xsimd::select(xsimd::isnan(x), NAN_, r).store_unaligned(dst + i);
    }
    for (; i < e; ++i) dst[i] = qnum::detail::ternary_element_exact(src[i], c, alpha);
  });
}

/// TernarySpec's row of the kernel table.
template <>
struct FamilyKernel<TernarySpec> {
  template <class A>
  static QuantizePlan plan(const TernarySpec& s, const Policy& p, const QuantizeCall& c) {
    return {p.is_mase() ? QuantizePath::scalar : QuantizePath::simd,
            [&s, &p, shape = &c.shape](std::span<const float> in, std::span<float> out) {
              ternary_kernel<A>(s, p, in, out, *shape);
            }};
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
