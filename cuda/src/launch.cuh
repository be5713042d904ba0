// Launch helpers shared by the kernel files (internal; not installed).
#pragma once

#include <algorithm>
#include <cstddef>

#include <cuda_runtime.h>

#include "qnum/core/error.hpp"
#include "qnum/cuda/check.hpp"

namespace qnum::cuda::detail {

inline constexpr int kThreads = 256;  // CTA size of the grid-stride kernels: a multiple of the warp size

/// Grid for a grid-stride loop over `work` threads: enough CTAs to fill the device, capped.
inline unsigned grid_for(std::size_t work, int per_cta = kThreads) {
  const std::size_t ctas = (work + static_cast<std::size_t>(per_cta) - 1) / static_cast<std::size_t>(per_cta);
  return static_cast<unsigned>(std::clamp<std::size_t>(ctas, 1, 1u << 16));
}

/// The launch just made failed: qnum::Error naming the kernel and CUDA's error.
inline void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    qnum::detail::fail("CUDA: launch of ", kernel, " failed with ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

/// n values of T of transient device memory in stream order (cudaMallocAsync / cudaFreeAsync
/// on `stream`); at least one element, so a pointer always exists.
template <class T>
class StreamScratch {
 public:
  StreamScratch(std::size_t n, cudaStream_t stream) : stream_(stream) {
    QNUM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T), stream));
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    if (p_) (void)cudaFreeAsync(p_, stream_);
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace qnum::cuda::detail
