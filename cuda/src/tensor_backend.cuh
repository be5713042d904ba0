// The CUDA implementation of qnum::DeviceBackend (include/qnum/tensor/device.hpp), shared by
// the .cu files that define its methods (internal; not installed):
//   tensor_backend.cu   the class's state, memory, gemm, elementwise, reduce, permute,
//                       adam_step, quantize, range_mask, the MXINT8 Linear
//   nn_kernels.cu       layer_norm, softmax, cross_entropy, embedding, dropout, mask_product
//   attention_train.cu  attention forward and backward (cuBLAS GEMMs + row kernels)
// One stream, created on first use (as the cuBLAS handle): constructing the backend touches
// no driver, so programs that include qnum/cuda/backend.hpp start on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include <cuda_runtime.h>

#include "qnum/tensor/device.hpp"

struct cublasContext;  // cublasHandle_t without cublas_v2.h in every file

namespace qnum::cuda::detail {

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend() = default;  // no CUDA call here (see the file comment)

  int device_count() noexcept override;
  std::string name() override;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override;
  void fill(float* x, float value, std::size_t n) override;
  void copy_rows(float* dst, std::int64_t dst_stride, const float* src, std::int64_t src_stride, std::int64_t rows,
                 std::int64_t width) override;
  void synchronize() override;
  MemoryStats memory_stats() override;
  void reset_peak() override;

  void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
            std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb, std::int64_t stride_b,
            float beta, float* C, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) override;

  void binary(Binary op, const float* a, const float* b, std::size_t n, std::size_t nb, float* out) override;
  void affine(const float* x, float scale, float shift, float* y, std::size_t n) override;
  void unary(Unary f, const float* x, float* y, std::size_t n) override;
  void unary_backward(Unary f, const float* g, const float* x, const float* y, float* gx, std::size_t n) override;
  void reduce_sum(const float* x, std::int64_t outer, std::int64_t n, std::int64_t inner, float scale,
                  float* out) override;
  void permute(const float* x, const std::int64_t* shape, const int* perm, int rank, float* y) override;

  void layer_norm(const float* x, std::int64_t rows, std::int64_t c, const float* w, const float* b, float eps,
                  float* y, float* mean, float* rstd) override;
  void layer_norm_backward(const float* g, const float* x, const float* mean, const float* rstd, const float* w,
                           std::int64_t rows, std::int64_t c, float* gx, float* gw, float* gb) override;
  void softmax(const float* x, std::int64_t rows, std::int64_t n, bool log_space, float* y) override;
  void softmax_backward(const float* g, const float* y, std::int64_t rows, std::int64_t n, bool log_space,
                        float* gx) override;
  void cross_entropy(const float* logits, const std::int64_t* targets, std::int64_t rows, std::int64_t c,
                     std::int64_t ignore_index, float* logp, float* loss) override;
  void cross_entropy_backward(const float* g, const float* logp, const std::int64_t* targets, std::int64_t rows,
                              std::int64_t c, std::int64_t ignore_index, float* gx) override;
  void embedding(const std::int64_t* idx, std::int64_t n, const float* weight, std::int64_t c, float* out) override;
  void embedding_backward(const std::int64_t* idx, std::int64_t n, const float* g, std::int64_t c,
                          float* gw) override;
  void dropout(const float* x, std::size_t n, float p, float scale, std::uint64_t seed, std::uint64_t first,
               std::uint8_t* keep, float* y) override;
  void mask_product(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) override;

  void attention(const float* q, const float* k, const float* v, const float* mask, std::int64_t B, std::int64_t Tq,
                 std::int64_t T, std::int64_t heads, std::int64_t D, float scale, float p, std::uint64_t seed,
                 float* probs, std::uint8_t* keep, float* out) override;
  void attention_backward(const float* g, const float* q, const float* k, const float* v, const float* probs,
                          const std::uint8_t* keep, std::int64_t B, std::int64_t Tq, std::int64_t T,
                          std::int64_t heads, std::int64_t D, float scale, float p, float* gq, float* gk,
                          float* gv) override;

  void adam_step(const AdamStep& s, float* p, const float* g, float* m, float* v, std::size_t n) override;
  void adam_step_multi(const AdamStep& s, float* const* p, const float* const* g, float* const* m, float* const* v,
                       const std::size_t* n, std::size_t count) override;
  void sum_squares_multi(const float* const* x, const std::size_t* n, std::size_t count, float* out) override;
  void grad_norm_factor(const float* sum_sq, float max_norm, float* norm, float* factor) override;
  void scale_multi(float* const* x, const std::size_t* n, std::size_t count, const float* factor) override;
  void mxint8_embedding(const std::int64_t* idx, std::int64_t n, const std::int8_t* mantissa,
                        const std::uint8_t* scale, std::int64_t c, float* out) override;
  void quantize(const Format& f, const float* x, const std::int64_t* shape, int rank, bool weight_role,
                float* y) override;
  void range_mask(const float* x, std::size_t n, double lo, double hi, std::uint8_t* keep) override;

  void mxint8_pack(const float* w, std::int64_t N, std::int64_t K, std::int8_t* mantissa,
                   std::uint8_t* scale) override;
  void mxint8_linear(const float* x, const std::int8_t* mantissa, const std::uint8_t* scale, const float* bias,
                     std::int64_t M, std::int64_t N, std::int64_t K, float* y) override;

  /// The stream every call is ordered on (initialises the device on first use).
  cudaStream_t stream();
  /// The float32 cuBLAS handle (default math: no TF32), bound to stream().
  cublasContext* blas();
  /// For o < outer, h < heads: C_oh = alpha·op(A_oh)·op(B_oh) + beta·C_oh (row-major, as gemm)
  /// with X_oh = X + o·x_outer + h·x_head: every (batch row, head) pair of token-major
  /// activations in one cublasSgemmBatched call (their offsets have no single stride).
  void gemm_heads(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                  const float* A, std::int64_t lda, std::int64_t a_outer, std::int64_t a_head, const float* B,
                  std::int64_t ldb, std::int64_t b_outer, std::int64_t b_head, float beta, float* C, std::int64_t ldc,
                  std::int64_t c_outer, std::int64_t c_head, std::int64_t outer, std::int64_t heads);

 private:
  void init();  // the stream and the memory pool, once

  std::once_flag once_;
  cudaStream_t stream_ = nullptr;
  cublasContext* blas_ = nullptr;
  std::mutex mem_mutex_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t allocated_ = 0, peak_ = 0;
};

/// Transient device memory of n values of T, from the backend's tracked allocator (so peaks
/// count it) and freed in stream order when it goes out of scope.
template <class T>
class Scratch {
 public:
  Scratch(CudaBackend& b, std::size_t n)
      : b_(b), p_(static_cast<T*>(b.allocate((n > 0 ? n : std::size_t{1}) * sizeof(T)))) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { b_.deallocate(p_); }
  T* get() const { return p_; }

 private:
  CudaBackend& b_;
  T* p_;
};

/// Grid of a 1-D grid-stride loop over `work` items with `threads` per CTA.
inline unsigned grid_1d(std::size_t work, int threads = 256) {
  const std::size_t ctas = (work + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<unsigned>(ctas < 1 ? 1 : ctas > 65535 * 4 ? 65535 * 4 : ctas);
}
/// Grid of a grid-stride loop over `rows` with one CTA per row.
inline unsigned grid_rows(std::int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : rows > (1 << 20) ? (1 << 20) : rows);
}

}  // namespace qnum::cuda::detail
