// Vectorised double-precision exp and erf for the tensor ops (xsimd, any x86-64 level):
// each within 1 ulp of glibc's, and each value depends on its argument only (every argument
// goes through the same lane code; arguments outside the vector range go to the C library).
// Used where an op calls exp/erf per element (softmax, GELU); not bit-identical to the C
// library's functions (no two libms are), and the same on every thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace qnum::detail {

/// out[i] = exp(x[i]) for n values (out may be x). x in [-708, 709]: k = round(x·log2 e),
/// r = x - k·ln2 (fdlibm's two-part ln2), exp(r) by its Taylor series to r^13 (|r| <= ln2/2:
/// truncation below 2^-60), times 2^k built from the exponent bits; other x (and NaN): std::exp.
inline void exp_n(const double* x, double* out, std::size_t n) {
  using B = xsimd::batch<double>;
  using I = xsimd::batch<std::int64_t>;
  constexpr std::size_t L = B::size;
  const B log2e(1.44269504088896338700e+00), ln2hi(6.93147180369123816490e-01), ln2lo(1.90821492927058770002e-10),
      lo(-708.0), hi(709.0), shifter(0x1.8p52), one(1.0);
  const B c2(1.0 / 2), c3(1.0 / 6), c4(1.0 / 24), c5(1.0 / 120), c6(1.0 / 720), c7(1.0 / 5040), c8(1.0 / 40320),
      c9(1.0 / 362880), c10(1.0 / 3628800), c11(1.0 / 39916800), c12(1.0 / 479001600), c13(1.0 / 6227020800.0);
  alignas(64) double a[L], res_l[L];
  for (std::size_t i = 0; i < n; i += L) {
    const std::size_t m = std::min(L, n - i);
    B v;
    if (m == L) {
      v = B::load_unaligned(x + i);
    } else {
      for (std::size_t l = 0; l < L; ++l) a[l] = l < m ? x[i + l] : 0.0;
      v = B::load_aligned(a);
    }
    const B kd = v * log2e + shifter;  // k in the low bits of kd, rounded to nearest
    const B k = kd - shifter;
    const B r = (v - k * ln2hi) - k * ln2lo;
    B p = c13;
    for (const B& c : {c12, c11, c10, c9, c8, c7, c6, c5, c4, c3, c2, one, one}) p = p * r + c;
    const B res = p * xsimd::bitwise_cast<B>((xsimd::bitwise_cast<I>(kd) + I(1023)) << 52);
    if (m == L && xsimd::all((v >= lo) && (v <= hi))) {
      res.store_unaligned(out + i);
      continue;
    }
    v.store_aligned(a);
    res.store_aligned(res_l);
    for (std::size_t l = 0; l < m; ++l) out[i + l] = a[l] >= -708.0 && a[l] <= 709.0 ? res_l[l] : std::exp(a[l]);
  }
}

/// e[i] = erf(x[i]·c) for n values (x float, the product and erf in double). Arguments with
/// |x·c| in [2^-28, 0.84375) — nearly all GELU inputs — take fdlibm's rational approximation
/// of that range (erf(a) = a + a·P(a²)/Q(a²), error below 1 ulp of double) on SIMD lanes; the
/// rest go to std::erf. Every value goes through the same lane code (the tail is padded), so
/// erf_n's result depends on the argument only, not on its position.
inline void erf_n(const float* x, double c, double* e, std::size_t n) {
  using B = xsimd::batch<double>;
  constexpr std::size_t L = B::size;
  const B pp0(1.28379167095512558561e-01), pp1(-3.25042107247001499370e-01), pp2(-2.84817495755985104766e-02),
      pp3(-5.77027029648944159157e-03), pp4(-2.37630166566501626084e-05), qq1(3.97917223959155352819e-01),
      qq2(6.50222499887672944485e-02), qq3(5.08130628187576562776e-03), qq4(1.32494738004321644526e-04),
      qq5(-3.96022827877536812320e-06), one(1.0), lo(0x1p-28), hi(0.84375);
  alignas(64) double a[L];
  for (std::size_t i = 0; i < n; i += L) {
    const std::size_t m = std::min(L, n - i);
    if (m == L)
      for (std::size_t l = 0; l < L; ++l) a[l] = static_cast<double>(x[i + l]) * c;
    else
      for (std::size_t l = 0; l < L; ++l) a[l] = l < m ? static_cast<double>(x[i + l]) * c : 0.25;
    const B v = B::load_aligned(a), z = v * v;
    const B r = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)));
    const B q = one + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))));
    const B ax = xsimd::abs(v), res = v + v * (r / q);
    if (m == L && xsimd::all((ax >= lo) && (ax < hi))) {
      res.store_unaligned(e + i);
      continue;
    }
    alignas(64) double out[L];
    res.store_aligned(out);
    for (std::size_t l = 0; l < m; ++l)
      e[i + l] = std::abs(a[l]) >= 0x1p-28 && std::abs(a[l]) < 0.84375 ? out[l] : std::erf(a[l]);
  }
}

}  // namespace qnum::detail
