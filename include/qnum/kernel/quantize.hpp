// SIMD tensor quantize: `qnum::kernel::quantize(format, in, out, shape, role)` gives the same
// bits as the scalar reference `Format::quantize` for every family and policy, faster.
//
// What runs where (see quantize_path):
//  - simd: the elementwise families below, in xsimd loops over the architecture tag `Arch`,
//    split across threads by parallel_for (chunks depend only on the size, so results never
//    depend on the thread count); vector tails go through the scalar reference.
//      integer        exact: nearest_even, nearest_away (any F); floor/ceil/toward_zero (F >= 0);
//                     saturate.  mase: nearest_even and floor.
//      minifloat_ieee exact: nearest_even, saturate or infinity, keep or flush, every
//                     `specials` (OCP E4M3/E5M2 included), smallest normal >= 2^-126.
//                     mase: bias <= 126.
//      minifloat_denorm  as minifloat_ieee (exact needs >= 1 mantissa bit).
//      log            exact: nearest_even / nearest_away, bias <= 126.  mase: bias <= 126.
//      binary         bipolar deterministic (both semantics).
//      block_fp       exact, nearest_even, 1-D blocks along the last axis (quantize_block.hpp).
//      mxint, mxfp    exact (OCP), nearest_even, blocks along the last axis, no quantile_search.
//      block_fp       mase: every MASE tile (1-D bias, 2-D weight/activation, 3-D activation).
//      mxint, mxfp    mase: blocks along the last axis, no quantile_search (mxfp: MASE's
//                     element codec in integer lanes; blocks with Inf/NaN take the reference).
//  - scalar: the same elementwise families under a policy the vector code does not cover
//    (stochastic and other directed roundings, wrap, extreme biases), and binarize: the scalar
//    reference per element, keyed by the flat index, still split across threads.
//    block_minifloat and block_log (both bundles, every layout, quantize_tiles.hpp): the
//    reference's per-block code, threaded over blocks; exact mode with blocks inside one row
//    and nearest rounding runs in vector registers instead (simd).
//  - quantize_rows.hpp: scale_integer (mase and exact nearest-even: simd, double lanes for exact;
//    other roundings: scalar element, threaded) and
//    ternary (exact: simd; mase: per-sample reference, threaded).
//    mase mxfp with another block_dim or quantile search: MASE's codec per block, threaded.
//    residual_sign: the reference's element in double (exact) or float (mase) lanes, threaded.
//  - reference: every other family or setting (mxint quantile search, exact 2-D block_fp/MX
//    tiles, stochastic or scaled binary, in-place mase mxfp quantile search):
//    `Format::quantize` itself, single-threaded.
//
// How float32 reproduces the double-precision exact reference:
//  - integer: x * 2^F is exact in float unless it overflows (then it saturates either way)
//    or underflows below 2^-126 (|v| < 1/2: rounds to 0 under nearest modes; directed modes
//    need F >= 0, where no underflow happens); clamp bounds float(kmin/kmax) give the same
//    output as the reference's exact bounds rounded once (shown in the code).
//  - minifloat grids: round-to-nearest-even on the float's bits (add half-1+lsb, mask), which
//    carries into the next binade like hardware FP8 conversion; below the smallest normal a
//    magic constant C = 2^(emin - P + 24) makes float addition round onto the subnormal step.
//  - log: the log-domain midpoint test r*r >= 2 is a mantissa threshold (r >= sqrt 2).
// mase mode needs floor/ceil/round of float32 log2(w); that is ilog2(w) or one more, decided
// by comparing w's bits with a per-binade threshold found once by bisection over the same
// scalar log2 the reference uses (exact, since log2 is monotone). Those thresholds' mantissas
// lie in a sliver a few dozen units wide, so one compare decides every lane outside it; a
// vector with a lane inside looks the thresholds up per lane (log2_exponent).
//
// Dispatch: `quantize` uses xsimd::default_arch, the widest instruction set the translation
// unit is compiled for (QNUM_NATIVE=ON: -march=native); `quantize_arch<Arch>` runs any
// compiled-in architecture explicitly (the tests run each). Run-time selection (a portable
// binary that uses AVX2 / AVX-512 where the CPU has them) is kernel::dispatch in
// dispatch.hpp, from the compiled library qnum::kernels, which builds this header once per
// instruction set under its own QNUM_KERNEL_ISA_NS (see src/kernel/isa_kernels.inc).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on xsimd's AVX-512 intrinsics
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/kernel/log2_thresholds.hpp"
#include "qnum/kernel/quantize_path.hpp"
#include "qnum/kernel/threading.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// Everything below lives in an inline namespace named after the instruction set it is
// compiled for: `native` here (the translation unit's own flags); the run-time dispatch
// library compiles this header once per ISA under another name (src/kernel/), so the
// per-ISA copies of every function, template or not, are distinct symbols.
#ifndef QNUM_KERNEL_ISA_NS
#define QNUM_KERNEL_ISA_NS native
#endif

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {

namespace detail {

using qnum::detail::bits_float;
using qnum::detail::float_bits;

/// Elements per parallel chunk: fixed, so chunk boundaries never depend on the thread count.
inline constexpr std::int64_t kQuantizeGrain = 1 << 16;

// ---- exact log2 decisions for mase mode (kernel/log2_thresholds.hpp) ---------------------

using qnum::detail::log2_op;
using qnum::detail::log2_op_scalar;
using qnum::detail::log2_thresholds;
using qnum::detail::Log2Op;
using qnum::detail::Log2Thresholds;

/// The smallest float32 mantissa field m with (1 + m 2^-23)^2 >= 2 (in double, exact).
inline constexpr std::int32_t kSqrt2Mantissa = [] {
  std::int32_t lo = 0, hi = 1 << 23;
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    const double r = 1.0 + mid / 8388608.0;
    if (r * r >= 2.0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}();

// ---- small SIMD helpers -----------------------------------------------------------------

template <class A>
using bf = xsimd::batch<float, A>;
template <class A>
using bi = xsimd::batch<std::int32_t, A>;

template <class A>
inline bi<A> as_int(const bf<A>& x) {
  return xsimd::bitwise_cast<bi<A>>(x);
}
template <class A>
inline bf<A> as_float(const bi<A>& x) {
  return xsimd::bitwise_cast<bf<A>>(x);
}
/// Integer select. On AVX-512 it calls the 32-bit blend directly: xsimd 8.1's avx512bw
/// integer select also instantiates the 8/16-bit blends, which do not compile at -O0.
template <class A>
inline bi<A> select_i(const xsimd::batch_bool<std::int32_t, A>& m, const bi<A>& a, const bi<A>& b) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>)
    return bi<A>(_mm512_mask_blend_epi32(static_cast<__mmask16>(m), static_cast<__m512i>(b), static_cast<__m512i>(a)));
  else
#endif
    return xsimd::select(m, a, b);
}
/// float mask -> int mask (through values, valid on every architecture).
template <class A>
inline xsimd::batch_bool<std::int32_t, A> to_imask(const xsimd::batch_bool<float, A>& m) {
  return as_int<A>(xsimd::select(m, bf<A>(1.0f), bf<A>(0.0f))) != bi<A>(0);
}
/// int mask -> float mask.
template <class A>
inline xsimd::batch_bool<float, A> to_fmask(const xsimd::batch_bool<std::int32_t, A>& m) {
  return as_float<A>(select_i<A>(m, bi<A>(0x3f800000), bi<A>(0))) > bf<A>(0.5f);
}
template <class A>
inline bi<A> clamp_i(const bi<A>& v, std::int32_t lo, std::int32_t hi) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>)
    return bi<A>(
        _mm512_min_epi32(_mm512_max_epi32(static_cast<__m512i>(v), _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi)));
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, A>)
    return bi<A>(
        _mm256_min_epi32(_mm256_max_epi32(static_cast<__m256i>(v), _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi)));
#endif
  bi<A> r = select_i<A>(v < bi<A>(lo), bi<A>(lo), v);
  return select_i<A>(r > bi<A>(hi), bi<A>(hi), r);
}
/// torch.clamp: NaN passes through.
template <class A>
inline bf<A> clamp_t(const bf<A>& v, float lo, float hi) {
  bf<A> r = xsimd::select(v < bf<A>(lo), bf<A>(lo), v);
  return xsimd::select(r > bf<A>(hi), bf<A>(hi), r);
}
/// torch.sign: (v > 0) - (v < 0), 0 for NaN.
template <class A>
inline bf<A> sign_t(const bf<A>& v) {
  return xsimd::select(v > bf<A>(0.0f), bf<A>(1.0f), bf<A>(0.0f)) -
         xsimd::select(v < bf<A>(0.0f), bf<A>(1.0f), bf<A>(0.0f));
}
/// x << c per lane, 0 where c is outside [0, 31] (the variable shifts' own rule on AVX2/AVX-512).
template <class A>
inline bi<A> shift_left_var(const bi<A>& x, const bi<A>& c) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>)
    return bi<A>(_mm512_sllv_epi32(static_cast<__m512i>(x), static_cast<__m512i>(c)));
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, A> && bi<A>::size == 8)
    return bi<A>(_mm256_sllv_epi32(static_cast<__m256i>(x), static_cast<__m256i>(c)));
#endif
  alignas(64) std::int32_t xs[bi<A>::size], cs[bi<A>::size];
  x.store_aligned(xs);
  c.store_aligned(cs);
  for (std::size_t i = 0; i < bi<A>::size; ++i)
    xs[i] = cs[i] < 0 || cs[i] > 31 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(xs[i]) << cs[i]);
  return bi<A>::load_aligned(xs);
}
/// The bits of 2^e for any integer e <= 127 as float32 rounds it: normal for e >= -126,
/// subnormal 1 << (e + 149) down to 2^-149, +0 below (2^-150 is a tie and rounds to even).
/// Integer only: a float product with a subnormal result costs a microcode assist per vector.
template <class A>
inline bi<A> pow2_wide_bits_i(const bi<A>& e) {
  return select_i<A>(e >= bi<A>(-126), (e + bi<A>(127)) << 23, shift_left_var<A>(bi<A>(1), e + bi<A>(149)));
}
/// sign_t(t) · 2^e for any integer e <= 127 (pow2_wide_bits_i) from the bits: 2^e with t's
/// sign bit (so -0 where t < 0 and 2^e rounds to 0), +0 where t is ±0 — the same values as
/// the product, in fewer operations. NaN lanes are unspecified (the product is +0 there):
/// every caller replaces them by the NaN input.
template <class A>
inline bf<A> signed_pow2_wide_i(const bf<A>& t, const bi<A>& e) {
  const bf<A> p = as_float<A>(pow2_wide_bits_i<A>(e) | (as_int<A>(t) & bi<A>(static_cast<std::int32_t>(0x80000000u))));
  return xsimd::select(t != bf<A>(0.0f), p, bf<A>(0.0f));
}

/// table[idx] per lane (idx in [0, 256)).
template <class A>
inline bi<A> gather_i32(const std::int32_t* table, const bi<A>& idx) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    return bi<A>(_mm512_i32gather_epi32(static_cast<__m512i>(idx), table, 4));
  } else
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
      if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    return bi<A>(_mm256_i32gather_epi32(table, static_cast<__m256i>(idx), 4));
  } else
#endif
  {
    alignas(64) std::int32_t lanes[bi<A>::size];
    idx.store_aligned(lanes);
    for (auto& l : lanes) l = table[l];
    return bi<A>::load_aligned(lanes);
  }
}

/// The thresholds a kernel needs: the full table, and (when the clamp range [lo, hi] spans at
/// most 30 binades) the 32 entries from field lo + 126 on, which AVX-512 looks up with one
/// two-register permute (AVX2: four permutes and two blends) instead of a gather. Fields outside that window are
/// clamped to its ends: their exponent is clamped to lo or hi whatever the threshold says.
struct Log2Lookup {
  const Log2Thresholds* t = nullptr;
  std::int32_t lo = 0, hi = 0, f0 = 0;
  /// 32-entry tables the window needs: the fields that can give an unclamped result are
  /// f0 .. hi + 127 (hi - lo + 2 of them); fields outside clamp to lo or hi whatever the
  /// threshold, so an index clamped into the window gives the same result.
  std::int32_t tables = 0;
  bool small = false;  // one table: hi - lo <= 30
  /// The thresholds' mantissas over the fields that decide a result (k in [lo, hi - 1]) lie
  /// in [m_lo, m_hi] (a field without a threshold counts as 2^23): a mantissa >= m_hi is
  /// "up" and one < m_lo is not, whatever its field. log2's rounding spreads them over a few
  /// dozen units (log W8, round: 31 of 2^23), so only inputs in that sliver need the lookup.
  std::int32_t m_lo = 0, m_hi = 0;
  /// lo + 127 and hi + 127: log2_exponent_field's clamp, kept here so that a kernel whose
  /// lookup changes per block (block_log's bias) broadcasts them from memory.
  std::int32_t field_lo = 0, field_hi = 0;
  alignas(64) std::array<std::int32_t, 256> window{};

  Log2Lookup() = default;
  Log2Lookup(Log2Op op, std::int32_t lo_, std::int32_t hi_)
      : t(&log2_thresholds(op)),
        lo(lo_),
        hi(hi_),
        f0(lo_ + 126),
        tables((hi_ - lo_ + 2 + 31) / 32),
        small(hi_ - lo_ <= 30),
        field_lo(lo_ + 127),
        field_hi(hi_ + 127) {
    for (std::int32_t i = 0; i < 32 * std::min(tables, 8); ++i) {
      const std::int32_t f = std::clamp(f0 + i, 0, 255);
      window[static_cast<std::size_t>(i)] = t->t[static_cast<std::size_t>(f)];
    }
    m_lo = 1 << 23;
    m_hi = 0;
    for (std::int32_t k = lo; k < hi; ++k) {
      const std::int32_t f = k + 127, thr = t->t[static_cast<std::size_t>(f)];
      const std::int32_t m = thr == INT32_MAX ? (1 << 23) : thr - (f << 23);
      m_lo = std::min(m_lo, m);
      m_hi = std::max(m_hi, m);
    }
    if (m_lo > m_hi) m_lo = m_hi = 1 << 23;  // lo == hi: the result is lo whatever the input
  }
};

/// The same from the per-field thresholds (log2_exponent's path for the rare vectors with a
/// mantissa in [m_lo, m_hi)); out of line so that the common path stays small and inlined.
template <class A>
[[gnu::noinline]] bi<A> log2_exponent_lookup(typename bf<A>::register_type wr, const Log2Lookup& lk) {
  // w by value in its vector register: by reference, every caller's loop spilled w to memory
  const bf<A> w(wr);
  const bi<A> a = as_int<A>(w);
  const bi<A> field = a >> 23;
  bi<A> thr;
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    if (lk.small) {
      const bi<A> idx = clamp_i<A>(field - bi<A>(lk.f0), 0, 31);
      const __m512i w0 = _mm512_load_si512(lk.window.data()), w1 = _mm512_load_si512(lk.window.data() + 16);
      thr = bi<A>(_mm512_permutex2var_epi32(w0, static_cast<__m512i>(idx), w1));
    } else if (lk.tables <= 8) {
      // A two-register permute per 32 entries, merged by the index's upper bits: on Zen 4 a
      // 16-lane gather cost more than five of these (log W8 spans 129 fields).
      const __m512i idx = static_cast<__m512i>(clamp_i<A>(field - bi<A>(lk.f0), 0, 32 * lk.tables - 1));
      const __m512i hi5 = _mm512_srli_epi32(idx, 5);
      __m512i r =
          _mm512_permutex2var_epi32(_mm512_load_si512(lk.window.data()), idx, _mm512_load_si512(lk.window.data() + 16));
      for (std::int32_t k = 1; k < lk.tables; ++k) {
        const __m512i tk = _mm512_permutex2var_epi32(_mm512_load_si512(lk.window.data() + 32 * k), idx,
                                                     _mm512_load_si512(lk.window.data() + 32 * k + 16));
        r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(hi5, _mm512_set1_epi32(k)), tk);
      }
      thr = bi<A>(r);
    } else {
      thr = gather_i32<A>(lk.t->t.data(), field);
    }
  } else
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
      if constexpr (std::is_base_of_v<xsimd::avx2, A> && bi<A>::size == 8) {
    if (lk.small) {  // four 8-entry permutes and two blends: AVX2's gather is slower
      const __m256i idx = static_cast<__m256i>(clamp_i<A>(field - bi<A>(lk.f0), 0, 31));
      const auto* w = reinterpret_cast<const __m256i*>(lk.window.data());
      auto pick = [](__m256i lo, __m256i hi, __m256i sel_bit31) {  // lanes with bit 31 set take hi
        return _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi), _mm256_castsi256_ps(sel_bit31)));
      };
      const __m256i b3 = _mm256_slli_epi32(idx, 28), b4 = _mm256_slli_epi32(idx, 27);
      const __m256i t01 = pick(_mm256_permutevar8x32_epi32(_mm256_load_si256(w), idx),
                               _mm256_permutevar8x32_epi32(_mm256_load_si256(w + 1), idx), b3);
      const __m256i t23 = pick(_mm256_permutevar8x32_epi32(_mm256_load_si256(w + 2), idx),
                               _mm256_permutevar8x32_epi32(_mm256_load_si256(w + 3), idx), b3);
      thr = bi<A>(pick(t01, t23, b4));
    } else {
      thr = gather_i32<A>(lk.t->t.data(), field);
    }
  } else
#endif
  {
    thr = gather_i32<A>(lk.t->t.data(), field);
  }
  const bi<A> up = select_i<A>(a >= thr, bi<A>(1), bi<A>(0));
  return clamp_i<A>(field - bi<A>(127) + up, lk.lo, lk.hi);
}

/// op(float32 log2(w)) + 127 — the float exponent field of 2^e — for non-negative w (not
/// NaN), from the bits and the thresholds, clamped to [lk.lo + 127, lk.hi + 127] (lo >= -126):
/// one compare with m_hi unless a lane's mantissa lies in the sliver [m_lo, m_hi) where the
/// field's own threshold decides. Callers that build 2^e from the bits use the field as is.
template <class A>
[[gnu::always_inline]] inline bi<A> log2_exponent_field(const bf<A>& w, const Log2Lookup& lk) {
  const bi<A> a = as_int<A>(w);
  const bi<A> mant = a & bi<A>(0x7fffff);
  if (xsimd::any(mant >= bi<A>(lk.m_lo) && mant < bi<A>(lk.m_hi))) [[unlikely]]
    return log2_exponent_lookup<A>(static_cast<typename bf<A>::register_type>(w), lk) + bi<A>(127);
  const bi<A> up = select_i<A>(mant >= bi<A>(lk.m_hi), bi<A>(1), bi<A>(0));
  return clamp_i<A>((a >> 23) + up, lk.field_lo, lk.field_hi);
}
/// The exponent itself, op(float32 log2(w)) clamped to [lk.lo, lk.hi].
template <class A>
[[gnu::always_inline]] inline bi<A> log2_exponent(const bf<A>& w, const Log2Lookup& lk) {
  return log2_exponent_field<A>(w, lk) - bi<A>(127);
}
/// 2^-e given the biased exponent field f = e + 127 in [1, 254], from the bits (2^-127 is the
/// subnormal 0x00400000).
template <class A>
inline bf<A> pow2_neg_field_i(const bi<A>& f) {
  return as_float<A>(select_i<A>(f > bi<A>(253), bi<A>(0x00400000), (bi<A>(254) - f) << 23));
}
/// sign_t(t) · 2^e given the biased exponent field f = e + 127 in [1, 254]: as
/// signed_pow2_wide_i, for normal results only (one shift instead of a range select).
template <class A>
inline bf<A> signed_pow2_field_i(const bf<A>& t, const bi<A>& f) {
  const bf<A> p = as_float<A>((f << 23) | (as_int<A>(t) & bi<A>(static_cast<std::int32_t>(0x80000000u))));
  return xsimd::select(t != bf<A>(0.0f), p, bf<A>(0.0f));
}

// ---- per-family kernels ----------------------------------------------------------------
// Each kernel has `template <class A> bf<A> apply(bf<A>) const` and `float scalar(float, i)`
// (the reference, for tails).

struct FixedKernel {
  FixedSpec spec;
  Policy policy;
  float scale, inv, lo, hi;
  bool mase;

  FixedKernel(const FixedSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        scale(qnum::detail::pow2f(s.frac_width)),
        inv(qnum::detail::pow2f(-s.frac_width)),
        lo(static_cast<float>(s.kmin())),
        hi(static_cast<float>(s.kmax())),
        mase(p.is_mase()) {}

  static bool supported(const FixedSpec& s, const Policy& p) {
    if (p.is_mase()) return p.rounding == Rounding::nearest_even || p.rounding == Rounding::floor;
    if (p.overflow != Overflow::saturate) return false;
    switch (p.rounding) {
      case Rounding::nearest_even:
      case Rounding::nearest_away:
        return true;
      case Rounding::floor:
      case Rounding::ceil:
      case Rounding::toward_zero:
        return s.frac_width >= 0;  // x * 2^F cannot underflow
      case Rounding::stochastic:
        return false;
    }
    return false;
  }

  /// round_int: a zero result keeps the sign of v (some emulated floor/ceil lose it).
  template <class A>
  bf<A> round(const bf<A>& v) const {
    const bf<A> r = round_raw<A>(v);
    const bf<A> signed_zero = as_float<A>(as_int<A>(v) & bi<A>(static_cast<std::int32_t>(0x80000000u)));
    return xsimd::select(r == bf<A>(0.0f), signed_zero, r);
  }
  template <class A>
  bf<A> round_raw(const bf<A>& v) const {
    switch (policy.rounding) {
      case Rounding::nearest_even:
        return xsimd::nearbyint(v);
      case Rounding::nearest_away: {
        // round half away from zero, exactly: t = trunc(v); +-1 when |v - t| >= 0.5 (exact).
        const bf<A> t = xsimd::trunc(v);
        const bf<A> d = v - t;
        return xsimd::select(d >= bf<A>(0.5f), t + bf<A>(1.0f), xsimd::select(d <= bf<A>(-0.5f), t - bf<A>(1.0f), t));
      }
      case Rounding::floor:
        return xsimd::floor(v);
      case Rounding::ceil:
        return xsimd::ceil(v);
      default:
        return xsimd::trunc(v);
    }
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> v = x * bf<A>(scale);
    const bf<A> k = round<A>(v);
    if (mase) {
      // torch: clamp (NaN passes), then / 2^F (== * 2^-F exactly: both round the same value once).
      return clamp_t<A>(k, lo, hi) * bf<A>(inv);
    }
    // exact: the reference clamps k to [kmin, kmax] in double and rounds k * 2^-F once; k is
    // a float here and float(kmax) is kmax or, for W >= 26, the float kmax rounds to, which
    // is also what the reference's output rounds to (no subnormal outputs for |F| <= 64).
    bf<A> c = xsimd::select(k < bf<A>(lo), bf<A>(lo), k);
    c = xsimd::select(c > bf<A>(hi), bf<A>(hi), c);
    const bf<A> r = c * bf<A>(inv) + bf<A>(0.0f);  // -0 -> +0: the reference has one zero
    return xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// Exact semantics on an IEEE-like grid (minifloat_ieee, minifloat_denorm), nearest even.
template <class Spec>
struct GridKernel {
  Spec spec;
  Policy policy;
  std::int32_t shift;      // float mantissa bits dropped in the normal range: 24 - precision
  std::int32_t emin_bits;  // bits of 2^emin
  float magic;             // 2^(emin - precision + 24): rounds onto the subnormal step
  float maxf, min_normal;
  bool inf_code, overflow_inf, flush;

  GridKernel(const Spec& s, const Policy& p, const qnum::detail::FloatGrid& g, bool inf)
      : spec(s),
        policy(p),
        shift(24 - g.precision),
        emin_bits((g.emin + 127) << 23),
        magic(qnum::detail::pow2f(g.emin - g.precision + 24)),
        maxf(static_cast<float>(g.max)),
        min_normal(qnum::detail::pow2f(g.emin)),
        inf_code(inf),
        overflow_inf(inf && p.overflow == Overflow::infinity),
        flush(!g.subnormals) {}

  static bool supported(const Policy& p, const qnum::detail::FloatGrid& g) {
    return !p.is_mase() && p.rounding == Rounding::nearest_even && g.emin >= -126 && g.precision >= 1 &&
           g.precision <= 24;
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bi<A> bits = as_int<A>(x);
    const bi<A> a = bits & bi<A>(0x7fffffff);
    const bi<A> sgn = bits & bi<A>(static_cast<std::int32_t>(0x80000000u));
    bi<A> r = a;
    if (shift > 0) {
      // the kept significand's lowest bit (with precision 1 it is the implicit one)
      const bi<A> lsb = shift >= 23 ? bi<A>(1) : ((a >> shift) & bi<A>(1));
      r = (a + bi<A>((1 << (shift - 1)) - 1) + lsb) & bi<A>(~((1 << shift) - 1));
    }
    const bf<A> mag = as_float<A>(a);
    const bf<A> sub = (mag + bf<A>(magic)) - bf<A>(magic);
    bf<A> q = xsimd::select(to_fmask<A>(a < bi<A>(emin_bits)), sub, as_float<A>(r));
    if (flush) q = xsimd::select(q < bf<A>(min_normal), bf<A>(0.0f), q);
    const bf<A> big = bf<A>(overflow_inf ? qnum::detail::kInf : maxf);
    q = xsimd::select(q > bf<A>(maxf), big, q);
    q = xsimd::select(mag == bf<A>(qnum::detail::kInf), bf<A>(inf_code ? qnum::detail::kInf : maxf), q);
    const bf<A> res = as_float<A>(as_int<A>(q) | sgn);
    return xsimd::select(xsimd::isnan(x), x, res);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// MASE's minifloat_ieee (floor log2 exponent, no carry, pass-through).
struct MinifloatMaseKernel {
  MinifloatSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float shift, inv_shift, two_inv_shift, kmax, p2emin;

  MinifloatMaseKernel(const MinifloatSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(-s.bias()),
        emax((1 << s.exponent_width) - 1 - s.bias()),
        lk(Log2Op::floor, emin, emax),
        shift(qnum::detail::pow2f(s.mantissa_bits())),
        inv_shift(qnum::detail::pow2f(-s.mantissa_bits())),
        two_inv_shift(2.0f * inv_shift),
        kmax(shift - 1.0f),
        p2emin(qnum::detail::pow2f(emin)) {}
  static bool supported(const MinifloatSpec& s) { return -s.bias() >= -126; }

  // MASE: q = sign(x + 1e-9) * 2^e * mant with mant = 1 + kn / 2^M, or 2 ks / 2^M where
  // 2^e == 2^emin, blended with x as (1 - c) q + c x, c = |x| <= 1e-8. The same floats in
  // fewer operations: every product below is exact (powers of two, integers k < 2^M);
  // c lanes give 0 * q + x = x + 0 (q is finite there); other lanes q + 0 * x, where sign(x)
  // is sign(x + 1e-9) (|x| > 1e-8) and 0 * x is NaN only for infinite or NaN x.
  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> value = xsimd::abs(x);
    const bi<A> f = log2_exponent_field<A>(value + bf<A>(1e-9f), lk);  // e + 127
    const bf<A> p2e = as_float<A>(f << 23);
    const bf<A> ms = (value * pow2_neg_field_i<A>(f)) * bf<A>(shift);  // m * 2^M, m = value / 2^e
    const auto sub = p2e == bf<A>(p2emin);
    // min/max instead of MASE's NaN-keeping clamp: k is NaN only for NaN x, whose lanes the
    // last line makes NaN again
    const bf<A> k =
        xsimd::max(xsimd::min(xsimd::nearbyint(xsimd::select(sub, ms * bf<A>(0.5f), ms - bf<A>(shift))), bf<A>(kmax)),
                   bf<A>(0.0f));
    const bf<A> mant = xsimd::fma(k, xsimd::select(sub, bf<A>(two_inv_shift), bf<A>(inv_shift)),
                                  xsimd::select(sub, bf<A>(0.0f), bf<A>(1.0f)));
    const bf<A> q = as_float<A>(as_int<A>(p2e * mant) | (as_int<A>(x) & bi<A>(static_cast<std::int32_t>(0x80000000u))));
    return xsimd::select(value <= bf<A>(1e-8f), x + bf<A>(0.0f), q + x * bf<A>(0.0f));
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// MASE's minifloat_denorm (ceil log2 exponent, mantissa clamped, pass-through).
struct DenormMaseKernel {
  MinifloatDenormSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float shift, inv_shift;

  DenormMaseKernel(const MinifloatDenormSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(s.emin()),
        emax(s.emax()),
        lk(Log2Op::ceil, emin, emax),
        shift(qnum::detail::pow2f(s.mantissa_bits())),
        inv_shift(qnum::detail::pow2f(-s.mantissa_bits())) {}
  static bool supported(const MinifloatDenormSpec& s) { return s.emin() >= -126; }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> sign = sign_t<A>(x + bf<A>(1e-9f));
    const bf<A> value = xsimd::abs(x);
    const bi<A> f = log2_exponent_field<A>(value + bf<A>(1e-9f), lk);  // e + 127
    const bf<A> p2e = as_float<A>(f << 23);
    const bf<A> k = clamp_t<A>(xsimd::nearbyint((value * pow2_neg_field_i<A>(f)) * bf<A>(shift)), 0.0f, shift - 1.0f);
    const bf<A> q = sign * p2e * (k * bf<A>(inv_shift));
    const bf<A> c = xsimd::select(value <= bf<A>(1e-8f), bf<A>(1.0f), bf<A>(0.0f));
    return (bf<A>(1.0f) - c) * q + c * x;
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// log, both semantics (Mase = p.is_mase(): a compile-time choice, so that the vector loop
/// holds one of them with its constants in registers).
template <bool Mase>
struct LogKernel {
  static constexpr bool mase = Mase;
  LogSpec spec;
  Policy policy;
  std::int32_t emin, emax;
  Log2Lookup lk;
  float eps;

  LogKernel(const LogSpec& s, const Policy& p)
      : spec(s),
        policy(p),
        emin(s.emin()),
        emax(s.emax()),
        eps(static_cast<float>(qnum::detail::pow2(s.emin()) * 0.1)) {
    if (mase) lk = Log2Lookup(Log2Op::nearest, emin, emax);
  }
  static bool supported(const LogSpec& s, const Policy& p) {
    return s.emin() >= -126 &&
           (p.is_mase() || p.rounding == Rounding::nearest_even || p.rounding == Rounding::nearest_away);
  }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    if constexpr (mase) {
      const bi<A> f = log2_exponent_field<A>(xsimd::abs(x) + bf<A>(eps), lk);
      return xsimd::select(xsimd::isnan(x), x, signed_pow2_field_i<A>(x + bf<A>(eps), f));
    }
    const bi<A> bits = as_int<A>(x);
    const bi<A> a = bits & bi<A>(0x7fffffff);
    const bi<A> up = select_i<A>((a & bi<A>(0x7fffff)) >= bi<A>(kSqrt2Mantissa), bi<A>(1), bi<A>(0));
    // field 0 (zero, subnormals) gives e <= -126 <= emin: clamped to emin as the reference.
    const bi<A> e = clamp_i<A>((a >> 23) - bi<A>(127) + up, emin, emax);
    const bf<A> r = as_float<A>(((e + bi<A>(127)) << 23) | (bits & bi<A>(static_cast<std::int32_t>(0x80000000u))));
    return xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// binary, bipolar deterministic: x >= 0 -> +1 else -1; NaN stays NaN (exact) or -1 (mase).
struct BinaryKernel {
  BinarySpec spec;
  Policy policy;
  bool mase;
  BinaryKernel(const BinarySpec& s, const Policy& p) : spec(s), policy(p), mase(p.is_mase()) {}
  static bool supported(const BinarySpec& s) { return s.bipolar && !s.stochastic; }

  template <class A>
  [[gnu::always_inline]] bf<A> apply(const bf<A>& x) const {
    const bf<A> r = xsimd::select(x >= bf<A>(0.0f), bf<A>(1.0f), bf<A>(-1.0f));
    return mase ? r : xsimd::select(xsimd::isnan(x), x, r);
  }
  float scalar(float x, std::uint64_t i) const { return qnum::quantize(spec, policy, x, i); }
};

/// The vector loop over [begin, end): full batches, then the reference for the tail.
template <class A, class K>
void run_simd(const K& kernel, const float* in, float* out, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t n = bf<A>::size;
  const K k = kernel;  // a local copy: stores to `out` cannot alias it, its fields stay in registers
  std::int64_t i = begin;
  // Software prefetch ~2 KB ahead: long kernels keep few loads in flight, and without it the
  // loop runs at memory latency on machines whose hardware prefetcher does not keep up.
  for (; i + n <= end; i += n) {
    __builtin_prefetch(in + i + 512);
    k.template apply<A>(bf<A>::load_unaligned(in + i)).store_unaligned(out + i);
  }
  for (; i < end; ++i) out[i] = k.scalar(in[i], static_cast<std::uint64_t>(i));
}

template <class A, class K>
void run_threaded(const K& k, std::span<const float> in, std::span<float> out) {
  const float* src = in.data();
  float* dst = out.data();
  parallel_for(static_cast<std::int64_t>(in.size()), kQuantizeGrain,
               [&](std::int64_t b, std::int64_t e) { run_simd<A>(k, src, dst, b, e); });
}

template <class Spec>
void run_scalar_threaded(const Spec& s, const Policy& p, std::span<const float> in, std::span<float> out) {
  const float* src = in.data();
  float* dst = out.data();
  parallel_for(static_cast<std::int64_t>(in.size()), kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) dst[i] = qnum::quantize(s, p, src[i], static_cast<std::uint64_t>(i));
  });
}

/// Visits the plan for a format: calls simd(kernel), scalar(spec) or reference().
template <class OnSimd, class OnScalar, class OnRef>
void plan(const Format& f, OnSimd&& simd, OnScalar&& scalar, OnRef&& reference) {
  const Policy& p = f.policy;
  if (const auto* s = std::get_if<FixedSpec>(&f.spec)) {
    if (FixedKernel::supported(*s, p)) return simd(FixedKernel(*s, p));
    return scalar(*s);
  }
  if (const auto* s = std::get_if<MinifloatSpec>(&f.spec)) {
    if (p.is_mase()) {
      if (MinifloatMaseKernel::supported(*s)) return simd(MinifloatMaseKernel(*s, p));
      return scalar(*s);
    }
    const qnum::detail::FloatGrid g = qnum::detail::minifloat_grid(*s, p.subnormals);
    if (GridKernel<MinifloatSpec>::supported(p, g))
      return simd(GridKernel<MinifloatSpec>(*s, p, g, s->specials == Specials::ieee));
    return scalar(*s);
  }
  if (const auto* s = std::get_if<MinifloatDenormSpec>(&f.spec)) {
    if (p.is_mase()) {
      if (DenormMaseKernel::supported(*s)) return simd(DenormMaseKernel(*s, p));
      return scalar(*s);
    }
    if (s->mantissa_bits() >= 1) {
      const qnum::detail::FloatGrid g = qnum::detail::minifloat_denorm_grid(*s, p.subnormals);
      if (GridKernel<MinifloatDenormSpec>::supported(p, g))
        return simd(GridKernel<MinifloatDenormSpec>(*s, p, g, false));
    }
    return scalar(*s);
  }
  if (const auto* s = std::get_if<LogSpec>(&f.spec)) {
    if (LogKernel<true>::supported(*s, p))
      return p.is_mase() ? simd(LogKernel<true>(*s, p)) : simd(LogKernel<false>(*s, p));
    return scalar(*s);
  }
  if (const auto* s = std::get_if<BinarySpec>(&f.spec)) {
    if (BinaryKernel::supported(*s)) return simd(BinaryKernel(*s, p));
    if (s->bipolar && !(p.is_mase() && s->stochastic)) return scalar(*s);  // elementwise, Philox by index
    return reference();  // scaled (per-channel mean) or torch's rand stream
  }
  if (const auto* s = std::get_if<BinarizeSpec>(&f.spec)) return scalar(*s);
  return reference();
}

}  // namespace detail

}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel

#include "qnum/kernel/quantize_block.hpp"  // block_fp / MX kernels (use the helpers above)
#include "qnum/kernel/quantize_rows.hpp"   // scale_integer, ternary
#include "qnum/kernel/quantize_tiles.hpp"  // block_minifloat / block_log, threaded per block

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {

/// Which path `quantize` takes for `f` on a tensor of `shape` (for reports and benchmarks).
inline QuantizePath quantize_path(const Format& f, const Shape& shape = {1}, Role role = Role::weight) {
  if (detail::block_supported(f, shape) || detail::mase_block_supported(f, shape, role)) return QuantizePath::simd;
  if (detail::tiles_simd_supported(f, shape)) return QuantizePath::simd;
  if (detail::tiles_supported(f, shape, role)) return f.policy.is_mase() ? QuantizePath::simd : QuantizePath::scalar;
  if (f.policy.is_mase() && std::holds_alternative<MXFPSpec>(f.spec)) return QuantizePath::scalar;
  if (std::holds_alternative<ScaleIntegerSpec>(f.spec))  // exact: round to nearest even in vector lanes
    return f.policy.is_mase() || f.policy.rounding == Rounding::nearest_even ? QuantizePath::simd
                                                                             : QuantizePath::scalar;
  if (std::holds_alternative<TernarySpec>(f.spec))
    return f.policy.is_mase() ? QuantizePath::scalar : QuantizePath::simd;
  if (std::holds_alternative<ResidualSignSpec>(f.spec)) return QuantizePath::simd;
  QuantizePath r = QuantizePath::reference;
  detail::plan(
      f, [&](const auto&) { r = QuantizePath::simd; }, [&](const auto&) { r = QuantizePath::scalar; },
      [&] { r = QuantizePath::reference; });
  return r;
}

/// Quantizes a C-order tensor of `shape` with format `f`, using instruction set `Arch`
/// (an xsimd architecture compiled into this translation unit). Bit-identical to
/// `f.quantize(in, out, shape, role)` for any thread count; `out` may alias `in` exactly;
/// mismatched sizes throw qnum::Error.
template <class Arch>
void quantize_arch(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                   Role role = Role::weight) {
  if (const auto* s = std::get_if<ResidualSignSpec>(&f.spec))  // stacked output [L, ...shape]
    return detail::residual_sign_kernel<Arch>(*s, f.policy, in, out, shape);
  qnum::detail::check_tensor_io(f.family(), in, out, shape);
  if (detail::block_supported(f, shape)) {
    if (const auto* s = std::get_if<BlockFPSpec>(&f.spec)) {
      s->validate();
      return detail::block_fp_quantize_simd<Arch>(*s, f.policy, in, out, shape);
    }
    if (const auto* s = std::get_if<MXIntSpec>(&f.spec)) {
      s->validate();
      return detail::mx_quantize_simd<Arch>(s->element(), s->scale_bits, f.policy, in, out, shape, s->block_size);
    }
    if (const auto* s = std::get_if<MXFPSpec>(&f.spec)) {
      s->validate();
      qnum::detail::require_exact_mxfp(*s);
      return detail::mx_quantize_simd<Arch>(s->element(), s->scale_exp_bits, f.policy, in, out, shape, s->block_size);
    }
  }
  if (detail::mase_block_supported(f, shape, role)) {
    if (const auto* s = std::get_if<BlockFPSpec>(&f.spec)) {
      s->validate();
      return detail::block_fp_mase_simd<Arch>(*s, in, out, shape, role);
    }
    if (const auto* s = std::get_if<MXIntSpec>(&f.spec)) {
      s->validate();
      return detail::mxint_mase_simd<Arch>(*s, in, out);
    }
    if (const auto* s = std::get_if<MXFPSpec>(&f.spec)) {
      s->validate();
      return detail::mxfp_mase_simd<Arch>(*s, in, out);
    }
  }
  if (detail::tiles_simd_supported(f, shape)) {
    if (const auto* s = std::get_if<BlockMinifloatSpec>(&f.spec)) {
      s->validate();
      return detail::block_minifloat_simd<Arch>(*s, f.policy, in, out, shape);
    }
    if (const auto* s = std::get_if<BlockLogSpec>(&f.spec)) {
      s->validate();
      return detail::block_log_simd<Arch>(*s, f.policy, in, out, shape);
    }
  }
  if (f.policy.is_mase() && detail::tiles_supported(f, shape, role)) {
    if (const auto* s = std::get_if<BlockMinifloatSpec>(&f.spec)) {
      s->validate();
      return detail::block_minifloat_mase_simd<Arch>(*s, in, out, shape, role);
    }
    if (const auto* s = std::get_if<BlockLogSpec>(&f.spec)) {
      s->validate();
      return detail::block_log_mase_simd<Arch>(*s, in, out, shape, role);
    }
  }
  if (detail::tiles_supported(f, shape, role)) {
    if (const auto* s = std::get_if<BlockMinifloatSpec>(&f.spec)) {
      s->validate();
      return detail::block_minifloat_tiles(*s, f.policy, in, out, shape, role);
    }
    if (const auto* s = std::get_if<BlockLogSpec>(&f.spec)) {
      s->validate();
      return detail::block_log_tiles(*s, f.policy, in, out, shape, role);
    }
  }
  if (detail::mase_mxfp_threaded(f, in, out)) {
    const auto& s = std::get<MXFPSpec>(f.spec);
    s.validate();
    return detail::mase_mxfp_tiles(s, in, out, shape);
  }
  if (const auto* s = std::get_if<ScaleIntegerSpec>(&f.spec))
    return detail::scale_integer_kernel<Arch>(*s, f.policy, in, out, shape);
  if (const auto* s = std::get_if<TernarySpec>(&f.spec))
    return detail::ternary_kernel<Arch>(*s, f.policy, in, out, shape);
  detail::plan(
      f, [&](const auto& k) { detail::run_threaded<Arch>(k, in, out); },
      [&](const auto& s) { detail::run_scalar_threaded(s, f.policy, in, out); },
      [&] { f.quantize(in, out, shape, role); });
}

/// As quantize_arch with the widest instruction set of this build (xsimd::default_arch).
inline void quantize(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                     Role role = Role::weight) {
  quantize_arch<xsimd::default_arch>(f, in, out, shape, role);
}

/// Name of the instruction set `quantize` uses.
inline std::string_view simd_arch_name() { return xsimd::default_arch::name(); }

}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
