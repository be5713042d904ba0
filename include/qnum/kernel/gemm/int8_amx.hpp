// The int8 GEMM on AMX-INT8 tiles (TDPBSSD: int8 x int8 -> int32), for gemm/int8.hpp where
// kernel::amx_enabled(). Integer sums are exact (K <= kGemmInt8MaxK), so it gives the VNNI
// kernel's int32 bits and hands them to the same register epilogue, store(row, j, nr, lo, hi)
// (gemm/int8_vnni.hpp). Signed x signed needs no u8 offset and no column-sum correction.
//
// Layouts: A row-major, Kp bytes a row (K rounded up to 64, one tile row; the pad zero), rows
// padded to a multiple of 32. When K is a multiple of 64 and A starts on a cache line, the tiles
// read A in place and only its last partial block of 32 rows is copied (a tile row split across
// two lines costs two loads). B in pack_b_vnni's 32-column panels [Kp/4][32][4] (packed here
// with register transposes): each 16-column half loads as one tile of 64-byte rows 128 bytes
// apart. Buffers are 64-byte aligned for the same reason.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/amx.hpp"
#include "qnum/kernel/gemm/tiles.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/kernel/transpose.hpp"

namespace qnum::detail {

using AlignedS8 = std::vector<std::int8_t, CacheAligned<std::int8_t>>;

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && defined(__AVX512BW__)
inline constexpr bool kGemmS8AmxCompiled = true;

/// A's rows [0, R) (row stride K) -> rows of Kp bytes, zero past K, and zero rows up to a
/// multiple of 32.
inline void pack_a_amx(const std::int8_t* A, std::int64_t R, std::int64_t K, std::int64_t Kp, AlignedS8& p) {
  if (R == 0) return;  // every row is read in place (an empty buffer's data() may be null: no memset on it)
  const std::int64_t Rp = ceil_div(R, 32) * 32;
  p.resize(static_cast<std::size_t>(Rp * Kp));
  std::int8_t* pd = p.data();
  std::memset(pd + R * Kp, 0, static_cast<std::size_t>((Rp - R) * Kp));
  parallel_for(R, 64, [=](std::int64_t rb, std::int64_t re) {
    for (std::int64_t r = rb; r < re; ++r) {
      std::memcpy(pd + r * Kp, A + r * K, static_cast<std::size_t>(K));
      std::memset(pd + r * Kp + K, 0, static_cast<std::size_t>(Kp - K));
    }
  });
}

/// B [N,K] -> pack_b_vnni's panels with Kp a multiple of 64: per 16 columns and 64 bytes of K,
/// 16 masked row loads and a 32-bit transpose (pack_b_vnni's copy per 4 bytes is several times
/// slower, and at small M packing B is much of the work).
inline void pack_b_amx(const std::int8_t* B, std::int64_t N, std::int64_t K, std::int64_t Kp, AlignedS8& p) {
  const std::int64_t halves = ceil_div(N, 32) * 2;
  p.resize(static_cast<std::size_t>(halves * 16 * Kp));
  std::int8_t* pd = p.data();
  parallel_for(halves, 2, [=](std::int64_t hb, std::int64_t he) {
    alignas(64) float rows[16][16];  // 16 columns' 64 bytes of K, as 32-bit groups
    for (std::int64_t h = hb; h < he; ++h) {
      std::int8_t* panel = pd + (h / 2) * Kp * 32 + (h % 2) * 64;
      const std::int64_t nr = std::clamp<std::int64_t>(N - h * 16, 0, 16);
      for (std::int64_t k = 0; k < Kp; k += 64) {
        const std::int64_t kr = std::min<std::int64_t>(64, std::max<std::int64_t>(K - k, 0));
        const __mmask64 m = kr >= 64 ? ~__mmask64{0} : (__mmask64{1} << kr) - 1;
        for (std::int64_t r = 0; r < 16; ++r)
          _mm512_store_si512(rows[r],
                             r < nr ? _mm512_maskz_loadu_epi8(m, B + (h * 16 + r) * K + k) : _mm512_setzero_si512());
        transpose16(&rows[0][0], 16, reinterpret_cast<float*>(panel + k * 32), 32);
      }
    }
  });
}

/// gemm_s8_amx on B packed already (a weight packed once): pack_b_vnni's panels with row
/// stride Kp, a multiple of 64, starting on a cache line.
template <class Store>
void gemm_s8_amx_packed(const std::int8_t* A, std::int64_t M, std::int64_t K, const std::int8_t* bp, std::int64_t N,
                        std::int64_t Kp, Store&& store) {
  require(kernel::amx_enabled(), "gemm_s8_amx: AMX is not enabled in this process (kernel/amx.hpp)");
  require(Kp % 64 == 0 && Kp >= K && reinterpret_cast<std::uintptr_t>(bp) % 64 == 0,
          "gemm_s8_amx_packed: B panels need a row stride that is a multiple of 64 >= K on a cache line, got Kp=", Kp);
  const bool aligned = K == Kp && reinterpret_cast<std::uintptr_t>(A) % 64 == 0;
  const std::int64_t in_place = aligned ? (M / 32) * 32 : 0;  // rows the tiles read from A itself
  thread_local AlignedS8 ap_buf;                              // reused across calls: no page faults
  pack_a_amx(A + in_place * K, M - in_place, K, Kp, ap_buf);
  const std::int8_t* ap = ap_buf.data();  // workers see their own thread_locals: pass the pointer
  // Tiles of 128 rows x 256 columns, row blocks outside: a block of 32 rows of A meets the
  // tile's 8 B panels while hot, and the panels stay in L2 across the tile's 4 row blocks.
  gemm_tiles(M, N, 128, 256, [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    const kernel::AmxTiles tiles;
    alignas(64) std::int32_t out[32 * 32];
    for (std::int64_t i = i0; i < i1; i += 32) {
      const bool own = i < in_place;
      const std::int8_t* a = own ? A + i * K : ap + (i - in_place) * Kp;
      const std::int64_t lda = own ? K : Kp;
      const std::int64_t mr = std::min<std::int64_t>(32, i1 - i);
      for (std::int64_t j = j0; j < j1; j += 32) {
        const std::int8_t* b = bp + (j / 32) * Kp * 32;
        const int nr = static_cast<int>(std::min<std::int64_t>(32, j1 - j));
        kernel::amx_zero_block();
        for (std::int64_t k = 0; k < Kp; k += 64)  // k/4 groups from k: 128 bytes each
          kernel::amx_block_step(a + k, a + 16 * lda + k, lda, b + k * 32, b + k * 32 + 64, 128, [] {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
          });
        void* const block[4] = {out, out + 16, out + 16 * 32, out + 16 * 32 + 16};
        kernel::amx_store_block(block, 128);
        for (std::int64_t r = 0; r < mr; ++r)
          store(i + r, j, nr, _mm512_load_si512(out + r * 32), _mm512_load_si512(out + r * 32 + 16));
      }
    }
  });
}

/// The AMX int8 GEMM: Σ_k A[i,k]·B[j,k] in int32 over 32x32 blocks of 2x2 tiles (the whole K
/// in the tiles), each row of a block handed to store(row, j, nr, lo, hi) as gemm_s8_vnni does.
template <class Store>
void gemm_s8_amx(const std::int8_t* A, const std::int8_t* B, std::int64_t M, std::int64_t N, std::int64_t K,
                 Store&& store) {
  require(kernel::amx_enabled(), "gemm_s8_amx: AMX is not enabled in this process (kernel/amx.hpp)");
  const std::int64_t Kp = ceil_div(K, 64) * 64;
  thread_local AlignedS8 bp_buf;  // reused across calls: no page faults
  pack_b_amx(B, N, K, Kp, bp_buf);
  gemm_s8_amx_packed(A, M, K, bp_buf.data(), N, Kp, store);
}
#else
inline constexpr bool kGemmS8AmxCompiled = false;

template <class Store>
void gemm_s8_amx(const std::int8_t*, const std::int8_t*, std::int64_t, std::int64_t, std::int64_t, Store&&) {
  fail("gemm_s8_amx: this build has no AMX-INT8 kernels");
}
template <class Store>
void gemm_s8_amx_packed(const std::int8_t*, std::int64_t, std::int64_t, const std::int8_t*, std::int64_t, std::int64_t,
                        Store&&) {
  fail("gemm_s8_amx_packed: this build has no AMX-INT8 kernels");
}
#endif

}  // namespace qnum::detail
