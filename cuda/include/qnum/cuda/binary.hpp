// qnum::cuda: the binary family (binary, residual_sign, binarize) and ternary on device
// buffers, bit-identical to the CPU's tensor `qnum::quantize(spec, policy, in, out, shape)`
// for both bundles (exact and mase_compat). The kernels call the same QNUM_HD definitions as
// the CPU (include/qnum/format/binary.hpp, ternary.hpp): per-element functions, and per-channel
// statistics (lane_sum's double order, torch's float32 cascade order) run by one thread per
// channel so the sums keep the CPU's order.
//
// Pointers are device pointers (in may equal out: channels are read before they are written);
// calls are asynchronous on `stream` (0: the default stream). Bad arguments (negative
// dimension, invalid spec, MASE's 4-D requirement, null pointers with elements to process)
// throw qnum::Error before anything is launched, like the CPU; a failed launch or allocation
// throws qnum::Error too.
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/binary.hpp"
#include "qnum/format/residual_sign.hpp"
#include "qnum/format/binarize.hpp"
#include "qnum/format/ternary.hpp"

namespace qnum::cuda {

/// binary on a C-order tensor of `shape` (numel(shape) floats in and out).
/// bipolar: {-1, +1} elementwise. bipolar=false: {0, alpha} with alpha per output channel
/// (exact: index of dim 0, the whole tensor for rank <= 1; mase: 4-D only, per sample).
/// Stochastic draws: exact uses CounterRng(policy.seed).uniform(flat index); mase bipolar replays
/// torch's CPU rand_like stream (torch_cpu_rand: a sequential mt19937, generated on the host
/// and copied to the device); mase bipolar=false ignores draws, as MASE does.
void quantize(const BinarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

/// As above with explicit uniforms `u` in [0, 1) on the device, one per element (the CPU's
/// overload taking uniforms); ignored where the mode is not stochastic, but must not be null.
void quantize(const BinarySpec& s, const Policy& p, const float* in, const float* u, float* out, const Shape& shape,
              cudaStream_t stream = 0);

/// ternary: exact per output channel (any rank, threshold honoured); mase 4-D only, per
/// sample, float32 in torch's sum order.
void quantize(const TernarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

/// residual_sign: `out` holds numel(output_shape(s, p, shape)) floats, the levels stacked
/// [L, ...shape] (mase with L = 1: the plain shape). mase accepts levels 1..3.
void quantize(const ResidualSignSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

/// binarize: sign(clamp(x, -1, 1)) elementwise (both bundles alike).
void quantize(const BinarizeSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream = 0);

}  // namespace qnum::cuda
