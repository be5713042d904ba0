// MXINT8 GEMM with dequantize-on-load (WMMA bf16 tensor cores) and the cuBLAS bf16 baseline.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <mma.h>

#include "qnum/cuda/check.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/format/mx_packed.hpp"

namespace qnum::cuda {

namespace {

[[maybe_unused]] constexpr int BM = 64, BN = 64, BK = 32, LD = BK + 8;  // +8: fewer bank conflicts

/// One 64x64 tile of C per CTA (4 warps, 32x32 each as 2x2 WMMA 16x16x16 fragments). Each K
/// step loads A's 64x32 bf16 tile and W's 64x32 int8 tile + one scale per row (K step = the
/// group of 32), dequantizes W to bf16 bits in shared memory, then multiplies.
__global__ void __launch_bounds__(128)
    mxint8_gemm_kernel(const std::uint16_t* __restrict__ A, const std::int8_t* __restrict__ Wm,
                       const std::uint8_t* __restrict__ Ws, float* __restrict__ C, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // compiled for an architecture without bf16 WMMA (the launcher refuses it first)
#elif defined(__CUDA_ARCH__)
  using namespace nvcuda;
  __shared__ __align__(32) std::uint16_t As[BM * LD];
  __shared__ __align__(32) std::uint16_t Bs[BN * LD];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32;
  const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.x) * BN;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& r : acc)
    for (auto& f : r) wmma::fill_fragment(f, 0.0f);
  const int row = tid / 2, half = (tid % 2) * 16;  // each thread: 16 elements of one row
  for (int k0 = 0; k0 < K; k0 += BK) {
    {  // A: 16 bf16 = two 16-byte loads
      const uint4* src = reinterpret_cast<const uint4*>(A + static_cast<std::size_t>(m0 + row) * K + k0 + half);
      uint4* dst = reinterpret_cast<uint4*>(As + row * LD + half);
      dst[0] = src[0];
      dst[1] = src[1];
    }
    {  // W: 16 int8 = one 16-byte load, dequantized to bf16 bits as mase-cuda does
      const std::size_t wrow = static_cast<std::size_t>(n0 + row);
      const uint4 raw = *reinterpret_cast<const uint4*>(Wm + wrow * K + k0 + half);
      const std::uint8_t S = Ws[wrow * (K / 32) + k0 / 32];
      const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
      for (int j = 0; j < 16; ++j) {
        const auto m = static_cast<std::int8_t>((words[j / 4] >> ((j % 4) * 8)) & 0xFFu);
        Bs[row * LD + half + j] = qnum::dequantize_mxint8_to_bf16_bits(m, S);
      }
    }
    __syncthreads();
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(a[i], reinterpret_cast<const __nv_bfloat16*>(As + (wm + i * 16) * LD + kk), LD);
      for (int j = 0; j < 2; ++j)  // B(k, n) = W(n, k): W's rows are B's columns
        wmma::load_matrix_sync(b[j], reinterpret_cast<const __nv_bfloat16*>(Bs + (wn + j * 16) * LD + kk), LD);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(C + static_cast<std::size_t>(m0 + wm + i * 16) * N + n0 + wn + j * 16, acc[i][j], N,
                              wmma::mem_row_major);
#endif
}

}  // namespace

void mxint8_gemm(const std::uint16_t* a, const std::int8_t* wm, const std::uint8_t* ws, float* c, int M, int N, int K,
                 cudaStream_t stream) {
  qnum::detail::require(M > 0 && N > 0 && K > 0 && M % BM == 0 && N % BN == 0 && K % BK == 0,
                        "qnum::cuda::mxint8_gemm: M, N must be positive multiples of 64 and K of 32, got ", M, "x", N,
                        "x", K);
  int dev = 0, major = 0;
  QNUM_CUDA_CHECK(cudaGetDevice(&dev));
  QNUM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  qnum::detail::require(major >= 8, "qnum::cuda::mxint8_gemm: needs bf16 tensor cores (sm_80+), device is sm_", major,
                        "x");
  cudaFuncAttributes attr{};
  QNUM_CUDA_CHECK(cudaFuncGetAttributes(&attr, mxint8_gemm_kernel));
  qnum::detail::require(attr.ptxVersion >= 80 && attr.binaryVersion >= 80,
                        "qnum::cuda::mxint8_gemm: the kernel was compiled for sm_", attr.binaryVersion, " (PTX ",
                        attr.ptxVersion, "); build with CMAKE_CUDA_ARCHITECTURES >= 80");
  const dim3 grid(static_cast<unsigned>(N / BN), static_cast<unsigned>(M / BM));
  mxint8_gemm_kernel<<<grid, 128, 0, stream>>>(a, wm, ws, c, M, N, K);
  QNUM_CUDA_CHECK(cudaGetLastError());
}

namespace {

/// One cuBLAS handle per host thread, created on first use (handles are not thread-safe).
cublasHandle_t cublas_handle(cudaStream_t stream) {
  thread_local cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    QNUM_CUBLAS_CHECK(cublasCreate(&h));
    return h;
  }();
  QNUM_CUBLAS_CHECK(cublasSetStream(handle, stream));
  return handle;
}

}  // namespace

void cublas_bf16_gemm(const std::uint16_t* a, const std::uint16_t* w, float* c, int M, int N, int K,
                      cudaStream_t stream) {
  qnum::detail::require(M > 0 && N > 0 && K > 0, "qnum::cuda::cublas_bf16_gemm: bad shape ", M, "x", N, "x", K);
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A W^T is column-major C^T = W A^T: W (col-major K x N) transposed, A^T as is.
  QNUM_CUBLAS_CHECK(cublasGemmEx(cublas_handle(stream), CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, CUDA_R_16BF, K, a,
                                 CUDA_R_16BF, K, &beta, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void mxint8_gemm_dequantize_cublas(const std::uint16_t* a, const std::int8_t* wm, const std::uint8_t* ws,
                                   std::uint16_t* w_workspace, float* c, int M, int N, int K, cudaStream_t stream) {
  qnum::detail::require(M > 0 && N > 0 && K > 0 && K % 32 == 0,
                        "qnum::cuda::mxint8_gemm_dequantize_cublas: M, N must be positive and K a positive multiple "
                        "of 32 (the group), got ",
                        M, "x", N, "x", K);
  qnum::detail::require(w_workspace != nullptr,
                        "qnum::cuda::mxint8_gemm_dequantize_cublas: needs a workspace of N*K bf16 values");
  mxint8_mase_cuda_dequantize_bf16(wm, ws, static_cast<std::size_t>(N) * static_cast<std::size_t>(K), 32, w_workspace,
                                   stream);
  cublas_bf16_gemm(a, w_workspace, c, M, N, K, stream);
}

void int8_gemm(const std::int8_t* a, const std::int8_t* w, std::int32_t* c, int M, int N, int K, cudaStream_t stream) {
  // cuBLAS's integer path wants leading dimensions (K for A and W, N for C) in multiples of 4.
  qnum::detail::require(M > 0 && N > 0 && K > 0 && K % 4 == 0 && N % 4 == 0,
                        "qnum::cuda::int8_gemm: M must be positive and N, K positive multiples of 4, got ", M, "x", N,
                        "x", K);
  const std::int32_t alpha = 1, beta = 0;
  // The "TN" layout cuBLAS's integer tensor-core path wants: W^T (col-major K x N) times A^T.
  QNUM_CUBLAS_CHECK(cublasGemmEx(cublas_handle(stream), CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, CUDA_R_8I, K, a,
                                 CUDA_R_8I, K, &beta, c, CUDA_R_32I, N, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
}

}  // namespace qnum::cuda
