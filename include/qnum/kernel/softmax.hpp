// Softmax and log-softmax over the last axis of a row-major [rows, cols] float buffer,
// vectorised with xsimd (the widest instruction set the translation unit is compiled for),
// rows split across threads with qnum::parallel_for.
//
// Numerics
// - Stable form: each row is shifted by its maximum before exponentiation.
// - exp is qnum::detail::exp_batch below (Cephes-style range reduction and a degree-6
//   polynomial, one rounding for the 2^n scaling). Against the correctly rounded exp over
//   [-104, 89] it is within 1 ulp on a dense sample of every binade (10.6M inputs, with and
//   without FMA; tests/kernel/test_attention.cpp asserts <= 2 ulp). Subnormal results are
//   gradual; exp(x) == 0 for x < -103.98 and -inf, inf for x > 88.72, NaN for NaN.
// - softmax: out = exp(x - max) * (1 / sum). Relative error of each output (tested) at most
//   4.8e-7 (a few ulp) + 6e-8 * |x - max| (the rounding of the input difference, amplified
//   by exp; inherent to float inputs) + 6e-8 * cols / 16 (the row sum, one float
//   accumulator per SIMD lane); a row sums to 1 within cols * 6e-8.
// - A row whose entries are all -inf (a fully masked row) gives all zeros from softmax and
//   all -inf from log_softmax (log of a zero weight), never NaN. A row holding NaN or +inf
//   gives NaN.
// - Results do not depend on the thread count: each row is computed by one thread, in a
//   fixed order.
// In-place use (in == out) is allowed; otherwise the buffers must not overlap.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "qnum/core/error.hpp"
#include "qnum/kernel/fmadd.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum {

namespace detail {

using IntBatch = xsimd::batch<std::int32_t>;
inline constexpr std::int64_t kFloatLanes = static_cast<std::int64_t>(FloatBatch::size);

/// exp's range reduction: n = round(x·log2 e) and r = x - n·ln2 in two steps (0.693359375
/// has 10 significant bits, so n·C1 is exact). `fma` is the caller's fused multiply-add, so
/// each caller keeps its own bits (exp_batch: xsimd::fma; GELU: fmadd).
template <class B, class Fma>
[[gnu::always_inline]] inline B exp_reduce(const B& x, B& n, Fma fma) {
  n = xsimd::nearbyint(x * B(1.44269504088896341f));
  return fma(n, B(2.12194440e-4f), fma(n, B(-0.693359375f), x));
}

/// exp(r) for a reduced r (|r| <= ln2/2 and a little): Cephes' 1 + r + r²·P(r), P of degree 5.
template <class B, class Fma>
[[gnu::always_inline]] inline B exp_reduced(const B& r, Fma fma) {
  B p(1.9875691500e-4f);
#pragma GCC unroll 8
  for (const float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = fma(p, r, B(c));
  return fma(p, r * r, r) + B(1.0f);
}

/// Vectorised exp(x) for float lanes (see the header comment for its accuracy).
template <class B>
[[gnu::always_inline]] inline B exp_batch(const B& x) {
  using I = xsimd::batch<std::int32_t, typename B::arch_type>;
  const auto fma = [](const B& a, const B& b, const B& c) { return xsimd::fma(a, b, c); };
  const B xc = xsimd::min(xsimd::max(x, B(-104.0f)), B(89.0f));
  B n;
  const B y = exp_reduced(exp_reduce(xc, n, fma), fma);
  // 2^n as two factors so that subnormal results are rounded once and n = 128 overflows.
  const I ni = xsimd::to_int(n);
  const I n1 = ni >> 1;
  const I n2 = ni - n1;
  const B s1 = xsimd::bitwise_cast<B>((n1 + I(127)) << 23);
  const B s2 = xsimd::bitwise_cast<B>((n2 + I(127)) << 23);
  return xsimd::select(xsimd::isnan(x), x, (y * s1) * s2);
}

/// exp(x) for x <= 0 or -inf (shifted scores, as in the online softmax of attention): the
/// same reduction and polynomial as exp_batch, but AVX-512 scales by 2^n with one vscalefps
/// (one rounding, gradual underflow) and skips the overflow and NaN handling that x <= 0
/// does not need: ~14 instead of ~25 vector instructions. Below -104 the result is 0 (the
/// true value is under half the smallest subnormal). Other targets use exp_batch.
[[gnu::always_inline]] inline FloatBatch exp_nonpositive(const FloatBatch& x) {
#if defined(__AVX512F__)
  if constexpr (FloatBatch::size == 16) {
    const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-110.0f));
    // n = round(x·log2 e) by the 1.5·2^23 shifter (two FMA-port ops; vrndscaleps is 2 uops on port 0).
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
  }
#endif
  return exp_batch(x);
}

/// exp_batch for one value (same result as the lane computation).
inline float exp_scalar(float x) {
  alignas(64) float buf[kFloatLanes];
  exp_batch(FloatBatch(x)).store_aligned(buf);
  return buf[0];
}

/// Loads n < lanes floats, filling the rest with `fill`.
inline FloatBatch load_partial(const float* p, std::int64_t n, float fill) {
  alignas(64) float buf[kFloatLanes];
  for (std::int64_t i = 0; i < kFloatLanes; ++i) buf[i] = i < n ? p[i] : fill;
  return FloatBatch::load_aligned(buf);
}

/// Stores the first n < lanes lanes.
inline void store_partial(float* p, std::int64_t n, const FloatBatch& v) {
  alignas(64) float buf[kFloatLanes];
  v.store_aligned(buf);
  for (std::int64_t i = 0; i < n; ++i) p[i] = buf[i];
}

/// Horizontal maximum (max is exact, so the order does not matter).
inline float hmax(const FloatBatch& v) {
#if defined(__AVX512F__)
  // xsimd 8.1 has no horizontal max; AVX-512 has a sequence for it.
  if constexpr (std::is_same_v<FloatBatch::arch_type, xsimd::avx512f> ||
                std::is_same_v<FloatBatch::arch_type, xsimd::avx512cd> ||
                std::is_same_v<FloatBatch::arch_type, xsimd::avx512dq> ||
                std::is_same_v<FloatBatch::arch_type, xsimd::avx512bw>)
    return _mm512_reduce_max_ps(v);
#endif
  alignas(64) float buf[kFloatLanes];
  v.store_aligned(buf);
  float m = buf[0];
  for (std::int64_t i = 1; i < kFloatLanes; ++i) m = std::max(m, buf[i]);
  return m;
}

inline float row_max(const float* in, std::int64_t n) {
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  FloatBatch m(ninf);
  std::int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes) m = xsimd::max(m, FloatBatch::load_unaligned(in + i));
  if (i < n) m = xsimd::max(m, load_partial(in + i, n - i, ninf));
  return hmax(m);
}

/// Writes exp(in - mx) to out (when out != nullptr) and returns the sum.
inline float exp_shift_sum(const float* in, float* out, std::int64_t n, float mx) {
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const FloatBatch vm(mx);
  FloatBatch s(0.0f);
  std::int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes) {
    const FloatBatch e = exp_batch(FloatBatch::load_unaligned(in + i) - vm);
    if (out) e.store_unaligned(out + i);
    s += e;
  }
  if (i < n) {
    const FloatBatch e = exp_batch(load_partial(in + i, n - i, ninf) - vm);
    if (out) store_partial(out + i, n - i, e);
    s += e;
  }
  return xsimd::hadd(s);
}

inline void softmax_row(const float* in, float* out, std::int64_t n) {
  const float mx = row_max(in, n);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  const float sum = exp_shift_sum(in, out, n, mx);
  const FloatBatch inv(1.0f / sum);
  std::int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes) (FloatBatch::load_unaligned(out + i) * inv).store_unaligned(out + i);
  for (; i < n; ++i) out[i] *= 1.0f / sum;
}

inline void log_softmax_row(const float* in, float* out, std::int64_t n) {
  const float mx = row_max(in, n);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(out, out + n, mx);
    return;
  }
  const float sum = exp_shift_sum(in, nullptr, n, mx);
  const FloatBatch vm(mx), vl(static_cast<float>(std::log(static_cast<double>(sum))));
  std::int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes)
    ((FloatBatch::load_unaligned(in + i) - vm) - vl).store_unaligned(out + i);
  const float l = static_cast<float>(std::log(static_cast<double>(sum)));
  for (; i < n; ++i) out[i] = (in[i] - mx) - l;
}

inline void check_rows(const char* what, std::int64_t rows, std::int64_t cols, const void* in, const void* out) {
  require(rows >= 1 && cols >= 1, what, ": rows ", rows, " and cols ", cols, " must be >= 1");
  require(in != nullptr && out != nullptr, what, ": null buffer");
}

template <class RowFn>
void for_rows(const float* in, float* out, std::int64_t rows, std::int64_t cols, RowFn fn) {
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / cols);
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) fn(in + r * cols, out + r * cols, cols);
  });
}

}  // namespace detail

/// Softmax over the last axis of row-major [rows, cols]; in == out allowed.
inline void softmax(const float* in, float* out, std::int64_t rows, std::int64_t cols) {
  detail::check_rows("softmax", rows, cols, in, out);
  detail::for_rows(in, out, rows, cols, detail::softmax_row);
}

/// log_softmax over the last axis of row-major [rows, cols]; in == out allowed.
inline void log_softmax(const float* in, float* out, std::int64_t rows, std::int64_t cols) {
  detail::check_rows("log_softmax", rows, cols, in, out);
  detail::for_rows(in, out, rows, cols, detail::log_softmax_row);
}

/// Span forms: both spans must hold rows * cols values.
inline void softmax(std::span<const float> in, std::span<float> out, std::int64_t rows, std::int64_t cols) {
  detail::check_rows("softmax", rows, cols, in.data(), out.data());
  detail::require(
      static_cast<std::int64_t>(in.size()) == rows * cols && static_cast<std::int64_t>(out.size()) == rows * cols,
      "softmax: input has ", in.size(), " and output ", out.size(), " values, expected rows*cols = ", rows * cols);
  softmax(in.data(), out.data(), rows, cols);
}

inline void log_softmax(std::span<const float> in, std::span<float> out, std::int64_t rows, std::int64_t cols) {
  detail::check_rows("log_softmax", rows, cols, in.data(), out.data());
  detail::require(
      static_cast<std::int64_t>(in.size()) == rows * cols && static_cast<std::int64_t>(out.size()) == rows * cols,
      "log_softmax: input has ", in.size(), " and output ", out.size(), " values, expected rows*cols = ", rows * cols);
  log_softmax(in.data(), out.data(), rows, cols);
}

}  // namespace qnum
