// mxint on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mxint.hpp"

namespace qnum::cuda {

/// One warp per block, as qnum::quantize on the CPU:
/// - mase_compat: MASE's mxint_quantizer (blocks of block_size positions of the tensor with
///   block_dim moved last, straddling fibers; numel divisible by block_size; rank >= 1);
/// - any other policy: OCP MX blocks along block_dim that never cross the other axes (the last
///   block of each fiber may be short), every rounding (stochastic keyed by the flat index).
/// quantile_search: the CPU's clip search, order statistics found by rank counting in the warp
/// (O(block_size^2) per block: meant for the usual block sizes, 8..64) and each candidate's error
/// summed in the CPU's element order; in place under mase_compat it reads from a copy of `in`
/// (cudaMallocAsync), as MASE scores against the unpermuted input. `role` is ignored.
void quantize(const MXIntSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
