// Keeping freed memory in the process (glibc malloc).
//
// A training step allocates and frees a few hundred MB of activations and gradients. With
// glibc's defaults, blocks above the (adaptive) mmap threshold go back to the kernel when
// freed, and the heap top is trimmed once 2x that threshold is free, so every step faults
// the same memory in again and the kernel zeroes each page first (measured on bert-tiny:
// ~15% of a step's CPU time, docs/perf.md). retain_freed_memory() makes malloc serve every
// block below 1 GiB from the heap and never trim it, so a step reuses the previous step's
// pages, as PyTorch's caching allocators do on GPUs. Process-wide, hence explicit: the
// trainers and the benchmarks call it; a library user may or may not want it.
#pragma once

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace qnum {

/// Sets malloc to keep freed memory for reuse (glibc: M_MMAP_THRESHOLD 1 GiB, no trimming);
/// returns false where the C library has no such setting (nothing changes then).
inline bool retain_freed_memory() {
#if defined(__GLIBC__)
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace qnum
