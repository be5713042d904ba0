// mxint_hardware on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mxint_hardware.hpp"

namespace qnum::cuda {

/// p1 x p0 tiles of the last two dims (MASE's arithmetic in every bundle, as on the CPU), one
/// warp per tile. Tiles must divide the dims; rank >= 1. `role` is ignored.
void quantize(const MXIntHardwareSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
