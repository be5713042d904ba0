// qnum::cuda: the device count, mase-cuda's packed MXINT8, the GEMMs, fused attention and the
// test helpers. The format families' kernels are in qnum/cuda/quantize.hpp (one header per
// family). Pointers are device pointers; calls are asynchronous on `stream` (0: the default
// stream) and throw qnum::Error on bad arguments or a failed launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace qnum::cuda {

/// Number of CUDA devices, 0 when there is none or no driver (never throws).
int device_count();

// ---- mase-cuda packed MXINT8 (formats.md §2.14) ----------------------------------------

/// quantize_mxint8_mase_cuda on the device: n % group_size == 0, one thread per group.
void mxint8_mase_cuda_quantize(const float* in, std::size_t n, int group_size, std::int8_t* mantissa,
                               std::uint8_t* scale, cudaStream_t stream = 0);
/// dequantize_mxint8_mase_cuda_bf16 on the device: 1-D grid-stride (no grid-y limit).
void mxint8_mase_cuda_dequantize_bf16(const std::int8_t* mantissa, const std::uint8_t* scale, std::size_t n,
                                      int group_size, std::uint16_t* out_bf16, cudaStream_t stream = 0);

// ---- GEMM -------------------------------------------------------------------------------

/// C[M,N] (fp32, row-major) = A[M,K] (bf16 bits, row-major) x W[N,K]^T with W packed mase-cuda
/// MXINT8, groups of 32 along K (a Linear weight). Dequantize-on-load into shared memory and
/// WMMA bf16 tensor cores with fp32 accumulation (sm_80+). M, N multiples of 64, K of 32.
void mxint8_gemm(const std::uint16_t* a_bf16, const std::int8_t* w_mantissa, const std::uint8_t* w_scale, float* c,
                 int M, int N, int K, cudaStream_t stream = 0);
/// The same product with W already dequantized to bf16 (row-major [N,K]): one cuBLAS
/// cublasGemmEx call (bf16 inputs, fp32 compute and output), the baseline.
void cublas_bf16_gemm(const std::uint16_t* a_bf16, const std::uint16_t* w_bf16, float* c, int M, int N, int K,
                      cudaStream_t stream = 0);

/// The same product in two launches: W dequantized to bf16 into `w_workspace` (N*K values, the
/// mase-cuda dequantize kernel), then cublas_bf16_gemm. Same values as cublas_bf16_gemm on the
/// pre-dequantized weight; weights at rest stay packed (8.25 bits per value) and the workspace is
/// transient (one layer's worth). K a multiple of 32, any M, N > 0.
void mxint8_gemm_dequantize_cublas(const std::uint16_t* a_bf16, const std::int8_t* w_mantissa,
                                   const std::uint8_t* w_scale, std::uint16_t* w_workspace, float* c, int M, int N,
                                   int K, cudaStream_t stream = 0);
/// C[M,N] (int32, row-major) = A[M,K] (int8) x W[N,K]^T (int8), exact: cuBLAS's integer
/// tensor-core GEMM (int32 accumulation; |sum| < 2^31 for K < 2^17). Fixed-point operands
/// rescale by 2^-(Fa+Fw) afterwards. N and K multiples of 4 (cuBLAS's leading dimensions).
void int8_gemm(const std::int8_t* a, const std::int8_t* w, std::int32_t* c, int M, int N, int K,
               cudaStream_t stream = 0);

// ---- attention -------------------------------------------------------------------------

/// Fused attention forward on the device, the contract of qnum::attention_fused
/// (kernel/attention.hpp; sizes passed one by one so this header stays free of Eigen): q
/// [batch, heads, seq_q, head_dim], k/v [.., seq_k, ..], optional additive mask [batch, seq_k]
/// (null: none), scale 1/sqrt(head_dim), fully masked rows give zeros. Online softmax, one warp
/// per query row, fp32; head_dim <= 256. Agrees with the CPU within float rounding.
void attention_fused(const float* q, const float* k, const float* v, const float* mask, float* out, std::int64_t batch,
                     std::int64_t heads, std::int64_t seq_q, std::int64_t seq_k, std::int64_t head_dim,
                     cudaStream_t stream = 0);

// ---- test helpers (device-side, so exhaustive checks stay on the device) ---------------

namespace testing {
/// out[i] = the float whose bits are first_bits + i (wrapping): every float32 input in 2^32 / n calls.
void fill_float_bits(float* out, std::size_t n, std::uint32_t first_bits, cudaStream_t stream = 0);
struct BitMismatches {
  unsigned long long count = 0, first = ~0ull;  // first: smallest mismatching index
};
/// Elements whose bits differ (any two NaNs count as equal); synchronises `stream`.
BitMismatches bit_mismatches(const float* a, const float* b, std::size_t n, cudaStream_t stream = 0);
}  // namespace testing

}  // namespace qnum::cuda
