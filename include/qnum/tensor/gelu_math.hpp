// GELU, x/2 (1 + erf(x/sqrt 2)), and its derivative on float lanes (xsimd): the forward of
// qnum::gelu and the factor its backward multiplies by.
//
// Numerics (tests/kernel/test_gelu_math.cpp sweeps every range against a double reference):
// - |x| < 1: y = h + h·x·Q(x²), h = x/2, Q a degree-6 fit of erf(x/sqrt 2)/x, x·Q carried
//   as an exact two-float product: at most ~2 ulp (1 + x·Q falls to 0.32 at x = -1).
// - 1 <= |x| < 16: erfc(|x|/sqrt 2) = exp(-x²/2)·g(|x|), g = erfcx(·/sqrt 2) by degree-6
//   polynomials on 16 quarter-binade intervals (coefficients by register permutes:
//   tensor/gelu_tables.hpp), and exp(-x²/2) from x² split exactly into hi + lo (so the
//   exponent's rounding is not amplified by up to 128×); x < 0: y = h·g·exp(-x²/2), relative
//   error at most ~3 ulp, gradual underflow rounded once (x < -13.2); x > 0:
//   y = x - h·g·exp(-x²/2), at most ~1.5 ulp.
// - |x| >= 16: x (x > 0) or -0 (the true value is below half the smallest subnormal);
//   +inf -> +inf; -inf and NaN -> NaN (as x/2 (1 + erf(x/sqrt 2)) evaluates them).
// This is more accurate than evaluating 1 + erf(x/sqrt 2) in float or double for x < 0, where
// 1 + erf cancels (PyTorch's vectorised CPU GELU uses a 1.5e-7 absolute-error erf there).
// The derivative, Φ(x) + x·φ(x), reuses the same pieces (relative error ~1e-6: it is a
// gradient). Each value depends on its argument only: results do not depend on positions,
// chunking or thread counts. Targets without FMA form the exact products by Veltkamp–Dekker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "qnum/kernel/softmax.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/tensor/gelu_tables.hpp"

namespace qnum::detail {

/// table[idx] for idx in [0, 16) (the 16-entry tail tables).
[[gnu::always_inline]] inline FloatBatch gelu_lookup(const float* table, const IntBatch& idx) {
#if defined(__AVX512F__)
  if constexpr (FloatBatch::size == 16) return _mm512_permutexvar_ps(static_cast<__m512i>(idx), _mm512_load_ps(table));
#elif defined(__AVX2__)
  // Two 8-entry permutes and a blend on index bit 3 (a gather of 8 lanes measured 4x slower).
  if constexpr (FloatBatch::size == 8) {
    const __m256i i = static_cast<__m256i>(idx);
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_load_ps(table), i),
                            _mm256_permutevar8x32_ps(_mm256_load_ps(table + 8), i),
                            _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
  }
#endif
  alignas(64) std::int32_t i[kFloatLanes];
  alignas(64) float v[kFloatLanes];
  idx.store_aligned(i);
  for (std::int64_t l = 0; l < kFloatLanes; ++l) v[l] = table[i[l]];
  return FloatBatch::load_aligned(v);
}

/// a·b as hi + lo exactly (no overflow or underflow in the parts: |a|, |b| < 2^60 here).
[[gnu::always_inline]] inline void two_product(const FloatBatch& a, const FloatBatch& b, FloatBatch& hi,
                                               FloatBatch& lo) {
  hi = a * b;
#if defined(__FMA__) || defined(__AVX512F__)
  lo = fmadd(a, b, -hi);
#else
  const FloatBatch k(4097.0f);  // Veltkamp splits into 12-bit halves, then Dekker's product
  const FloatBatch ca = a * k, cb = b * k;
  const FloatBatch ah = ca - (ca - a), al = a - ah, bh = cb - (cb - b), bl = b - bh;
  lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl;
#endif
}

/// y = GELU(x) and, when dydx is given, *dydx = GELU'(x) (see the file comment).
[[gnu::always_inline]] inline FloatBatch gelu_lanes(const FloatBatch& x, FloatBatch* dydx) {
  using B = FloatBatch;
  using I = IntBatch;
  namespace t = gelu_tables;
  const B ax = xsimd::abs(x), h = B(0.5f) * x;
  const auto in_range = ax < B(16.0f);  // false for NaN
  const B xe = xsimd::select(in_range, x, B(0.0f));
  B u, u_lo;
  two_product(xe, xe, u, u_lo);
  // Central: Q(u) (its constant term in two parts: one rounding at the end), t = x·Q as
  // t + t_lo exactly, y = (h + h·t) + h·t_lo with x's sign bit (y has x's sign; -0 stays -0;
  // t_lo matters: 1 + t falls to 0.32 at x = -1) and Φ = 1/2 + h·Q.
  B q(t::q[6]);
  for (int i = 5; i >= 1; --i) q = fmadd(q, u, B(t::q[i]));
  q = fmadd(q, u, B(t::q0_lo)) + B(t::q0_hi);
  B xq, xq_lo;
  two_product(xe, q, xq, xq_lo);
  const B y_central = (fmadd(h, xq, h) + h * xq_lo) | xsimd::bitofsign(x);
  const auto central = ax < B(1.0f);
  const bool any_tail = !xsimd::all(central);
  if (!any_tail && dydx == nullptr) return y_central;

  // exp(-x²/2) = pe·2^k: exp_batch's reduction of -u/2 minus lo/2, then its polynomial; 2^k
  // as two normal factors,
  // so a subnormal product is rounded once (k >= -185 for |x| < 16).
  const auto fma = [](const B& a, const B& b, const B& c) { return fmadd(a, b, c); };
  B k;
  const B r = fmadd(B(-0.5f), u_lo, exp_reduce(B(-0.5f) * u, k, fma));
  const B pe = exp_reduced(r, fma);
  const I ki = xsimd::to_int(k), k1 = ki >> 1, k2 = ki - k1;
  const B s1 = xsimd::bitwise_cast<B>((k1 + I(127)) << 23), s2 = xsimd::bitwise_cast<B>((k2 + I(127)) << 23);
  const B ex = (pe * s1) * s2;  // exp(-x²/2)

  const B c_phi(0.398942280401432678f);  // 1/sqrt(2π)
  const B big_y = xsimd::select(x > B(0.0f), x, B(-0.0f));
  const B nan(std::numeric_limits<float>::quiet_NaN());
  const auto bad = xsimd::isnan(x) || (x == B(-std::numeric_limits<float>::infinity()));
  B y = y_central, d;
  if (dydx) d = fmadd(x * c_phi, ex, fmadd(h, q, B(0.5f)));  // Φ + x·φ
  if (any_tail) {
    const B xt = xsimd::select(!central && in_range, ax, B(1.0f));
    const I idx = (xsimd::bitwise_cast<I>(xt) >> 21) - I(508);
    const B s = xt - gelu_lookup(t::mid, idx);
    B gq = gelu_lookup(t::c6, idx);
    gq = fmadd(gq, s, gelu_lookup(t::c5, idx));
    gq = fmadd(gq, s, gelu_lookup(t::c4, idx));
    gq = fmadd(gq, s, gelu_lookup(t::c3, idx));
    gq = fmadd(gq, s, gelu_lookup(t::c2, idx));
    gq = fmadd(gq, s, gelu_lookup(t::c1, idx));
    const B g = fmadd(gq, s, gelu_lookup(t::c0_lo, idx)) + gelu_lookup(t::c0_hi, idx);
    const auto neg = x < B(0.0f);
    const B y_neg = (((h * g) * pe) * s1) * s2;  // h·erfc(|x|/sqrt 2)
    const B e = ex * g;                          // erfc(x/sqrt 2)
    const B y_pos = fmadd(-h, e, x);
    y = xsimd::select(central, y, xsimd::select(neg, y_neg, y_pos));
    if (dydx) {
      const B d_neg = ((pe * fmadd(x, c_phi, B(0.5f) * g)) * s1) * s2;
      const B d_pos = fmadd(x * c_phi, ex, fmadd(B(-0.5f), e, B(1.0f)));
      d = xsimd::select(central, d, xsimd::select(neg, d_neg, d_pos));
    }
  }
  y = xsimd::select(bad, nan, xsimd::select(in_range, y, big_y));
  if (dydx) *dydx = xsimd::select(bad, nan, xsimd::select(in_range, d, xsimd::select(x > B(0.0f), B(1.0f), B(0.0f))));
  return y;
}

/// y[i] = GELU(x[i]) for n values and, when dydx is not null, dydx[i] = GELU'(x[i]); y may be
/// x. Split across threads in chunks (each value depends on its argument only).
inline void gelu_n(const float* x, float* y, float* dydx, std::int64_t n) {
  auto run = [=]<bool kGrad>(std::int64_t b, std::int64_t e) {
    std::int64_t i = b;
    FloatBatch d;
    for (; i + kFloatLanes <= e; i += kFloatLanes) {
      const FloatBatch r = gelu_lanes(FloatBatch::load_unaligned(x + i), kGrad ? &d : nullptr);
      r.store_unaligned(y + i);
      if constexpr (kGrad) d.store_unaligned(dydx + i);
    }
    if (i < e) {
      const FloatBatch r = gelu_lanes(load_partial(x + i, e - i, 0.0f), kGrad ? &d : nullptr);
      store_partial(y + i, e - i, r);
      if constexpr (kGrad) store_partial(dydx + i, e - i, d);
    }
  };
  parallel_for(n, 16384, [&](std::int64_t b, std::int64_t e) {
    if (dydx)
      run.template operator()<true>(b, e);
    else
      run.template operator()<false>(b, e);
  });
}

}  // namespace qnum::detail
