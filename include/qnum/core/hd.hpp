// QNUM_HD marks the scalar format references callable from CUDA device code, so the GPU
// kernels (cuda/) run the very same definition as the CPU. Empty for the host compiler.
// Device builds also need nvcc's --expt-relaxed-constexpr (std::bit_cast, std::optional,
// std::array and std::numeric_limits are constexpr but not __device__).
#pragma once

#if defined(__CUDACC__)
#define QNUM_HD __host__ __device__
#else
#define QNUM_HD
#endif
