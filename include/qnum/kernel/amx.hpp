// AMX (Advanced Matrix Extensions) at run time: whether this CPU has the tile unit and its
// int8 / bf16 products, whether the OS saves the tile state (XCR0) and has granted this process
// the right to use it (Linux's arch_prctl(ARCH_REQ_XCOMP_PERM)), and the tile configuration the
// GEMM kernels load. One implementation for every AMX kernel (gemm/int8_amx.hpp,
// gemm/bf16_amx.hpp); QNUM_MAX_ISA caps it as it caps the quantize dispatch (kernel/dispatch.hpp):
// any level below `amx` turns the tiles off.
//
// The kernels themselves exist only in translation units compiled for AMX (-march=native on a
// Sapphire Rapids or later, or -mamx-tile -mamx-int8 -mamx-bf16): kAmxCompiled says so; the
// run-time check then decides whether this machine and process may run them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__AMX_TILE__)
#include <immintrin.h>
#endif

namespace qnum::kernel {

/// Whether this translation unit was compiled with the AMX tile instructions.
inline constexpr bool kAmxCompiled =
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__) && defined(__AVX512F__)
    true;
#else
    false;
#endif

/// What the CPU and OS offer, read once.
struct AmxSupport {
  bool cpu_tile = false, cpu_int8 = false, cpu_bf16 = false;  // CPUID.(7,0):EDX bits 24, 25, 22
  bool os_saves_tiles = false;                                 // XCR0 bits 17 (XTILECFG), 18 (XTILEDATA)
  bool permitted = false;                                      // arch_prctl granted XTILEDATA
  bool usable() const { return cpu_tile && cpu_int8 && cpu_bf16 && os_saves_tiles && permitted; }
};

namespace detail {

inline AmxSupport probe_amx() {
  AmxSupport s;
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return s;
  __cpuid_count(7, 0, a, b, c, d);
  s.cpu_bf16 = (d >> 22) & 1u;
  s.cpu_tile = (d >> 24) & 1u;
  s.cpu_int8 = (d >> 25) & 1u;
  __cpuid(1, a, b, c, d);
  if (!s.cpu_tile || !((c >> 27) & 1u)) return s;  // OSXSAVE: xgetbv is allowed
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  s.os_saves_tiles = ((lo >> 17) & 3u) == 3u;
#if defined(__linux__)
  // Linux hands out the 8 KiB tile state only on request (kernel 5.16+); asking twice is harmless.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (s.os_saves_tiles) s.permitted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#endif
#endif
  return s;
}

/// True unless QNUM_MAX_ISA names a level below amx (baseline, sse2, avx2, avx512).
inline bool amx_allowed_by_cap() {
  const char* cap = std::getenv("QNUM_MAX_ISA");
  if (cap == nullptr || *cap == '\0') return true;
  return std::strcmp(cap, "amx") == 0;
}

inline const AmxSupport& amx_support_once() {
  static const AmxSupport s = probe_amx();
  return s;
}

inline bool select_amx() {
  const AmxSupport& s = amx_support_once();
  const bool allowed = amx_allowed_by_cap();
  const char* cap = std::getenv("QNUM_MAX_ISA");
  if (cap != nullptr && std::strcmp(cap, "amx") == 0 && !(s.usable() && kAmxCompiled))
    std::fprintf(stderr, "qnum: QNUM_MAX_ISA=amx, but %s; running the widest other kernels\n",
                 !s.cpu_tile                ? "this CPU has no AMX"
                 : !s.os_saves_tiles        ? "the OS does not enable the AMX tile state"
                 : !s.permitted             ? "the OS refused this process the AMX tile state"
                 : !kAmxCompiled            ? "this build has no AMX kernels (compile for the CPU: QNUM_NATIVE)"
                                            : "this CPU lacks AMX-INT8 or AMX-BF16");
  return allowed && s.usable() && kAmxCompiled;
}

}  // namespace detail

/// The CPU and OS side of AMX, probed (and the tile permission asked for) once per process.
inline const AmxSupport& amx_support() { return detail::amx_support_once(); }

/// Whether the GEMM kernels use AMX tiles: compiled in, usable here, not capped by QNUM_MAX_ISA.
/// Decided once per process (QNUM_MAX_ISA=amx on a machine without AMX says so once on stderr).
inline bool amx_enabled() {
  static const bool on = detail::select_amx();
  return on;
}

#if defined(__AMX_TILE__)
/// The 64-byte tile configuration (palette 1): per tile, bytes per row and rows.
struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

/// Every GEMM kernel's tiles: 0-3 the 2x2 accumulators (16 rows x 64 bytes), 4-5 A (16 rows x
/// 64 bytes), 6-7 B (16 rows x 64 bytes). Loaded per thread at the start of each block of work
/// (the configuration is thread state) and released after it, so a context switch in between
/// saves no tile data.
class AmxTiles {
 public:
  AmxTiles() {
    AmxTileConfig c;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
  }
  ~AmxTiles() { _tile_release(); }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};

/// Accumulators 0-3 (a 32x32 block: 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right)
/// set to zero, loaded from or stored to four 16-row pieces at p[q] (row stride `stride` bytes).
inline void amx_zero_block() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
inline void amx_load_block(void* const (&p)[4], std::int64_t stride) {
  _tile_loadd(0, p[0], stride);
  _tile_loadd(1, p[1], stride);
  _tile_loadd(2, p[2], stride);
  _tile_loadd(3, p[3], stride);
}
inline void amx_store_block(void* const (&p)[4], std::int64_t stride) {
  _tile_stored(0, p[0], stride);
  _tile_stored(1, p[1], stride);
  _tile_stored(2, p[2], stride);
  _tile_stored(3, p[3], stride);
}

/// One K step of a 32x32 block: A's two 16-row tiles into 4 and 5, B's two 16-column tiles
/// into 6 and 7, then `products` (the family's four tile products, 0 += 4·6, 1 += 4·7,
/// 2 += 5·6, 3 += 5·7: tile numbers are immediates, so the caller names the instruction).
template <class Products>
inline void amx_block_step(const void* a0, const void* a1, std::int64_t a_stride, const void* b0, const void* b1,
                           std::int64_t b_stride, Products&& products) {
  _tile_loadd(4, a0, a_stride);
  _tile_loadd(5, a1, a_stride);
  _tile_loadd(6, b0, b_stride);
  _tile_loadd(7, b1, b_stride);
  products();
}
#endif

}  // namespace qnum::kernel
