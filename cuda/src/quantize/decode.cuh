// decode_codes of the elementwise families with <= 16-bit codes (fixed, minifloat,
// minifloat_denorm; internal, not installed): one thread per code running the CPU's QNUM_HD
// decode. Include it after the family's format header (qnum::decode must be declared first).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "../launch.cuh"

namespace qnum::cuda::detail {

template <class Spec>
__global__ void decode_kernel(Spec s, float* out, std::uint32_t n) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += stride) out[c] = qnum::decode(s, c);
}

/// decode_codes: out[c] = decode(s, c) for every code c < n.
template <class Spec>
void launch_decode(const Spec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  if (n == 0) return;
  decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, out, n);
  check_launch("decode_kernel");
}

}  // namespace qnum::cuda::detail
