// scale_integer on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/scale_integer.hpp"

namespace qnum::cuda {

/// Each last-dimension row (a rank-0 tensor is one row) scaled by its own max |x| (a rank-1
/// tensor is one whole-tensor reduction), exact or mase_compat arithmetic, every rounding
/// (stochastic keyed by the flat index). Two passes: the row maxima (any row length; long rows
/// are split over several warps and merged with atomicMax), then the elements. Needs a
/// transient device buffer of 4 bytes per row (cudaMallocAsync on `stream`). `role` is ignored.
void quantize(const ScaleIntegerSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
