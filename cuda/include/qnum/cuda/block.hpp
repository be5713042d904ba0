// qnum::cuda block families: block_fp, block_minifloat and block_log on device buffers, both
// policy bundles (exact with any rounding, stochastic included; mase_compat with MASE's
// zero-block rule and F.fold quirk), any BlockLayout (qnum's exact tiles or MASE's
// role-dependent ones, partial last tiles included). Bit-identical to the CPU's tensor
// `qnum::quantize(spec, policy, in, out, shape, role)`: the kernels call the same QNUM_HD
// per-block and per-element definitions (include/qnum/format/block*.hpp).
//
// One warp per block. Exact: max |x| / NaN / Inf by warp reduction, the shared field from it,
// then every element (block_fp: a first rounding pass votes on the carry). mase_compat: a
// pass writes each block's max and the min zero-rule key over the tensor, a second pass
// quantizes with the fixed-up maxima. Pointers are device pointers; calls are asynchronous
// on `stream` (mase_compat allocates its scratch with cudaMallocAsync on that stream).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/block_fp.hpp"
#include "qnum/format/block_log.hpp"
#include "qnum/format/block_minifloat.hpp"

namespace qnum::cuda {

/// Quantizes the C-order tensor `in` of `shape` (n elements) into `out` block by block, as the
/// CPU's tensor quantize does: stochastic draws are keyed by the flat index, `role` selects
/// MASE's blocking path under mase_compat and is ignored under exact. `out` may alias `in`.
/// Throws qnum::Error (before launching anything) on a negative dimension, n != numel(shape),
/// an invalid spec, a layout MASE rejects (e.g. a 3-D weight), or a null pointer with n > 0;
/// a failed launch or allocation also throws qnum::Error.
void quantize(const BlockFPSpec& s, const Policy& p, const float* in, float* out, std::size_t n, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);
void quantize(const BlockMinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              const Shape& shape, Role role = Role::weight, cudaStream_t stream = 0);
void quantize(const BlockLogSpec& s, const Policy& p, const float* in, float* out, std::size_t n, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
