// mxfp on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mxfp.hpp"

namespace qnum::cuda {

/// As mxint (qnum/cuda/quantize/mxint.hpp): mase_compat = MASE's mxfp_quantizer (E1M2
/// allowed); otherwise OCP MX blocks (OCP element types only, as the CPU requires).
void quantize(const MXFPSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
