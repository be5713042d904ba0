// OCP MX elements and flat MX blocks on device buffers (exact semantics, 8-bit E8M0 scale, no
// quantile search), as the CPU's format/mx_block.hpp (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "qnum/format/mx_block.hpp"

namespace qnum::cuda {

/// One MX element type alone (values in units of the scale), elementwise; element i uses
/// stochastic index first_index + i.
void quantize(const MXElement& e, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first_index = 0, cudaStream_t stream = 0);

/// Contiguous blocks of `block_size` values of the flat array (the last block may be short),
/// one warp per block, as detail::mx_exact_block: values (may be null), one scale byte per
/// block (may be null) and element codes (may be null).
void mx_quantize_blocks(const MXElement& e, const Policy& p, const float* in, std::size_t n, int block_size,
                        float* values, std::uint8_t* scales, std::uint16_t* codes, cudaStream_t stream = 0);

}  // namespace qnum::cuda
