// log on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "qnum/format/log.hpp"

namespace qnum::cuda {

/// Elementwise, grid-stride; element i uses stochastic index first_index + i. `mase_compat`:
/// MASE's log2 decision looked up from the bits, proven equal to quantize_reference on every
/// float32 input.
void quantize(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// The scalar reference's kernel alone (the proof's and the benchmarks' baseline).
void quantize_reference(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first_index = 0, cudaStream_t stream = 0);

}  // namespace qnum::cuda
