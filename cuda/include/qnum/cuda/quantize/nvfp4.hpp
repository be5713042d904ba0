// nvfp4 on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/nvfp4.hpp"

namespace qnum::cuda {

/// Blocks of 16 along the last axis, E4M3 block scales, fp32 tensor scale (exact only): the
/// tensor's max finite |x| by an order-independent reduction, then one thread per block
/// running the CPU's QNUM_HD block definition. Needs a transient device buffer of 4 bytes
/// (cudaMallocAsync on `stream`). `role` is ignored.
void quantize(const NVFP4Spec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
