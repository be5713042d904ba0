// Vectorised double-precision exp and erf for the tensor ops (xsimd, any x86-64 level):
// each within 1 ulp of glibc's, and each value depends on its argument only (every argument
// goes through the same lane code). Used where an op calls exp/erf per element (softmax,
// GELU); not bit-identical to the C library's functions (no two libms are), and the same on
// every thread count.
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

/// out[i] = exp(x[i]) for n values (out may be x): exp_lanes for x in [-708, 709], std::exp
/// for the rest (and NaN).
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
    for (std::size_t l = 0; l < m; ++l) out[i + l] = a[l] >= -708.0 && a[l] <= 709.0 ? res_l[l] : std::exp(a[l]);
  }
}

/// fdlibm's erf (s_erf.c) for |v| < 0.84375 on lanes: v + v·P(v²)/Q(v²) (|v| < 2^-28:
/// v + efx·v, as fdlibm). Other lanes get garbage.
[[gnu::always_inline]] inline DoubleBatch erf_small_lanes(const DoubleBatch& v) {
  using B = DoubleBatch;
  const B z = v * v;
  const B r = B(1.28379167095512558561e-01) +
              z * (B(-3.25042107247001499370e-01) +
                   z * (B(-2.84817495755985104766e-02) +
                        z * (B(-5.77027029648944159157e-03) + z * B(-2.37630166566501626084e-05))));
  const B s = B(1.0) + z * (B(3.97917223959155352819e-01) +
                            z * (B(6.50222499887672944485e-02) +
                                 z * (B(5.08130628187576562776e-03) +
                                      z * (B(1.32494738004321644526e-04) + z * B(-3.96022827877536812320e-06)))));
  return xsimd::select(xsimd::abs(v) < B(0x1p-28), v + B(1.28379167095512586316e-01) * v, v + v * (r / s));
}

/// fdlibm's erf for finite |v| >= 0.84375 on lanes, without branches: < 1.25: erx + P(s)/Q(s)
/// with s = |v| - 1; < 6: 1 - exp(-z² - 0.5625)·exp((z - |v|)(z + |v|) + R/S)/|v| (z = |v|
/// with the low 32 bits cleared; R/S in 1/v², coefficient sets split at 1/0.35); beyond: 1;
/// then v's sign.
[[gnu::always_inline]] inline DoubleBatch erf_large_lanes(const DoubleBatch& v) {
  using B = DoubleBatch;
  using I = xsimd::batch<std::int64_t>;
  const B one(1.0), ax = xsimd::abs(v);
  const B t = ax - one;
  const B p = B(-2.36211856075265944077e-03) +
              t * (B(4.14856118683748331666e-01) +
                   t * (B(-3.72207876035701323847e-01) +
                        t * (B(3.18346619901161753674e-01) +
                             t * (B(-1.10894694282396677476e-01) +
                                  t * (B(3.54783043256182359371e-02) + t * B(-2.16637559486879084300e-03))))));
  const B q = one + t * (B(1.06420880400844228286e-01) +
                         t * (B(5.40397917702171048937e-01) +
                              t * (B(7.18286544141962662868e-02) +
                                   t * (B(1.26171219808761642112e-01) +
                                        t * (B(1.36370839120290507362e-02) + t * B(1.19844998467991074170e-02))))));
  const auto mid = ax < B(1.25), tail = ax < B(6.0);
  const B x = xsimd::min(ax, B(6.0));  // lanes >= 6 compute something finite, then take 1
  const B w = one / (x * x);
  const auto near = x < B(2.857142686843872070e+00);  // fdlibm's split: high word 0x4006DB6E
  const B ra = B(-9.86494403484714822705e-03) +
               w * (B(-6.93858572707181764372e-01) +
                    w * (B(-1.05586262253232909814e+01) +
                         w * (B(-6.23753324503260060396e+01) +
                              w * (B(-1.62396669462573470355e+02) +
                                   w * (B(-1.84605092906711035994e+02) +
                                        w * (B(-8.12874355063065934246e+01) + w * B(-9.81432934416914548592e+00)))))));
  const B sa =
      one +
      w * (B(1.96512716674392571292e+01) +
           w * (B(1.37657754143519042600e+02) +
                w * (B(4.34565877475229228821e+02) +
                     w * (B(6.45387271733267880336e+02) +
                          w * (B(4.29008140027567833386e+02) +
                               w * (B(1.08635005541779435134e+02) +
                                    w * (B(6.57024977031928170135e+00) + w * B(-6.04244152148580987438e-02))))))));
  const B rb = B(-9.86494292470009928597e-03) +
               w * (B(-7.99283237680523006574e-01) +
                    w * (B(-1.77579549177547519889e+01) +
                         w * (B(-1.60636384855821916062e+02) +
                              w * (B(-6.37566443368389627722e+02) +
                                   w * (B(-1.02509513161107724954e+03) + w * B(-4.83519191608651397019e+02))))));
  const B sb =
      one + w * (B(3.03380607434824582924e+01) +
                 w * (B(3.25792512996573918826e+02) +
                      w * (B(1.53672958608443695994e+03) +
                           w * (B(3.19985821950859553908e+03) +
                                w * (B(2.55305040643316442583e+03) +
                                     w * (B(4.74528541206955367215e+02) + w * B(-2.24409524465858183362e+01)))))));
  const B rs = xsimd::select(near, ra, rb) / xsimd::select(near, sa, sb);
  const B zh = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<I>(x) & I(static_cast<std::int64_t>(0xFFFFFFFF00000000ull)));
  const B e = exp_lanes(-zh * zh - B(0.5625)) * exp_lanes((zh - x) * (zh + x) + rs);
  const B pos = xsimd::select(mid, B(8.45062911510467529297e-01) + p / q, xsimd::select(tail, one - e / x, one));
  return xsimd::select(v < B(0.0), -pos, pos);
}

/// e[i] = erf(a[i]) for n doubles (e may be a), within 1 ulp of glibc's erf. Every value
/// takes erf_small_lanes; those with |a| >= 0.84375 (or NaN) are then packed and take
/// erf_large_lanes (NaN and infinities: std::erf), so no branch depends on a vector's mix of
/// ranges and each result depends on its argument only, not on its position.
inline void erf_n(const double* a, double* e, std::size_t n) {
  using B = DoubleBatch;
  constexpr std::size_t L = B::size, kChunk = 256;
  // packed: the arguments needing erf_large_lanes, taken while loading (so e may be a);
  // large: their results.
  alignas(64) double pad[L], packed[kChunk + 2 * L], large[kChunk + 2 * L];
  std::uint32_t idx[kChunk];
  for (std::size_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - c0);
    const double* ac = a + c0;
    double* ec = e + c0;
    std::size_t count = 0;
    alignas(64) double flag[L], lanes[L];
    auto collect = [&](const B& v, std::size_t base) {  // the lanes not < 0.84375, and where
      const auto wide = !(xsimd::abs(v) < B(0.84375));
      if (!xsimd::any(wide)) return;
      xsimd::select(wide, B(1.0), B(0.0)).store_aligned(flag);
      v.store_aligned(lanes);
      for (std::size_t l = 0; l < L; ++l) {
        idx[count] = static_cast<std::uint32_t>(base + l);
        packed[count] = lanes[l];
        count += flag[l] != 0.0;
      }
    };
    std::size_t i = 0;
    for (; i + L <= m; i += L) {
      const B v = B::load_unaligned(ac + i);
      collect(v, i);
      erf_small_lanes(v).store_unaligned(ec + i);
    }
    if (i < m) {
      for (std::size_t l = 0; l < L; ++l) pad[l] = i + l < m ? ac[i + l] : 0.0;
      const B v = B::load_aligned(pad);
      collect(v, i);
      erf_small_lanes(v).store_aligned(pad);
      std::copy_n(pad, m - i, ec + i);
    }
    if (count == 0) continue;
    for (std::size_t k = count; k % (2 * L) != 0; ++k) packed[k] = 1.0;
    for (std::size_t k = 0; k < count; k += 2 * L) {  // two independent vectors: their chains overlap
      const B r0 = erf_large_lanes(B::load_aligned(packed + k)), r1 = erf_large_lanes(B::load_aligned(packed + k + L));
      r0.store_aligned(large + k);
      r1.store_aligned(large + k + L);
    }
    for (std::size_t k = 0; k < count; ++k) ec[idx[k]] = std::isfinite(packed[k]) ? large[k] : std::erf(packed[k]);
  }
}

}  // namespace qnum::detail
