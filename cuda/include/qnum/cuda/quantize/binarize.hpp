// binarize on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/binarize.hpp"

namespace qnum::cuda {

/// sign(clamp(x, -1, 1)) elementwise (both bundles alike).
void quantize(const BinarizeSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

}  // namespace qnum::cuda
