// block_minifloat on device buffers, both policy bundles, any BlockLayout (qnum/cuda/quantize.hpp: the
// common contract; cuda/src/quantize/blocks.cuh: one warp per block, shared by the block families).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/block_minifloat.hpp"

namespace qnum::cuda {

/// The C-order tensor `in` of `shape` (n elements) block by block, as the CPU's tensor
/// quantize: stochastic draws keyed by the flat index, `role` selects MASE's blocking under
/// mase_compat (ignored under exact). Also throws when n != numel(shape) or MASE rejects the layout.
void quantize(const BlockMinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              const Shape& shape, Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
