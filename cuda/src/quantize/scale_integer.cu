// scale_integer kernels (qnum/cuda/quantize/scale_integer.hpp): each row's max |x| by warp
// reduction (max is order-independent; NaN and Inf ordered as abs_max_key, as the CPU's loop
// sees them), then every element runs the CPU's QNUM_HD definition (format/scale_integer.hpp).
#include "qnum/cuda/quantize/scale_integer.hpp"

#include <algorithm>
#include <cstdint>

#include "../launch.cuh"
#include "io.cuh"
#include "warp.cuh"

namespace qnum::cuda {

namespace {

using detail::lane_id;
using detail::warp_count;
using detail::warp_id;

constexpr std::size_t kRowChunk = 4096;  // elements one warp reduces; longer rows merge chunks

/// keys[row] = max abs_max_key over the row (keys zeroed before when rows are split).
__global__ void row_abs_max_kernel(const float* in, std::size_t rows, std::size_t len, std::size_t chunks,
                                   std::uint32_t* keys) {
  const int lane = lane_id();
  for (std::size_t item = warp_id(); item < rows * chunks; item += warp_count()) {
    const std::size_t row = item / chunks, c = item % chunks;
    const std::size_t begin = row * len + c * kRowChunk, end = row * len + std::min(len, (c + 1) * kRowChunk);
    std::uint32_t key = 0;
    for (std::size_t i = begin + static_cast<std::size_t>(lane); i < end; i += 32)
      key = max(key, qnum::detail::abs_max_key(in[i]));
    key = detail::warp_max(key);
    if (lane == 0) {
      if (chunks == 1)
        keys[row] = key;
      else
        atomicMax(keys + row, key);
    }
  }
}

__global__ void scale_integer_kernel(ScaleIntegerSpec s, Policy p, const float* in, float* out, std::size_t n,
                                     std::size_t len, const std::uint32_t* keys) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float m = qnum::detail::bits_float(keys[i / len]);
    out[i] = qnum::detail::scale_integer_element(s, p, in[i], m, i);
  }
}

}  // namespace

void quantize(const ScaleIntegerSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = detail::check_io(s.name, in, out, shape);
  const auto len = static_cast<std::size_t>(shape.empty() ? 1 : shape.back());
  if (n == 0 || len == 0) return;
  const std::size_t rows = n / len, chunks = (len + kRowChunk - 1) / kRowChunk;
  detail::StreamScratch<std::uint32_t> keys(rows, stream);
  auto* k = keys.get();
  if (chunks > 1) QNUM_CUDA_CHECK(cudaMemsetAsync(k, 0, rows * sizeof(std::uint32_t), stream));
  row_abs_max_kernel<<<detail::grid_for(rows * chunks * 32), detail::kThreads, 0, stream>>>(in, rows, len, chunks, k);
  detail::check_launch("row_abs_max_kernel");
  scale_integer_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(s, p, in, out, n, len, k);
  detail::check_launch("scale_integer_kernel");
}

}  // namespace qnum::cuda
