// minifloat_denorm on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "qnum/format/minifloat_denorm.hpp"

namespace qnum::cuda {

/// Elementwise, grid-stride; element i uses stochastic index first_index + i.
void quantize(const MinifloatDenormSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// decode(s, code) for every code in [0, n).
void decode_codes(const MinifloatDenormSpec& s, float* out, std::uint32_t n, cudaStream_t stream = 0);

}  // namespace qnum::cuda
