// residual_sign on device buffers, both bundles (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/residual_sign.hpp"

namespace qnum::cuda {

/// `out` holds numel(output_shape(s, p, shape)) floats, the levels stacked [L, ...shape]
/// (mase with L = 1: the plain shape). mase accepts levels 1..3.
void quantize(const ResidualSignSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

}  // namespace qnum::cuda
