// A device allocation owned by a host object (tests and benchmarks only).
#pragma once

#include <cstddef>
#include <vector>

#include "qnum/cuda/check.hpp"

namespace qnum::cuda {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n) QNUM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) { upload(v); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    qnum::detail::require(v.size() == n_, "DeviceBuffer: upload of ", v.size(), " values into ", n_);
    if (n_) QNUM_CUDA_CHECK(cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    QNUM_CUDA_CHECK(cudaDeviceSynchronize());
    if (n_) QNUM_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace qnum::cuda
