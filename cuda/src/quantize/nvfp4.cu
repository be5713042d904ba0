// nvfp4 kernels (qnum/cuda/quantize/nvfp4.hpp): the tensor's max finite |x| (float bits of
// non-negative values order as unsigned integers, so atomicMax on them is the max, in any
// order), then one thread per block calling the CPU's QNUM_HD nvfp4_block_values.
#include "qnum/cuda/quantize/nvfp4.hpp"

#include <cstdint>

#include "../launch.cuh"
#include "io.cuh"

namespace qnum::cuda {

namespace {

__global__ void nvfp4_amax_kernel(const float* in, std::size_t n, std::uint32_t* amax_bits) {
  std::uint32_t m = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t b = qnum::detail::float_bits(in[i]) & 0x7FFFFFFFu;
    if (b < 0x7F800000u && b > m) m = b;  // finite magnitudes only
  }
  if (m) atomicMax(amax_bits, m);
}

__global__ void nvfp4_block_kernel(const float* in, float* out, std::size_t rows, std::size_t len,
                                   const std::uint32_t* amax_bits) {
  const float t = qnum::detail::nvfp4_tensor_scale_of(qnum::detail::bits_float(*amax_bits));
  const std::size_t per_row = (len + 15) / 16, blocks = rows * per_row;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t j = (b % per_row) * 16, off = (b / per_row) * len + j;
    const int n = static_cast<int>(len - j < 16 ? len - j : 16);
    qnum::detail::nvfp4_block_values(in + off, n, t, out + off);
  }
}

}  // namespace

void quantize(const NVFP4Spec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  s.validate(p);
  const std::size_t n = detail::check_io(s.name, in, out, shape);
  const auto len = static_cast<std::size_t>(shape.empty() ? 1 : shape.back());
  if (n == 0 || len == 0) return;
  detail::StreamScratch<std::uint32_t> amax(1, stream);
  QNUM_CUDA_CHECK(cudaMemsetAsync(amax.get(), 0, sizeof(std::uint32_t), stream));
  nvfp4_amax_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(in, n, amax.get());
  detail::check_launch("nvfp4_amax_kernel");
  const std::size_t rows = n / len;
  nvfp4_block_kernel<<<detail::grid_for(rows * ((len + 15) / 16)), detail::kThreads, 0, stream>>>(in, out, rows, len,
                                                                                                  amax.get());
  detail::check_launch("nvfp4_block_kernel");
}

}  // namespace qnum::cuda
