// Threading for kernels: a process-wide thread count and a deterministic parallel loop.
// Work is cut into chunks that depend only on the problem size and the grain, never on
// the thread count, so every result is bit-identical for any number of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "qnum/core/error.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace qnum {

namespace detail {
inline std::atomic<int>& thread_setting() {
  static std::atomic<int> n{0};  // 0: the OpenMP default (all cores)
  return n;
}
}  // namespace detail

/// Sets the number of threads kernels may use (>= 1). Without OpenMP everything is serial.
inline void set_num_threads(int n) {
  detail::require(n >= 1, "set_num_threads: thread count ", n, " must be >= 1");
  detail::thread_setting() = n;
}

/// The number of threads kernels use.
inline int num_threads() {
#if defined(_OPENMP)
  const int n = detail::thread_setting();
  return n > 0 ? n : omp_get_max_threads();
#else
  return 1;
#endif
}

/// Calls f(begin, end) over [0, n) in chunks of `grain` (the last may be shorter), in
/// parallel when it pays. Chunk boundaries depend only on n and grain.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<std::int64_t>(num_threads(), chunks));
  if (threads <= 1) {
    for (std::int64_t c = 0; c < chunks; ++c) f(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) f(c * grain, std::min(n, (c + 1) * grain));
#endif
}

}  // namespace qnum
