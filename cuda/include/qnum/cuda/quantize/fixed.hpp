// fixed point (integer) on device buffers (qnum/cuda/quantize.hpp: the common contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "qnum/format/fixed.hpp"

namespace qnum::cuda {

/// Elementwise, grid-stride; element i uses stochastic index first_index + i. Under `exact`
/// with W <= 24 a float32-bit fast path (kernel/exact_float32.hpp), proven equal to
/// quantize_reference on every float32 input by qnum-cuda-tests.
void quantize(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// The scalar reference's kernel alone (the proof's and the benchmarks' baseline).
void quantize_reference(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first_index = 0, cudaStream_t stream = 0);
/// decode(s, code) for every code in [0, n) (the exhaustive decode check of <= 16-bit formats).
void decode_codes(const FixedSpec& s, float* out, std::uint32_t n, cudaStream_t stream = 0);

}  // namespace qnum::cuda
