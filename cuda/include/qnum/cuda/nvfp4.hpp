// qnum::cuda: NVFP4 on device buffers, bit-identical to the CPU's quantize(NVFP4Spec, ...)
// (include/qnum/format/nvfp4.hpp): the tensor's max finite |x| by an order-independent
// reduction, then one thread per 16-element block running the CPU's QNUM_HD block definition.
// Pointers are device pointers (out may equal in); `shape` is the C-order tensor shape; calls
// are asynchronous on `stream`. Bad arguments throw qnum::Error with the CPU's message.
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/nvfp4.hpp"

namespace qnum::cuda {

/// nvfp4: blocks of 16 along the last axis, E4M3 block scales, fp32 tensor scale (exact only).
/// Needs a transient device buffer of 4 bytes (cudaMallocAsync on `stream`).
void quantize(const NVFP4Spec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
