// Shared pieces of the GEMM kernels: argument checks, the output tiling that makes every
// kernel's bits independent of the thread count (tile boundaries depend only on the sizes), and
// the 64-byte aligned allocator of packed panels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

#include "qnum/core/error.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum {

/// The three product forms: C = A·Bᵀ (nt), A·B (nn), Aᵀ·B (tn).
enum class GemmForm { nt, nn, tn };

}  // namespace qnum

namespace qnum::detail {

inline void gemm_check(const char* what, std::int64_t M, std::int64_t N, std::int64_t K, const void* A, const void* B,
                       const void* C) {
  require(M > 0 && N > 0 && K > 0, what, ": sizes M=", M, " N=", N, " K=", K, " must all be positive");
  require(M <= (std::int64_t{1} << 31) && N <= (std::int64_t{1} << 31) && K <= (std::int64_t{1} << 31), what,
          ": sizes M=", M, " N=", N, " K=", K, " must be <= 2^31");
  require(A != nullptr && B != nullptr && C != nullptr, what, ": null buffer");
}

/// Minimal 64-byte aligned allocator: packed panels start on a cache line, so no vector load
/// of the micro-kernel splits across two lines.
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const {
    return true;
  }
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Below this many flops (2·M·N·K) an fp32 GEMM runs on the calling thread: the training
/// loops of small models (JSC: 256x64x32 and smaller, thousands per epoch) otherwise pay an
/// OpenMP fork/join per product, which costs more than the product itself (and, on a busy
/// machine, a scheduler time slice each). Tiles are the same either way, so are the bits.
inline constexpr double kGemmSerialFlops = 4.0 * 1024 * 1024;

/// Tiles of the output: (row chunk, column chunk) pairs, boundaries fixed by the sizes only;
/// `parallel` false runs them in order on this thread (same tiles, same results).
template <class F>
void gemm_tiles(std::int64_t M, std::int64_t N, std::int64_t mc, std::int64_t nc, F&& f, bool parallel = true) {
  const std::int64_t mt = ceil_div(M, mc), nt = ceil_div(N, nc);
  if (!parallel) {
    for (std::int64_t t = 0; t < mt * nt; ++t) {
      const std::int64_t i0 = (t / nt) * mc, j0 = (t % nt) * nc;
      f(i0, std::min(M, i0 + mc), j0, std::min(N, j0 + nc));
    }
    return;
  }
  parallel_for(mt * nt, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t i0 = (t / nt) * mc, j0 = (t % nt) * nc;
      f(i0, std::min(M, i0 + mc), j0, std::min(N, j0 + nc));
    }
  });
}

}  // namespace qnum::detail
