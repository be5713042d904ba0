// binary on device buffers, both bundles (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/binary.hpp"

namespace qnum::cuda {

/// binary on a C-order tensor of `shape` (numel(shape) floats in and out).
/// bipolar: {-1, +1} elementwise. bipolar=false: {0, alpha} with alpha per output channel
/// (exact: index of dim 0, the whole tensor for rank <= 1; mase: 4-D only, per sample), one
/// thread per channel so the sums keep the CPU's order.
/// Stochastic draws: exact uses CounterRng(policy.seed).uniform(flat index); mase bipolar replays
/// torch's CPU rand_like stream (torch_cpu_rand: a sequential mt19937, generated on the host
/// and copied to the device); mase bipolar=false ignores draws, as MASE does.
void quantize(const BinarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

/// As above with explicit uniforms `u` in [0, 1) on the device, one per element (the CPU's
/// overload taking uniforms); ignored where the mode is not stochastic, but must not be null.
void quantize(const BinarySpec& s, const Policy& p, const float* in, const float* u, float* out, const Shape& shape,
              cudaStream_t stream = 0);

}  // namespace qnum::cuda
