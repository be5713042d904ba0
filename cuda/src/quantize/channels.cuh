// Per-channel kernels shared by binary (scaled) and ternary (internal; not installed): one
// thread per channel computes the channel's statistics with the CPU's own QNUM_HD function
// (so lane_sum's and torch's summation orders are the CPU's, term for term), then one thread
// per element applies them. Compiled with --fmad=false: no contraction the CPU reference lacks.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "../launch.cuh"
#include "qnum/core/shape.hpp"
#include "qnum/format/channel_reduce.hpp"

namespace qnum::cuda::detail {

// Channel statistics run one long serial sum per thread (with torch's 16 lane registers in
// local memory): small CTAs spread few channels over more SMs.
inline constexpr int kStatThreads = 64;

/// stats[g] = stat(channel g's `size` elements), one thread per channel (the CPU's serial order).
template <class Stat, class T>
__global__ void stats_kernel(Stat stat, const float* in, std::size_t groups, std::int64_t size, T* stats) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride)
    stats[g] = stat(in + g * static_cast<std::size_t>(size), size);
}

/// out[i] = op(in[i], i, stats[channel of i]), grid-stride.
template <class Op, class T>
__global__ void channel_map_kernel(Op op, const float* in, const T* stats, std::int64_t size, float* out,
                                   std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = op(in[i], i, stats[i / static_cast<std::size_t>(size)]);
}

/// Statistics of `groups` channels of `size` elements into stream-ordered scratch, then the
/// elements (in == out is fine: every statistic is computed before any element is written).
template <class T, class Stat, class Op>
void launch_channels(const char* kernel, const Stat& stat, const Op& op, const float* in, float* out,
                     std::int64_t groups, std::int64_t size, cudaStream_t stream) {
  const auto n = static_cast<std::size_t>(groups * size);
  if (n == 0) return;
  const StreamScratch<T> stats(static_cast<std::size_t>(groups), stream);
  stats_kernel<<<grid_for(static_cast<std::size_t>(groups), kStatThreads), kStatThreads, 0, stream>>>(
      stat, in, static_cast<std::size_t>(groups), size, stats.get());
  check_launch(kernel);
  channel_map_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, in, stats.get(), size, out, n);
  check_launch(kernel);
}

/// MASE's per-sample grouping (4-D, checked by the caller): shape[0] samples.
inline qnum::detail::Groups mase_samples(const Shape& shape) {
  if (shape[0] == 0) return {0, 0};
  return {shape[0], numel(shape) / shape[0]};
}

}  // namespace qnum::cuda::detail
