// minifloat_ieee (OCP FP8 included) on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "qnum/format/minifloat.hpp"

namespace qnum::cuda {

/// Elementwise, grid-stride; element i uses stochastic index first_index + i. `exact`: a
/// float32-bit fast path (kernel/exact_float32.hpp); `mase_compat`: MASE's log2 decisions
/// looked up from the bits. Both proven equal to quantize_reference on every float32 input.
void quantize(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// The scalar reference's kernel alone (the proof's and the benchmarks' baseline).
void quantize_reference(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// decode(s, code) for every code in [0, n).
void decode_codes(const MinifloatSpec& s, float* out, std::uint32_t n, cudaStream_t stream = 0);

}  // namespace qnum::cuda
