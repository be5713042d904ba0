// QNUM_CUDA_CHECK: a failed CUDA runtime / cuBLAS call becomes a qnum::Error naming the
// call, the error code and where it happened.
#pragma once

#include <cuda_runtime.h>

#include "qnum/core/error.hpp"

namespace qnum::cuda::detail {

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so later launch checks do not report it again
  qnum::detail::fail("CUDA: ", call, " failed with ", cudaGetErrorName(e), " (", static_cast<int>(e),
                     "): ", cudaGetErrorString(e), " at ", file, ":", line);
}
/// cuBLAS status codes are plain ints here so this header needs no cublas_v2.h.
inline void check_cublas(int status, const char* call, const char* file, int line) {
  if (status != 0) qnum::detail::fail("cuBLAS: ", call, " failed with status ", status, " at ", file, ":", line);
}

}  // namespace qnum::cuda::detail

#define QNUM_CUDA_CHECK(call) ::qnum::cuda::detail::check((call), #call, __FILE__, __LINE__)
#define QNUM_CUBLAS_CHECK(call) ::qnum::cuda::detail::check_cublas(static_cast<int>(call), #call, __FILE__, __LINE__)
