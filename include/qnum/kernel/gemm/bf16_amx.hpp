// The bf16 GEMM on AMX-BF16 tiles (TDPBF16PS), for gemm/bf16.hpp where kernel::amx_enabled().
//
// TDPBF16PS's arithmetic, measured on Sapphire Rapids (5.1 M random lanes over the whole
// exponent range, every one equal) and written as the current SDM's pseudo-code, is not
// vdpbf16ps's chain: for each 32-value block of K, two fp32 FMA chains start from zero, one over
// the block's even elements and one over its odd elements, and their sum is added to the
// running sum (DAZ, FTZ and nearest-even at every step, whatever MXCSR says). bf16.hpp's
// bf16_dot_reference_tiles is that chain in scalar C++ (K padded with zeros to a multiple of
// 32: the pad takes part, as in the tiles), and this kernel is bit-identical to it.
//
// Layouts (packed by bf16.hpp), every tile one contiguous KiB (strided tile rows meet cache-set
// conflicts): A in strips of 16 rows, `Tp` pairs a row (a multiple of 16, the pad zero), each
// strip a block per step of 16 pairs, row r's 16 pair words at word 16·r; rows padded to a
// multiple of 32. B in panels of 16 columns, each pair t of a panel 16 words (a tile row), the
// panel count even.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qnum/kernel/amx.hpp"
#include "qnum/kernel/gemm/tiles.hpp"

namespace qnum::detail {

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__)
inline constexpr bool kGemmBf16AmxCompiled = true;

#ifndef QNUM_AMX_BF16_KC
#define QNUM_AMX_BF16_KC 128
#endif
/// K in chunks of this many pairs: a 32-row strip of A (16 KiB) stays in L1 while it meets
/// every column block of the output tile.
inline constexpr std::int64_t kAmxBf16Kc = QNUM_AMX_BF16_KC;

/// C[M,N] (+ bias) from packed A (`pa`) and B (`pb`), over output tiles of 64 x 256: per K
/// chunk, each 32x32 block's 2x2 accumulator tiles are loaded from the tile's fp32 sums,
/// advanced and stored back. A stored fp32 sum reloads exactly, so every element is still the
/// one chain of bf16_dot_reference_tiles.
inline void gemm_bf16_amx(const std::uint32_t* pa, const std::uint32_t* pb, std::int64_t Tp, const float* bias,
                          float* C, std::int64_t ldc, std::int64_t M, std::int64_t N, bool parallel) {
  require(kernel::amx_enabled(), "gemm_bf16_amx: AMX is not enabled in this process (kernel/amx.hpp)");
  constexpr std::int64_t kTm = 64, kTn = 256;
  gemm_tiles(
      M, N, kTm, kTn,
      [=](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
        const kernel::AmxTiles tiles;
        // The tile's fp32 sums between K chunks, a KiB per accumulator tile.
        thread_local std::vector<float, CacheAligned<float>> sums_buf(static_cast<std::size_t>(kTm * kTn));
        float* sums = sums_buf.data();
        for (std::int64_t t0 = 0; t0 < Tp; t0 += kAmxBf16Kc) {
          const std::int64_t t1 = std::min(Tp, t0 + kAmxBf16Kc);
          for (std::int64_t i = i0; i < i1; i += 32) {
            const std::uint32_t* a0 = pa + i * Tp;  // strip i/16: (Tp/16) blocks of 256 words
            const std::uint32_t* a1 = a0 + 16 * Tp;
            for (std::int64_t j = j0; j < j1; j += 32) {
              const std::uint32_t* b0 = pb + (j / 16) * Tp * 16;
              const std::uint32_t* b1 = b0 + Tp * 16;
              float* s = sums + ((i - i0) / 32 * (kTn / 32) + (j - j0) / 32) * 1024;  // 4 tiles of 256
              void* const block[4] = {s, s + 256, s + 512, s + 768};
              if (t0 == 0)
                kernel::amx_zero_block();
              else
                kernel::amx_load_block(block, 64);
              for (std::int64_t t = t0; t < t1; t += 16)
                kernel::amx_block_step(a0 + t * 16, a1 + t * 16, 64, b0 + t * 16, b1 + t * 16, 64, [] {
                  _tile_dpbf16ps(0, 4, 6);
                  _tile_dpbf16ps(1, 4, 7);
                  _tile_dpbf16ps(2, 5, 6);
                  _tile_dpbf16ps(3, 5, 7);
                });
              kernel::amx_store_block(block, 64);
            }
          }
        }
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; j += 16) {  // one accumulator tile row: 16 columns
            const std::int64_t li = i - i0, lj = j - j0;
            const float* s = sums + ((li / 32) * (kTn / 32) + lj / 32) * 1024 + ((li % 32) / 16 * 2 + (lj % 32) / 16) * 256 +
                             (li % 16) * 16;
            float* c = C + i * ldc + j;
            const std::int64_t nc = std::min<std::int64_t>(16, j1 - j);
            if (bias)
              for (std::int64_t q = 0; q < nc; ++q) c[q] = s[q] + bias[j + q];
            else
              std::memcpy(c, s, static_cast<std::size_t>(nc) * sizeof(float));
          }
      },
      parallel);
}
#else
inline constexpr bool kGemmBf16AmxCompiled = false;

inline void gemm_bf16_amx(const std::uint32_t*, const std::uint32_t*, std::int64_t, const float*, float*, std::int64_t,
                          std::int64_t, std::int64_t, bool) {
  fail("gemm_bf16_amx: this build has no AMX-BF16 kernels");
}
#endif

}  // namespace qnum::detail
