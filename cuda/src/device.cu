// The device count and the test helpers of qnum/cuda/kernels.hpp (device-side, so the
// exhaustive checks stay on the device).
#include <cstdint>

#include "launch.cuh"
#include "qnum/cuda/kernels.hpp"

namespace qnum::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

namespace {

__global__ void fill_float_bits_kernel(float* out, std::size_t n, std::uint32_t first_bits) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __uint_as_float(first_bits + static_cast<std::uint32_t>(i));
}

__global__ void bit_mismatch_kernel(const float* a, const float* b, std::size_t n, unsigned long long* count,
                                    unsigned long long* first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = a[i], y = b[i];
    if (__float_as_uint(x) != __float_as_uint(y) && !(x != x && y != y)) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

}  // namespace

namespace testing {

void fill_float_bits(float* out, std::size_t n, std::uint32_t first_bits, cudaStream_t stream) {
  if (n == 0) return;
  fill_float_bits_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, first_bits);
  check_launch("fill_float_bits_kernel");
}

BitMismatches bit_mismatches(const float* a, const float* b, std::size_t n, cudaStream_t stream) {
  unsigned long long* d = nullptr;
  QNUM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), 2 * sizeof(unsigned long long)));
  const unsigned long long init[2] = {0, ~0ull};
  unsigned long long host[2] = {0, 0};
  try {
    QNUM_CUDA_CHECK(cudaMemcpyAsync(d, init, sizeof init, cudaMemcpyHostToDevice, stream));
    if (n) {
      bit_mismatch_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, n, d, d + 1);
      check_launch("bit_mismatch_kernel");
    }
    QNUM_CUDA_CHECK(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, stream));
    QNUM_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    cudaFree(d);
    throw;
  }
  cudaFree(d);
  return {host[0], host[1]};
}

}  // namespace testing

}  // namespace qnum::cuda
