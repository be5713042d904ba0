// Warp helpers of the one-warp-per-block/row/tile kernels (internal; not installed). The item
// loop variable is the same on every lane of a warp (item = global thread / 32), so each loop
// is warp-uniform and every lane reaches every __shfl_xor_sync.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace qnum::cuda::detail {

inline constexpr int kWarp = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ inline std::size_t warp_id() {
  return (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
}
__device__ inline std::size_t warp_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x / kWarp; }
__device__ inline int lane_id() { return static_cast<int>(threadIdx.x % kWarp); }

__device__ inline std::uint32_t warp_max(std::uint32_t v) {
  for (int off = 16; off > 0; off /= 2) v = max(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}
__device__ inline int warp_or(int v) {
  for (int off = 16; off > 0; off /= 2) v |= __shfl_xor_sync(kFullMask, v, off);
  return v;
}
__device__ inline int warp_and(int v) {
  for (int off = 16; off > 0; off /= 2) v &= __shfl_xor_sync(kFullMask, v, off);
  return v;
}

}  // namespace qnum::cuda::detail
