// Vectorised double-precision exp for the tensor ops (xsimd, any x86-64 level): within 1 ulp
// of glibc's, and each value depends on its argument only (every argument goes through the
// same lane code). Used where an op calls exp per element in double (softmax); not
// bit-identical to the C library's exp (no two libms are), and the same on every thread
// count. GELU has its own float lanes (tensor/gelu_math.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace qnum::detail {

using DoubleBatch = xsimd::batch<double>;

/// exp on lanes for v in [-708, 709] (callers check the range): k = round(v·log2 e),
/// r = v - k·ln2 (fdlibm's two-part ln2), exp(r) by its Taylor series to r^13 (|r| <= ln2/2:
/// truncation below 2^-60), times 2^k built from the exponent bits.
[[gnu::always_inline]] inline DoubleBatch exp_lanes(const DoubleBatch& v) {
  using B = DoubleBatch;
  using I = xsimd::batch<std::int64_t>;
  const B log2e(1.44269504088896338700e+00), ln2hi(6.93147180369123816490e-01), ln2lo(1.90821492927058770002e-10),
      shifter(0x1.8p52), one(1.0);
  const B kd = v * log2e + shifter;  // k in the low bits of kd, rounded to nearest
  const B k = kd - shifter;
  const B r = (v - k * ln2hi) - k * ln2lo;
  B p(1.0 / 6227020800.0);
  for (const double c : {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                         1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1.0, 1.0})
    p = p * r + B(c);
  return p * xsimd::bitwise_cast<B>((xsimd::bitwise_cast<I>(kd) + I(1023)) << 52);
}

/// out[i] = exp(x[i]) for n values (out may be x): exp_lanes for x in [-708, 709], +0 below
/// -746 (as std::exp), std::exp for the rest (and NaN).
inline void exp_n(const double* x, double* out, std::size_t n) {
  using B = DoubleBatch;
  constexpr std::size_t L = B::size;
  const B lo(-708.0), hi(709.0);
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
    const B res = exp_lanes(v);
    if (m == L && xsimd::all((v >= lo) && (v <= hi))) {
      res.store_unaligned(out + i);
      continue;
    }
    v.store_aligned(a);
    res.store_aligned(res_l);
    for (std::size_t l = 0; l < m; ++l)  // below -746 std::exp is +0 (softmax's masked keys:
      // lowest() - max), without its underflow handling's cost
      out[i + l] = a[l] >= -708.0 && a[l] <= 709.0 ? res_l[l] : a[l] < -746.0 ? 0.0 : std::exp(a[l]);
  }
}

}  // namespace qnum::detail
