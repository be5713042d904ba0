// qnum's tensors on CUDA devices: including this header (and linking qnum::cuda) installs the
// CUDA implementation of qnum::DeviceBackend (include/qnum/tensor/device.hpp) before main, so
// Device::cuda() tensors work. Installing it makes no CUDA call: the device, its stream and
// the cuBLAS handle are set up on the backend's first use, so such a program starts (and runs
// its CPU work) on a machine without a GPU or driver.
#pragma once

#include "qnum/tensor/device.hpp"

namespace qnum::cuda {

/// The process's CUDA tensor backend (one object, never destroyed: device memory handles
/// freed during static destruction still find it).
qnum::DeviceBackend& tensor_backend();

namespace detail {
/// Registers tensor_backend() during static initialisation of any program including this header.
inline const bool tensor_backend_registered = qnum::register_cuda_backend(&qnum::cuda::tensor_backend());
}  // namespace detail

}  // namespace qnum::cuda
