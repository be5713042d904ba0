// bf16 GEMM: C = op(A)·op(B) with both operands rounded to bfloat16 (nearest even) and fp32
// accumulation, in the NT, NN and TN forms of the fp32 GEMM: the products of a `--precision
// bf16` step (tensor/precision.hpp).
//
// The accumulation follows the engine that runs it, each engine's arithmetic measured and
// written as a scalar chain that its kernel equals bit for bit (Bf16Chain):
//  - pairs (AVX512-BF16's vdpbf16ps, measured on AMD Zen 4 and Sapphire Rapids, as Intel's
//    pseudo-code): K is taken in pairs (2t, 2t+1), and every output element is one chain
//        acc = ftz(fma(a[2t+1], b[2t+1], acc));  acc = ftz(fma(a[2t], b[2t], acc))
//    over t = 0 .. ceil(K/2)-1 from acc = +0 (an odd K pads one zero pair): bf16_dot_reference.
//    The vdpbf16ps kernel and the FMA emulation (everywhere else) run it.
//  - tiles (AMX-BF16's TDPBF16PS, gemm/bf16_amx.hpp): per 32-value block of K, an even and an
//    odd chain from zero, their sum added to the running sum: bf16_dot_reference_tiles.
// Both read bf16 subnormal operands as zero (DAZ) and flush subnormal results (FTZ), whatever
// MXCSR says. The chain never splits K, and tiles depend only on the sizes, so the bits never
// depend on the thread count; they do depend on the engine (bf16_gemm_chain()), as they would
// in any library that runs on these units.
//
// Operands are packed once per call: B into panels of 16 columns, each bf16 pair of a column
// one 32-bit word (the operand layout vdpbf16ps and the tiles read); A row-major as bf16 (or,
// for vdpbf16ps when read transposed, in strips of 8 rows), a row's pair one word.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/amx.hpp"
#include "qnum/kernel/gemm/bf16_amx.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/kernel/transpose.hpp"

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#define QNUM_GEMM_BF16_NATIVE 1
#else
#define QNUM_GEMM_BF16_NATIVE 0
#endif

namespace qnum {

/// Whether this translation unit's bf16 GEMM runs on vdpbf16ps (else the FMA emulation).
inline constexpr bool kGemmBf16Native = QNUM_GEMM_BF16_NATIVE != 0;

/// The accumulation chain of the bf16 GEMM (see the file comment).
enum class Bf16Chain { pairs, tiles };

/// The chain this process's bf16 GEMM runs: tiles where AMX is enabled (kernel::amx_enabled()).
inline Bf16Chain bf16_gemm_chain() {
  return detail::kGemmBf16AmxCompiled && kernel::amx_enabled() ? Bf16Chain::tiles : Bf16Chain::pairs;
}

/// Whether the bf16 products run on a bf16 unit (AMX tiles or vdpbf16ps), not the emulation.
inline bool bf16_gemm_native() { return kGemmBf16Native || bf16_gemm_chain() == Bf16Chain::tiles; }

/// What runs the bf16 products, in words.
inline const char* bf16_engine() {
  if (bf16_gemm_chain() == Bf16Chain::tiles) return "AMX-BF16 tiles (TDPBF16PS)";
  return kGemmBf16Native ? "vdpbf16ps (AVX512-BF16)" : "an FMA emulation (this build has no AVX512-BF16)";
}

/// The bf16 operand of x: nearest even, NaN -> 0x7FC0, subnormal results -> signed zero (the
/// DAZ of vdpbf16ps, applied once when packing).
inline std::uint16_t bf16_operand(float x) {
  // detail::mx_float_to_bf16_bits's rounding, written in 32-bit lanes with selects: calling it
  // made the transposed packer (backward's dW) ~25% slower on Zen 4 (2026-12-03).
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  std::uint32_t h = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  h = nan ? 0x7FC0u : h;
  h = (h & 0x7F80u) == 0 ? h & 0x8000u : h;
  return static_cast<std::uint16_t>(h);
}

namespace detail {

/// Subnormal -> signed zero (vdpbf16ps's FTZ).
inline float bf16_ftz(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}

}  // namespace detail

/// One output element of the bf16 GEMM: Σ_k a[k]·b[k] over bf16 operands (already rounded,
/// DAZ applied by bf16_operand) in vdpbf16ps's order. The definition every path equals.
inline float bf16_dot_reference(const std::uint16_t* a, const std::uint16_t* b, std::int64_t K) {
  float acc = 0.0f;
  for (std::int64_t t = 0; 2 * t < K; ++t) {
    const std::int64_t k0 = 2 * t, k1 = k0 + 1;
    const float a1 = k1 < K ? detail::mx_bf16_bits_to_float(a[k1]) : 0.0f, b1 = k1 < K ? detail::mx_bf16_bits_to_float(b[k1]) : 0.0f;
    acc = detail::bf16_ftz(std::fma(a1, b1, acc));
    acc = detail::bf16_ftz(std::fma(detail::mx_bf16_bits_to_float(a[k0]), detail::mx_bf16_bits_to_float(b[k0]), acc));
  }
  return acc;
}

/// One output element in TDPBF16PS's chain: per block of 32 values (the pad of the last block
/// zero and taking part), an even and an odd chain from +0, their sum added to the running sum.
inline float bf16_dot_reference_tiles(const std::uint16_t* a, const std::uint16_t* b, std::int64_t K) {
  float acc = 0.0f;
  for (std::int64_t k0 = 0; k0 < K; k0 += 32) {
    float even = 0.0f, odd = 0.0f;
    for (std::int64_t k = k0; k < k0 + 32; k += 2) {
      const auto at = [K](const std::uint16_t* x, std::int64_t i) {
        return i < K ? detail::mx_bf16_bits_to_float(x[i]) : 0.0f;
      };
      even = detail::bf16_ftz(std::fma(at(a, k), at(b, k), even));
      odd = detail::bf16_ftz(std::fma(at(a, k + 1), at(b, k + 1), odd));
    }
    acc = detail::bf16_ftz(acc + detail::bf16_ftz(even + odd));
  }
  return acc;
}

/// One output element in `chain`'s order.
inline float bf16_dot(const std::uint16_t* a, const std::uint16_t* b, std::int64_t K, Bf16Chain chain) {
  return chain == Bf16Chain::tiles ? bf16_dot_reference_tiles(a, b, K) : bf16_dot_reference(a, b, K);
}

namespace detail {

inline constexpr int kBMR = 8, kBNR = 32;  // register tile: 8 rows x 32 columns (16 zmm accumulators)
inline constexpr std::int64_t kBTC = 256;  // pairs of K per pass over a tile (512 values)

/// Packed operands start on a cache line: a tile row or zmm load never splits across two.
using Bf16Words = std::vector<std::uint32_t, CacheAligned<std::uint32_t>>;
using Bf16Halves = std::vector<std::uint16_t, CacheAligned<std::uint16_t>>;

/// The first n words of `out`, grown (never shrunk or cleared) as needed: the packers reuse
/// one buffer per thread and write every word they hand on, so no call pays a zero fill.
inline std::uint32_t* reuse_words(Bf16Words& out, std::int64_t n) {
  if (out.size() != static_cast<std::size_t>(n)) out.resize(static_cast<std::size_t>(n));
  return out.data();
}

/// op(A) or op(B) as a strided view: element (row r, depth k) at p[r·sr + k·sk].
struct Bf16Operand {
  const float* p;
  std::int64_t sr, sk;
  float at(std::int64_t r, std::int64_t k) const { return p[r * sr + k * sk]; }
};

/// The packed word of one pair: bf16(lo) | bf16(hi) << 16.
inline std::uint32_t bf16_pair(float lo, float hi) {
  return static_cast<std::uint32_t>(bf16_operand(lo)) | (static_cast<std::uint32_t>(bf16_operand(hi)) << 16);
}

#if QNUM_GEMM_BF16_NATIVE
/// bf16_operand of 16 lanes at once. vcvtneps2bf16 rounds to nearest even but reads fp32
/// subnormals as zero, so two kinds of lane are set right after it: NaN (-> 0x7FC0) and the
/// subnormals that round up to the smallest normal bf16 (-> ±0x0080), exhaustively checked.
inline __m256i bf16_operand16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7F800000));
  const __mmask16 up = _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x007F8000)) &
                       _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(0x00800000));
  const __m256i sign = _mm256_and_si256(_mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)), _mm256_set1_epi16(-0x8000));
  __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
  h = _mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7FC0));
  return _mm256_mask_mov_epi16(h, up, _mm256_or_si256(sign, _mm256_set1_epi16(0x0080)));
}

/// The pair words of 16 rows (lanes past n zero) from two k-lines contiguous across rows.
inline __m512i bf16_pair16(const float* x0, const float* x1, int n) {
  const __mmask16 m = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __m512i lo = _mm512_cvtepu16_epi32(bf16_operand16(_mm512_maskz_loadu_ps(m, x0)));
  if (!x1) return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(bf16_operand16(_mm512_maskz_loadu_ps(m, x1)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}
#endif

/// h[k] = bf16_operand(x[k]) for k < n.
inline void bf16_convert(const float* __restrict x, std::uint16_t* __restrict h, std::int64_t n) {
  std::int64_t k = 0;
#if QNUM_GEMM_BF16_NATIVE
  for (; k + 16 <= n; k += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + k), bf16_operand16(_mm512_loadu_ps(x + k)));
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    _mm256_mask_storeu_epi16(h + k, m, bf16_operand16(_mm512_maskz_loadu_ps(m, x + k)));
    return;
  }
#endif
  for (; k < n; ++k) h[k] = bf16_operand(x[k]);
}

/// Packs rows [0, R) of `op` into groups of `g` rows: group q holds, for each pair t < Tp, the
/// g rows' words (Tp >= ceil(K/2) pairs; at least `min_groups` groups). Rows past R and pairs
/// past K are zero. Rows contiguous along K (sk = 1) are converted a row at a time into a
/// scratch and interleaved; rows contiguous across (sr = 1) are read two whole k-lines at a
/// time, each feeding every group's word t.
inline void pack_bf16(const Bf16Operand& op, std::int64_t R, std::int64_t K, int g, Bf16Words& out,
                      bool parallel, std::int64_t Tp = 0, std::int64_t min_groups = 0) {
  const std::int64_t T = ceil_div(K, 2), groups = ceil_div(R, g);
  if (Tp < T) Tp = T;
  std::uint32_t* po = reuse_words(out, std::max(groups, min_groups) * Tp * g);
  // Every word of the data is written below (rows past R as zeros); only the pads are zeroed here.
  std::fill(po + groups * Tp * g, po + out.size(), 0u);
  if (Tp > T)
    for (std::int64_t q = 0; q < groups; ++q) std::fill(po + (q * Tp + T) * g, po + (q + 1) * Tp * g, 0u);
  const Bf16Operand o = op;
  if (o.sk == 1) {
    const auto pack = [=](std::int64_t qb, std::int64_t qe) {
      thread_local std::vector<std::uint16_t> rows;  // row r: 2T halves (its T words, little-endian)
      rows.assign(static_cast<std::size_t>(g * 2 * T), 0);
      std::uint16_t* h = rows.data();
      for (std::int64_t q = qb; q < qe; ++q) {
        const std::int64_t r0 = q * g, nr = std::min<std::int64_t>(g, R - r0);
        std::uint32_t* d = po + q * Tp * g;
        for (std::int64_t r = 0; r < nr; ++r) {
          bf16_convert(o.p + (r0 + r) * o.sr, h + r * 2 * T, K);
        }
        std::int64_t t = 0;
#if QNUM_GEMM_BF16_NATIVE
        if (g == 16) {  // a 16-word line per pair, gathered from the 16 converted rows
          const __mmask16 m = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
          const __m512i rows_at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                     _mm512_set1_epi32(static_cast<int>(T)));
          const auto* w = reinterpret_cast<const int*>(h);
          for (; t < T; ++t)
            _mm512_storeu_si512(d + t * 16, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, rows_at, w + t, 4));
        }
#endif
        for (; t < T; ++t) {
          for (std::int64_t r = 0; r < nr; ++r)
            d[t * g + r] = static_cast<std::uint32_t>(h[(r * T + t) * 2]) |
                           (static_cast<std::uint32_t>(h[(r * T + t) * 2 + 1]) << 16);
          std::fill(d + t * g + nr, d + (t + 1) * g, 0u);
        }
      }
    };
    if (parallel)
      parallel_for(groups, 4, pack);
    else
      pack(0, groups);
    return;
  }
  const auto pack = [=](std::int64_t tb, std::int64_t te) {
    for (std::int64_t t = tb; t < te; ++t) {
      const float* x0 = o.p + 2 * t * o.sk;
      const float* x1 = 2 * t + 1 < K ? x0 + o.sk : nullptr;
      for (std::int64_t q = 0; q < groups; ++q) {
        const std::int64_t r0 = q * g, nr = std::min<std::int64_t>(g, R - r0);
        std::uint32_t* dt = po + (q * Tp + t) * g;
#if QNUM_GEMM_BF16_NATIVE
        if (o.sr == 1 && g >= 8) {  // the group's rows are contiguous in both lines; lanes past nr zero
          const __mmask16 m = static_cast<__mmask16>((1u << g) - 1);
          _mm512_mask_storeu_epi32(dt, m, bf16_pair16(x0 + r0, x1 ? x1 + r0 : nullptr, static_cast<int>(nr)));
          continue;
        }
#endif
        if (x1)
          for (std::int64_t r = 0; r < nr; ++r) dt[r] = bf16_pair(x0[(r0 + r) * o.sr], x1[(r0 + r) * o.sr]);
        else
          for (std::int64_t r = 0; r < nr; ++r) dt[r] = bf16_pair(x0[(r0 + r) * o.sr], 0.0f);
        std::fill(dt + nr, dt + g, 0u);
      }
    }
  };
  if (parallel)
    parallel_for(T, 64, pack);
  else
    pack(0, T);
}

/// Packs rows [0, R) of `op` (rows contiguous along K: sk = 1) row-major: row r is its 2T
/// bf16 halves (the pad of an odd K zero), so the tile reads a row's pair t as one word.
inline void pack_bf16_rows(const Bf16Operand& op, std::int64_t R, std::int64_t K, Bf16Halves& out, bool parallel) {
  const std::int64_t T = ceil_div(K, 2);
  out.resize(static_cast<std::size_t>(R * 2 * T));
  std::uint16_t* po = out.data();
  const Bf16Operand o = op;
  const auto pack = [=](std::int64_t rb, std::int64_t re) {
    for (std::int64_t r = rb; r < re; ++r) {
      std::uint16_t* h = po + r * 2 * T;
      bf16_convert(o.p + r * o.sr, h, K);
      if (K % 2) h[K] = 0;
    }
  };
  if (parallel)
    parallel_for(R, 64, pack);
  else
    pack(0, R);
}

/// Packs rows [0, R) of `op` for the AMX tiles (bf16_amx.hpp's A layout): per strip of 16 rows
/// and step of 16 pairs one 1 KiB block, row r's 16 words 64 bytes apart; Tp pairs a row (past
/// K zero), rows up to min_rows zero. Rows along K (sk = 1) are converted 32 values at a time
/// into their block row. Rows across (sr = 1: backward's dW) are read 32 k-lines at a time,
/// each line's 16-row pieces turned into pair words and every block transposed in registers:
/// whole lines stream in, where a strip at a time would stride through them.
inline void pack_bf16_amx_a(const Bf16Operand& op, std::int64_t R, std::int64_t K, Bf16Words& out, bool parallel,
                            std::int64_t Tp, std::int64_t min_rows) {
  const std::int64_t T = ceil_div(K, 2), steps = Tp / 16, strips = ceil_div(std::max(R, min_rows), 16);
  const std::int64_t data_strips = ceil_div(R, 16);
  std::uint32_t* po = reuse_words(out, strips * Tp * 16);
  std::fill(po + data_strips * Tp * 16, po + out.size(), 0u);  // strips past the data
  const Bf16Operand o = op;
  if (o.sk == 1) {
    const auto pack = [=](std::int64_t sb, std::int64_t se) {
      for (std::int64_t st = sb; st < se; ++st) {
        const std::int64_t r0 = st * 16, nr = std::min<std::int64_t>(16, R - r0);
        std::uint32_t* strip = po + st * steps * 256;
        for (std::int64_t r = 0; r < 16; ++r)
          for (std::int64_t u = 0; u < steps; ++u) {
            auto* h = reinterpret_cast<std::uint16_t*>(strip + u * 256 + r * 16);
            const std::int64_t n = r < nr ? std::clamp<std::int64_t>(K - u * 32, 0, 32) : 0;
            if (n > 0) bf16_convert(o.p + (r0 + r) * o.sr + u * 32, h, n);
            std::fill(h + n, h + 32, std::uint16_t{0});
          }
      }
    };
    if (parallel)
      parallel_for(data_strips, 1, pack);
    else
      pack(0, data_strips);
    return;
  }
  const auto pack = [=](std::int64_t ub, std::int64_t ue) {
#if QNUM_GEMM_BF16_NATIVE
    alignas(64) std::uint32_t block[16][16];  // [pair][row]
#endif
    for (std::int64_t u = ub; u < ue; ++u) {
      const std::int64_t t0 = u * 16, nt = std::min<std::int64_t>(16, T - t0);
      for (std::int64_t st = 0; st < data_strips; ++st) {
        const std::int64_t r0 = st * 16, nr = std::min<std::int64_t>(16, R - r0);
        std::uint32_t* d = po + st * steps * 256 + u * 256;
#if QNUM_GEMM_BF16_NATIVE
        if (o.sr == 1) {
          for (std::int64_t t = 0; t < 16; ++t) {
            const float* x0 = o.p + 2 * (t0 + t) * o.sk + r0;
            _mm512_store_si512(block[t], t < nt ? bf16_pair16(x0, 2 * (t0 + t) + 1 < K ? x0 + o.sk : nullptr,
                                                               static_cast<int>(nr))
                                                : _mm512_setzero_si512());
          }
          transpose16(reinterpret_cast<const float*>(&block[0][0]), 16, reinterpret_cast<float*>(d), 16);
          continue;
        }
#endif
        std::fill(d, d + 256, 0u);
        for (std::int64_t t = 0; t < nt; ++t) {
          const float* x0 = o.p + 2 * (t0 + t) * o.sk + r0 * o.sr;
          const float* x1 = 2 * (t0 + t) + 1 < K ? x0 + o.sk : nullptr;
          for (std::int64_t r = 0; r < nr; ++r) d[r * 16 + t] = bf16_pair(x0[r * o.sr], x1 ? x1[r * o.sr] : 0.0f);
        }
      }
    }
  };
  if (parallel)
    parallel_for(ceil_div(T, 16), 1, pack);
  else
    pack(0, ceil_div(T, 16));
}

/// The bf16 GEMM on AMX tiles: operands packed in bf16_amx.hpp's layouts (K padded to blocks of
/// 32 values, A rows to blocks of 32, B to an even number of 16-column panels).
inline void gemm_bf16_tiles(const Bf16Operand& a, const Bf16Operand& b, const float* bias, float* C, std::int64_t ldc,
                            std::int64_t M, std::int64_t N, std::int64_t K, bool parallel) {
  const std::int64_t Tp = ceil_div(K, 32) * 16, Mp = ceil_div(M, 32) * 32, panels = ceil_div(N, 32) * 2;
  thread_local Bf16Words pa, pb;
  pack_bf16_amx_a(a, M, K, pa, parallel, Tp, Mp);
  pack_bf16(b, N, K, 16, pb, parallel, Tp, panels);
  gemm_bf16_amx(pa.data(), pb.data(), Tp, bias, C, ldc, M, N, parallel);
}

/// The word of A's row r at pair t: 4 bytes at rows[r] + t·step (row-major rows: step 4; a
/// strip of 8 rows: step 32).
inline std::uint32_t bf16_a_word(const unsigned char* row, std::int64_t t, std::int64_t step) {
  std::uint32_t w;
  std::memcpy(&w, row + t * step, sizeof w);
  return w;
}

/// The 8x32 register tile over pairs [t0, t1): A's 8 rows `a` (bf16_a_word), B panels `b0`,
/// `b1` (16 words per pair each). Starts from `out` (row stride 32) when `resume`, else from
/// zero, and writes the tile back: the chain of a longer K continues exactly where it stopped.
inline void bf16_tile(const unsigned char* const* a, std::int64_t step, const std::uint32_t* b0,
                      const std::uint32_t* b1, std::int64_t t0, std::int64_t t1, bool resume, float* out) {
#if QNUM_GEMM_BF16_NATIVE
  __m512 c[kBMR][2];  // fully unrolled below, so the 16 accumulators stay in registers
#pragma GCC unroll 8
  for (int r = 0; r < kBMR; ++r) {
    c[r][0] = resume ? _mm512_loadu_ps(out + r * kBNR) : _mm512_setzero_ps();
    c[r][1] = resume ? _mm512_loadu_ps(out + r * kBNR + 16) : _mm512_setzero_ps();
  }
  for (std::int64_t t = t0; t < t1; ++t) {
    const __m512bh v0 = (__m512bh)_mm512_loadu_si512(b0 + t * 16);
    const __m512bh v1 = (__m512bh)_mm512_loadu_si512(b1 + t * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kBMR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(bf16_a_word(a[r], t, step)));
      c[r][0] = _mm512_dpbf16_ps(c[r][0], av, v0);
      c[r][1] = _mm512_dpbf16_ps(c[r][1], av, v1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kBMR; ++r) {
    _mm512_storeu_ps(out + r * kBNR, c[r][0]);
    _mm512_storeu_ps(out + r * kBNR + 16, c[r][1]);
  }
#else
  // The same chain per lane on FMAs: a product of two bf16 values is exact in fp32, so one
  // fma per operand pair rounds as vdpbf16ps does; the flush is bf16_ftz.
  alignas(64) float acc[kBMR][kBNR] = {};
  if (resume) std::memcpy(acc, out, sizeof acc);
  const auto lo = [](std::uint32_t w) { return std::bit_cast<float>(w << 16); };
  const auto hi = [](std::uint32_t w) { return std::bit_cast<float>(w & 0xFFFF0000u); };
  for (std::int64_t t = t0; t < t1; ++t) {
    alignas(64) float bl[kBNR], bh[kBNR];
    for (int j = 0; j < 16; ++j) {
      bl[j] = lo(b0[t * 16 + j]), bh[j] = hi(b0[t * 16 + j]);
      bl[16 + j] = lo(b1[t * 16 + j]), bh[16 + j] = hi(b1[t * 16 + j]);
    }
    for (int r = 0; r < kBMR; ++r) {
      const std::uint32_t w = bf16_a_word(a[r], t, step);
      const float al = lo(w), ah = hi(w);
      for (int j = 0; j < kBNR; ++j) {
        acc[r][j] = bf16_ftz(std::fma(al, bl[j], bf16_ftz(std::fma(ah, bh[j], acc[r][j]))));
      }
    }
  }
  std::memcpy(out, acc, sizeof acc);
#endif
}

/// C[M,N] = op(A)·op(B)ᵀ (+ bias[N]) on the packed operands; `a`/`b` give element (i,k) / (j,k).
inline void gemm_bf16_impl(const Bf16Operand& a, const Bf16Operand& b, const float* bias, float* C, std::int64_t ldc,
                           std::int64_t M, std::int64_t N, std::int64_t K) {
  gemm_check("gemm_bf16", M, N, K, a.p, b.p, C);
  const bool parallel = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= kGemmSerialFlops;
  if (bf16_gemm_chain() == Bf16Chain::tiles) {
    gemm_bf16_tiles(a, b, bias, C, ldc, M, N, K, parallel);
    return;
  }
  // Reused buffers, packed once per call. A rows contiguous along K (NT, NN) are converted in
  // place order (row-major halves, no interleave); A read transposed (TN) goes into strips of
  // 8 rows, which that layout reads contiguously.
  thread_local Bf16Halves pa_rows;
  thread_local Bf16Words pa_strips, pb;
  const bool a_rows = a.sk == 1;
  if (a_rows)
    pack_bf16_rows(a, M, K, pa_rows, parallel);
  else
    pack_bf16(a, M, K, kBMR, pa_strips, parallel);
  pack_bf16(b, N, K, 16, pb, parallel);
  const std::int64_t T = ceil_div(K, 2);
  const auto* par = reinterpret_cast<const unsigned char*>(pa_rows.data());
  const auto* pas = reinterpret_cast<const unsigned char*>(pa_strips.data());
  const std::uint32_t* pbp = pb.data();
  const std::int64_t npanels = ceil_div(N, 16);
  // Tiles of 64 rows x 256 columns: B panels stay in L2 while the row strips pass over them.
  thread_local std::vector<std::uint32_t> zeros;  // the missing second panel of an odd panel count
  if (npanels % 2 == 1) zeros.assign(static_cast<std::size_t>(T * 16), 0u);
  const std::uint32_t* pz = zeros.data();
  gemm_tiles(
      M, N, 8 * kBMR, 8 * kBNR,
      [=](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
        alignas(64) float tile[kBMR * kBNR];
        // K in chunks of kBTC pairs so the tile's A rows and B panels stay in L2; between
        // chunks the partial sums wait in C (fp32: the accumulator itself), so the chain and
        // its bits are those of one pass.
        for (std::int64_t t0 = 0; t0 < T; t0 += kBTC) {
          const std::int64_t t1 = std::min(T, t0 + kBTC);
          const bool last = t1 == T;
          for (std::int64_t j = j0; j < j1; j += kBNR) {
            const std::int64_t p = j / 16;
            const std::uint32_t* b0 = pbp + p * T * 16;
            const std::uint32_t* b1 = p + 1 < npanels ? pbp + (p + 1) * T * 16 : pz;
            const std::int64_t nc = std::min<std::int64_t>(kBNR, j1 - j);
            for (std::int64_t i = i0; i < i1; i += kBMR) {
              const std::int64_t mr = std::min<std::int64_t>(kBMR, i1 - i);
              const unsigned char* rows[kBMR];
              for (std::int64_t r = 0; r < kBMR; ++r)  // rows past M repeat the last (their results are dropped)
                rows[r] = a_rows ? par + std::min(i + r, M - 1) * 4 * T : pas + ((i / kBMR) * T * kBMR + r) * 4;
              if (t0 > 0)
                for (std::int64_t r = 0; r < mr; ++r)
                  std::memcpy(tile + r * kBNR, C + (i + r) * ldc + j, static_cast<std::size_t>(nc) * sizeof(float));
              bf16_tile(rows, a_rows ? 4 : 4 * kBMR, b0, b1, t0, t1, t0 > 0, tile);
              for (std::int64_t r = 0; r < mr; ++r) {
                float* c = C + (i + r) * ldc + j;
                const float* s = tile + r * kBNR;
                if (bias && last)
                  for (std::int64_t q = 0; q < nc; ++q) c[q] = s[q] + bias[j + q];
                else
                  std::memcpy(c, s, static_cast<std::size_t>(nc) * sizeof(float));
              }
            }
          }
        }
      },
      parallel);
}

}  // namespace detail

/// C[M,N] = A[M,K]·B[N,K]ᵀ in bf16 products with fp32 accumulation (see the file comment).
inline void gemm_bf16_nt(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_bf16_impl({A, K, 1}, {B, K, 1}, nullptr, C, N, M, N, K);
}

/// As gemm_bf16_nt, plus bias[N] added to every row after the product (rounded once).
inline void gemm_bf16_nt_bias(const float* A, const float* B, const float* bias, float* C, std::int64_t M,
                              std::int64_t N, std::int64_t K) {
  detail::gemm_bf16_impl({A, K, 1}, {B, K, 1}, bias, C, N, M, N, K);
}

/// C[M,N] = A[M,K]·B[K,N].
inline void gemm_bf16_nn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_bf16_impl({A, K, 1}, {B, 1, N}, nullptr, C, N, M, N, K);
}

/// C[M,N] = A[K,M]ᵀ·B[K,N].
inline void gemm_bf16_tn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  detail::gemm_bf16_impl({A, 1, M}, {B, 1, N}, nullptr, C, N, M, N, K);
}

/// The three forms on blocks of larger row-major tensors (rows lda, ldb, ldc floats apart), as
/// gemm_f32_strided: one head of a [T, heads·D] activation. Same chain and bits as the dense forms.
inline void gemm_bf16_strided(GemmForm form, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                              float* C, std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K) {
  const bool nt = form == GemmForm::nt, a_t = form == GemmForm::tn;
  const std::int64_t a_row = a_t ? M : K, b_row = nt ? K : N;
  detail::require(lda >= a_row && ldb >= b_row && ldc >= N, "gemm_bf16_strided: strides lda=", lda, " ldb=", ldb,
                  " ldc=", ldc, " are shorter than the rows (", a_row, ", ", b_row, ", ", N, ")");
  const detail::Bf16Operand a = a_t ? detail::Bf16Operand{A, 1, lda} : detail::Bf16Operand{A, lda, 1};
  const detail::Bf16Operand b = nt ? detail::Bf16Operand{B, ldb, 1} : detail::Bf16Operand{B, 1, ldb};
  detail::gemm_bf16_impl(a, b, nullptr, C, ldc, M, N, K);
}

}  // namespace qnum
