// MASE's floor/round(float32 log2) decided on the device from the bits and a threshold table
// in device memory, shared by minifloat and log under mase_compat (internal; not installed).
#pragma once

#include <cstdint>

#include "qnum/format/minifloat.hpp"  // torchf::Log2Direct
#include "qnum/kernel/log2_thresholds.hpp"

namespace qnum::cuda::detail {

/// floor/round of MASE's float32 log2 from the bits and a threshold table in device memory
/// (kernel/log2_thresholds.hpp, built on the host with the CPU's log2): positive normal
/// floats only, anything else (0, subnormals, Inf, NaN) takes torchf's log2 itself.
struct Log2Lookup {
  const std::int32_t* floor_t = nullptr;    // 256 entries, Log2Op::floor
  const std::int32_t* nearest_t = nullptr;  // Log2Op::nearest
  __device__ float floor_log2(float v) const {
    const std::uint32_t b = __float_as_uint(v);
    return qnum::detail::log2_positive_normal(b) ? qnum::detail::log2_op_from_table(floor_t, b)
                                                 : qnum::detail::torchf::Log2Direct{}.floor_log2(v);
  }
  __device__ float round_log2(float v) const {
    const std::uint32_t b = __float_as_uint(v);
    return qnum::detail::log2_positive_normal(b) ? qnum::detail::log2_op_from_table(nearest_t, b)
                                                 : qnum::detail::torchf::Log2Direct{}.round_log2(v);
  }
};

/// The tables of the current device (uploaded on first use per device and op, kept for the
/// process; log2_lookup.cu).
Log2Lookup device_log2_lookup();

}  // namespace qnum::cuda::detail
