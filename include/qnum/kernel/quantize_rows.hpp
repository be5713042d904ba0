// Threaded kernels for the per-row / per-channel scaled families: scale_integer (both
// bundles) and ternary (exact in vector registers; MASE's per-sample rule threaded); and
// residual_sign (several outputs per element), in vector lanes.
//  - scale_integer: row maxima as integer maxima of |x|'s bits over segments of at most
//    kQuantizeGrain elements (a max is exact, so the split changes nothing; NaN bits > Inf),
//    then the elements. mase: MASE's float32 ops on vectors (x * s, round half even, clamp,
//    k / s: the same IEEE operations as scale_integer_code_mase); exact (double arithmetic):
//    round to nearest even in double vector lanes (the reference's operations), other
//    roundings by the reference's element function; threaded.
//  - ternary exact: channel statistics in vector lanes, in the reference's lane_sum order
//    (8 interleaved double lanes; channels run in parallel), then the elements as
//    x > T / x < -T against T = the largest float <= delta (for a float x, x > delta exactly
//    when x > T). mase: ternary_sample_mase per sample, samples in parallel.
// Included by quantize.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "qnum/format/binary.hpp"
#include "qnum/format/residual_sign.hpp"
#include "qnum/format/scale_integer.hpp"
#include "qnum/format/ternary.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Max |x| bits of every row of `row` elements (rows in parallel, long rows in segments).
template <class A>
std::vector<std::int32_t> row_max_bits(const float* src, std::int64_t n, std::int64_t row) {
  const std::int64_t rows = n / row, seg = std::min(row, kQuantizeGrain), segs = (row + seg - 1) / seg;
  std::vector<std::int32_t> part(static_cast<std::size_t>(rows * segs));
  parallel_for(rows * segs, std::max<std::int64_t>(1, kQuantizeGrain / seg), [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t r = t / segs, j = t % segs, off = r * row + j * seg;
      part[static_cast<std::size_t>(t)] = max_abs_bits<A>(src + off, std::min(seg, row - j * seg));
    }
  });
  std::vector<std::int32_t> m(static_cast<std::size_t>(rows), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < segs; ++j)
      m[static_cast<std::size_t>(r)] =
          std::max(m[static_cast<std::size_t>(r)], part[static_cast<std::size_t>(r * segs + j)]);
  return m;
}

/// Calls f(row, begin, end) for the runs of [0, n) cut at row boundaries, in parallel chunks
/// of kQuantizeGrain elements (boundaries depend only on the sizes).
template <class F>
void for_each_row_run(std::int64_t n, std::int64_t row, F&& f) {
  parallel_for(n, kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e;) {
      const std::int64_t r = i / row, end = std::min(e, (r + 1) * row);
      f(r, i, end);
      i = end;
    }
  });
}

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
  for_each_row_run(n, row, [&](std::int64_t r, std::int64_t b, std::int64_t e) {
    // a NaN max gives a NaN scale and Inf a zero one: every output NaN, as in the reference
    const float scale = qnum::detail::scale_integer_mase_scale(s, row_max(r));
    const bf<A> S(scale), LO(lo), HI(hi);
    std::int64_t i = b;
    for (; i + N <= e; i += N) {
      // nearbyint keeps NaN and the sign of zero; the selects let NaN through (torch.clamp)
      bf<A> k = xsimd::nearbyint(bf<A>::load_unaligned(src + i) * S);
      k = xsimd::select(k < LO, LO, k);
      k = xsimd::select(k > HI, HI, k);
      (k / S).store_unaligned(dst + i);
    }
    for (; i < e; ++i) dst[i] = qnum::detail::scale_integer_code_mase(s, src[i], scale) / scale;
  });
}

/// The largest float <= d (d >= 0 or +Inf, not NaN): for a float x, x > d iff x > T.
inline float float_at_or_below(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) > d) f = std::nextafter(f, -qnum::detail::kInf);
  return f;
}

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

/// residual_sign (both bundles): the reference's element (binary.hpp residual_sign_element)
/// in vector lanes — exact: double lanes, mase: float lanes — threaded over elements; each
/// level's outputs go to their own [n] slice of `out`.
template <class A>
void residual_sign_kernel(const ResidualSignSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                          const Shape& shape) {
  const auto means = qnum::detail::residual_sign_prepare(s, p, in.size(), out.size(), shape);
  const auto n = static_cast<std::int64_t>(in.size());
  const auto L = static_cast<std::int64_t>(means.size());
  const bool mase = p.is_mase();
  const float* src = in.data();
  float* dst = out.data();
  auto lanes = [&]<class T>(T, std::int64_t b, std::int64_t e) -> std::int64_t {
    using bt = xsimd::batch<T, A>;
    constexpr std::int64_t N = bt::size;
    const bt ONE(T(1)), MONE(T(-1)), ZERO(T(0));
    std::array<bt, 8> mag;  // |mu_l| as the reference's element takes it (levels <= 8)
    for (std::int64_t l = 0; l < L; ++l) {
      const double mu = means[static_cast<std::size_t>(l)];
      mag[static_cast<std::size_t>(l)] = bt(mase ? T(std::fabs(static_cast<float>(mu))) : T(std::fabs(mu)));
    }
    std::int64_t i = b;
    for (; i + N <= e; i += N) {
      bt r = bt::load_unaligned(src + i);  // float -> T lanes (exact)
      for (std::int64_t l = 0; l < L; ++l) {
        const bt& m = mag[static_cast<std::size_t>(l)];
        bt sg = xsimd::select(r > ZERO, ONE, xsimd::select(r < ZERO, MONE, ZERO));
        sg = xsimd::select(xsimd::isnan(r), r, sg);
        bt o = sg * m;
        if (!mase || L == 1) o = mase ? ZERO + o : o + ZERO;  // exact: + 0.0; MASE L = 1: 0 + out
        r = r - o;
        o.store_unaligned(dst + l * n + i);  // T -> float (exact: one rounding, as the reference)
      }
    }
    return i;
  };
  parallel_for(n, kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
    std::int64_t i = mase ? lanes(float{}, b, e) : lanes(double{}, b, e);
    for (; i < e; ++i) qnum::detail::residual_sign_element(means, mase, src[i], dst + i, static_cast<std::size_t>(n));
  });
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

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
