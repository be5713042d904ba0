// SIMD building blocks shared by every quantize kernel: float/int32 batches over the xsimd
// architecture tag `A`, integer selects and clamps, powers of two from the bits, and MASE's
// floor/ceil/round(float32 log2 x) decided from the bits by per-binade thresholds
// (kernel/log2_thresholds.hpp): those thresholds' mantissas lie in a sliver a few dozen units
// wide, so one compare decides every lane outside it; a vector with a lane inside looks the
// thresholds up per lane (log2_exponent).
//
// Everything in kernel/quantize/ lives in an inline namespace named after the instruction set
// it is compiled for: `native` by default (the translation unit's own flags); the run-time
// dispatch library compiles the kernels once per ISA under another name (src/kernel/), so the
// per-ISA copies of every function, template or not, are distinct symbols.
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
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "qnum/core/bits.hpp"
#include "qnum/kernel/log2_thresholds.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#ifndef QNUM_KERNEL_ISA_NS
#define QNUM_KERNEL_ISA_NS native
#endif

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

using qnum::detail::bits_float;
using qnum::detail::float_bits;

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

/// The largest float <= d (d >= 0 or +Inf, not NaN): for a float x, x > d iff x > T.
inline float float_at_or_below(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) > d) f = std::nextafter(f, -qnum::detail::kInf);
  return f;
}

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
// ---- streamed (non-temporal) output ---------------------------------------------------------

/// Outputs of at least this many bytes are written with non-temporal stores. A plain store
/// first reads the output line (read for ownership): a third memory stream beside the input
/// and the output, for lines that are evicted before anyone reads them when the output is far
/// larger than the caches. Below it the output stays in cache for its reader. 8 MiB: from
/// there streaming won even with input and output cache-warm (docs/perf.md, 2026-11-28).
inline constexpr std::size_t kStreamMinBytes = std::size_t{8} << 20;

/// Whether a quantize of `in` into `out` streams its output: large, and not overlapping the
/// input (in place, the lines are in cache already: nothing to save).
inline bool stream_output(std::span<const float> in, std::span<float> out) {
  if (out.size() * sizeof(float) < kStreamMinBytes) return false;
  const float* src = in.data();
  const float* dst = out.data();
  return !(src < dst + out.size() && dst < src + in.size());
}

/// Whether p is aligned for a streamed store of a batch.
template <class A>
inline bool batch_aligned(const float* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (bf<A>::size * sizeof(float)) == 0;
}

/// A non-temporal store of v to p (p batch_aligned): straight to memory, no read for
/// ownership. Architectures without one store normally.
template <class A>
inline void store_stream(const bf<A>& v, float* p) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>)
    _mm512_stream_ps(p, static_cast<__m512>(v));
  else
#endif
#if XSIMD_WITH_AVX && defined(__AVX__)
      if constexpr (std::is_base_of_v<xsimd::avx, A>)
    _mm256_stream_ps(p, static_cast<__m256>(v));
  else
#endif
#if XSIMD_WITH_SSE2 && defined(__SSE2__)
      if constexpr (std::is_base_of_v<xsimd::sse2, A>)
    _mm_stream_ps(p, static_cast<__m128>(v));
  else
#endif
    v.store_aligned(p);
}

/// Orders this thread's streamed stores before its later stores (the hand-over to the
/// thread that joins the parallel loop): non-temporal stores are weakly ordered.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
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

/// table[idx] per lane for an 8-entry table (idx in [0, 8)): one permute on AVX-512 and AVX2
/// (a gather of 16 lanes costs about as much as the rest of a small block's work).
template <class A>
inline bi<A> lookup8_i32(const std::int32_t (&table)[8], const bi<A>& idx) {
#if XSIMD_WITH_AVX512F && defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    const __m512i t = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(table)));
    return bi<A>(_mm512_permutexvar_epi32(static_cast<__m512i>(idx), t));
  } else
#endif
#if XSIMD_WITH_AVX2 && defined(__AVX2__)
      if constexpr (std::is_base_of_v<xsimd::avx2, A>) {
    const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table));
    return bi<A>(_mm256_permutevar8x32_epi32(t, static_cast<__m256i>(idx)));
  } else
#endif
  {
    return gather_i32<A>(table, idx);
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

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
