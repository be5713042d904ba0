// The device copies of MASE's log2 threshold tables (quantize/log2_lookup.cuh).
#include <mutex>

#include "../launch.cuh"
#include "log2_lookup.cuh"

namespace qnum::cuda::detail {

namespace {

/// The device copy of a threshold table, uploaded once per device and op.
const std::int32_t* device_log2_table(qnum::detail::Log2Op op) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static const std::int32_t* tables[kMaxDevices][3] = {};
  int dev = 0;
  QNUM_CUDA_CHECK(cudaGetDevice(&dev));
  qnum::detail::require(dev >= 0 && dev < kMaxDevices, "qnum::cuda: device ", dev, " out of range");
  const std::lock_guard<std::mutex> lock(mutex);
  const std::int32_t*& slot = tables[dev][static_cast<int>(op)];
  if (!slot) {
    const auto& host = qnum::detail::log2_thresholds(op).t;
    std::int32_t* d = nullptr;
    QNUM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), sizeof host));  // kept for the process
    QNUM_CUDA_CHECK(cudaMemcpy(d, host.data(), sizeof host, cudaMemcpyHostToDevice));
    slot = d;
  }
  return slot;
}

}  // namespace

Log2Lookup device_log2_lookup() {
  return {device_log2_table(qnum::detail::Log2Op::floor), device_log2_table(qnum::detail::Log2Op::nearest)};
}

}  // namespace qnum::cuda::detail
