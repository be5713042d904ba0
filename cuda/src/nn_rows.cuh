// Row kernels shared by nn_kernels.cu and attention_train.cu (internal; not installed): CTA
// reductions and softmax over rows, one CTA per row, sums in double as the CPU's
// softmax_lines / softmax_backward_lines (tensor/ops_nn.hpp).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

namespace qnum::cuda::detail {

/// CTA size for rows of n values: a multiple of the warp size, 32..256.
inline int row_threads(std::int64_t n) { return n <= 32 ? 32 : n <= 64 ? 64 : n <= 128 ? 128 : 256; }

namespace {

/// Sum of a double over the CTA (blockDim.x a multiple of 32, <= 1024); every thread gets it.
/// Called by every thread of the CTA (it synchronises).
__device__ double block_sum(double v, double* shared32) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  __syncthreads();  // the previous call's readers are done with shared32
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < warps; ++w) t += shared32[w];
  return t;
}

/// The largest non-NaN value over the CTA (-inf if none), as the CPU's line_max.
__device__ float block_max(float v, float* shared32) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < warps; ++w) t = fmaxf(t, shared32[w]);
  return t;
}

/// One row's softmax (or log_softmax) of n values from x into y (y may be x: every thread
/// reads its elements before the sums' barriers and writes only its own elements after).
__device__ void softmax_row(const float* x, std::int64_t n, bool log_space, float* y, double* shd, float* shf) {
  float m = -INFINITY;
  for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x) m = fmaxf(m, x[k]);
  m = block_max(m, shf);
  double s = 0.0;
  for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x) s += exp(static_cast<double>(x[k]) - m);
  s = block_sum(s, shd);
  const double log_s = log_space ? log(s) : 0.0;
  for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const double e = static_cast<double>(x[k]) - m;
    y[k] = log_space ? static_cast<float>(e - log_s) : static_cast<float>(exp(e) / s);
  }
}

__global__ void softmax_rows_kernel(const float* x, std::int64_t rows, std::int64_t n, bool log_space, float* y) {
  __shared__ double shd[32];
  __shared__ float shf[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) softmax_row(x + r * n, n, log_space, y + r * n, shd, shf);
}

/// softmax: gx = y·(g - Σ g·y); log_softmax: gx = g - exp(y)·Σ g (in double, rounded once).
__global__ void softmax_backward_rows_kernel(const float* g, const float* y, std::int64_t rows, std::int64_t n,
                                             bool log_space, float* gx) {
  __shared__ double shd[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* gr = g + r * n;
    const float* yr = y + r * n;
    double s = 0.0;
    for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x)
      s += log_space ? static_cast<double>(gr[k]) : static_cast<double>(gr[k]) * yr[k];
    s = block_sum(s, shd);
    float* out = gx + r * n;
    for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x)
      out[k] = log_space ? static_cast<float>(gr[k] - exp(static_cast<double>(yr[k])) * s)
                         : static_cast<float>(yr[k] * (gr[k] - s));
  }
}

}  // namespace

}  // namespace qnum::cuda::detail
