// qnum::cuda: the scaled-integer and MX block formats on device buffers, bit-identical to the
// CPU's tensor quantize overloads (include/qnum/format/*). A scale comes from a reduction over
// a row / tile / block (a max, which is order-independent), then every element runs the same
// QNUM_HD definition the CPU uses. Pointers are device pointers (out may equal in); `shape` is
// the C-order tensor shape; calls are asynchronous on `stream` (0: the default stream). Bad
// arguments (negative dims, null pointers with elements, an invalid spec or a shape the CPU
// refuses) throw qnum::Error with the CPU's message; a failed launch or allocation throws
// qnum::Error naming it. `Role` is accepted and ignored, as on the CPU.
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"
#include "qnum/format/mxint_hardware.hpp"
#include "qnum/format/scale_integer.hpp"

namespace qnum::cuda {

/// scale_integer: each last-dimension row (a rank-0 tensor is one row) scaled by its own
/// max |x| (a rank-1 tensor is one whole-tensor reduction), exact or mase_compat arithmetic,
/// every rounding (stochastic keyed by the flat index). Two passes: the row maxima (any row
/// length; long rows are split over several warps and merged with atomicMax), then the elements.
/// Needs a transient device buffer of 4 bytes per row (cudaMallocAsync on `stream`).
void quantize(const ScaleIntegerSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

/// mxint_hardware: p1 x p0 tiles of the last two dims (MASE's arithmetic in every bundle, as on
/// the CPU), one warp per tile. Tiles must divide the dims; rank >= 1.
void quantize(const MXIntHardwareSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

/// mxint (MXIntSpec), one warp per block, as qnum::quantize on the CPU:
/// - mase_compat: MASE's mxint_quantizer (blocks of block_size positions of the tensor with
///   block_dim moved last, straddling fibers; numel divisible by block_size; rank >= 1);
/// - any other policy: OCP MX blocks along block_dim that never cross the other axes (the last
///   block of each fiber may be short), every rounding (stochastic keyed by the flat index).
/// quantile_search: the CPU's clip search, order statistics found by rank counting in the warp
/// (O(block_size^2) per block: meant for the usual block sizes, 8..64) and each candidate's error
/// summed in the CPU's element order; in place under mase_compat it reads from a copy of `in`
/// (cudaMallocAsync), as MASE scores against the unpermuted input.
void quantize(const MXIntSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

/// mxfp (MXFPSpec), as MXIntSpec above: mase_compat = MASE's mxfp_quantizer (E1M2 allowed);
/// otherwise OCP MX blocks (OCP element types only, as the CPU requires).
void quantize(const MXFPSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              Role role = Role::weight, cudaStream_t stream = 0);

}  // namespace qnum::cuda
