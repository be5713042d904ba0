// ternary on device buffers, both bundles (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/ternary.hpp"

namespace qnum::cuda {

/// ternary: exact per output channel (any rank, threshold honoured); mase 4-D only, per
/// sample, float32 in torch's sum order. One thread per channel computes its statistics (the
/// CPU's order), then one thread per element.
void quantize(const TernarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

}  // namespace qnum::cuda
