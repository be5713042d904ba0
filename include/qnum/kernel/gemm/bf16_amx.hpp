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
// Layouts (packed by bf16.hpp): A row-major, `Tp` pair words a row (Tp a multiple of 16, the
// pad zero) and rows padded to a multiple of 32; B in panels of 16 columns, each pair t of a
// panel 16 words (64 bytes: one tile row), the panel count even.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "qnum/kernel/amx.hpp"
#include "qnum/kernel/gemm/tiles.hpp"

namespace qnum::detail {

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__)
inline constexpr bool kGemmBf16AmxCompiled = true;

/// C[M,N] (+ bias) from packed A (`pa`) and B (`pb`): 32x32 output blocks of 2x2 tiles, each
/// accumulating over the whole K in its tiles, so every element is one chain.
inline void gemm_bf16_amx(const std::uint32_t* pa, const std::uint32_t* pb, std::int64_t Tp, const float* bias,
                          float* C, std::int64_t ldc, std::int64_t M, std::int64_t N, bool parallel) {
  require(kernel::amx_enabled(), "gemm_bf16_amx: AMX is not enabled in this process (kernel/amx.hpp)");
  const std::int64_t a_stride = Tp * 4;  // bytes between A rows
  // Tiles of 64 rows x 256 columns: a panel pair is read by both row blocks while in L2.
  gemm_tiles(
      M, N, 64, 256,
      [=](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
        const kernel::AmxTiles tiles;
        alignas(64) float out[32 * 32];
        for (std::int64_t j = j0; j < j1; j += 32) {
          const std::uint32_t* b0 = pb + (j / 16) * Tp * 16;
          const std::uint32_t* b1 = b0 + Tp * 16;
          const std::int64_t nc = std::min<std::int64_t>(32, j1 - j);
          for (std::int64_t i = i0; i < i1; i += 32) {
            const std::uint32_t* a0 = pa + i * Tp;
            const std::uint32_t* a1 = a0 + 16 * Tp;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (std::int64_t t = 0; t < Tp; t += 16) {
              _tile_loadd(4, a0 + t, a_stride);
              _tile_loadd(5, a1 + t, a_stride);
              _tile_loadd(6, b0 + t * 16, 64);
              _tile_loadd(7, b1 + t * 16, 64);
              _tile_dpbf16ps(0, 4, 6);
              _tile_dpbf16ps(1, 4, 7);
              _tile_dpbf16ps(2, 5, 6);
              _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, out, 128);
            _tile_stored(1, out + 16, 128);
            _tile_stored(2, out + 16 * 32, 128);
            _tile_stored(3, out + 16 * 32 + 16, 128);
            const std::int64_t mr = std::min<std::int64_t>(32, i1 - i);
            for (std::int64_t r = 0; r < mr; ++r) {
              float* c = C + (i + r) * ldc + j;
              const float* s = out + r * 32;
              if (bias)
                for (std::int64_t q = 0; q < nc; ++q) c[q] = s[q] + bias[j + q];
              else
                std::memcpy(c, s, static_cast<std::size_t>(nc) * sizeof(float));
            }
          }
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
