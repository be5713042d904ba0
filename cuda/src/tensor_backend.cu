// qnum::DeviceBackend on CUDA, part 1: state, memory, GEMM, elementwise, reductions, permute,
// the Adam step, format quantize, the clip mask and the MXINT8 Linear (see tensor_backend.cuh).
#include <cublas_v2.h>

#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>
#include <string>
#include <type_traits>
#include <variant>

#include "launch.cuh"
#include "nn_rows.cuh"
#include "qnum/cuda/backend.hpp"
#include "qnum/cuda/check.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/cuda/quantize.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/mx_packed.hpp"
#include "tensor_backend.cuh"

namespace qnum::cuda {

qnum::DeviceBackend& tensor_backend() {
  static auto* backend = new detail::CudaBackend();  // never destroyed: see backend.hpp
  return *backend;
}

namespace detail {

namespace {

constexpr int kT = 256;

// ---- elementwise kernels (grid-stride) ----------------------------------------------------

__global__ void fill_kernel(float* x, float v, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = v;
}

template <int Op>
__global__ void binary_kernel(const float* a, const float* b, std::size_t n, std::size_t nb, float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float x = a[i], y = b[nb == 1 ? 0 : i % nb];
    out[i] = Op == 0 ? x + y : Op == 1 ? x - y : Op == 2 ? x * y : x / y;
  }
}

__global__ void affine_kernel(const float* x, float scale, float shift, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float t = x[i] * scale;  // rounded apart (--fmad=false): mul_scalar then add_scalar
    y[i] = t + shift;
  }
}

// Transcendentals in double, rounded once to float (within an ulp of glibc's float functions).
__device__ float gelu_d(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
}
__device__ float gelu_grad_d(float x) {
  const double v = x;
  const double cdf = 0.5 * (1.0 + erf(v * 0.70710678118654752440));
  const double pdf = 0.39894228040143267794 * exp(-0.5 * v * v);
  return static_cast<float>(cdf + v * pdf);
}

template <int F>
__global__ void unary_kernel(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    float r;
    if constexpr (F == 0) r = static_cast<float>(exp(static_cast<double>(v)));
    else if constexpr (F == 1) r = static_cast<float>(log(static_cast<double>(v)));
    else if constexpr (F == 2) r = v > 0.0f ? v : 0.0f;
    else if constexpr (F == 3) r = gelu_d(v);
    else if constexpr (F == 4) r = static_cast<float>(tanh(static_cast<double>(v)));
    else {
      const float e = static_cast<float>(exp(-static_cast<double>(v)));
      r = 1.0f / (1.0f + e);  // the CPU's 1 / (1 + exp(-x)) in float
    }
    y[i] = r;
  }
}

template <int F>
__global__ void unary_backward_kernel(const float* g, const float* x, const float* y, float* gx, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float d;
    if constexpr (F == 0) d = y[i];
    else if constexpr (F == 1) d = 1.0f / x[i];
    else if constexpr (F == 2) d = x[i] > 0.0f ? 1.0f : 0.0f;
    else if constexpr (F == 3) d = gelu_grad_d(x[i]);
    else if constexpr (F == 4) {
      const float yy = y[i] * y[i];
      d = 1.0f - yy;
    } else {
      const float one_minus = 1.0f - y[i];
      d = y[i] * one_minus;
    }
    gx[i] = g[i] * d;
  }
}

// ---- reductions ---------------------------------------------------------------------------

/// inner == 1: one CTA per output, Σ in double.
__global__ void reduce_rows_kernel(const float* x, std::int64_t outer, std::int64_t n, double scale, float* out) {
  __shared__ double sh[32];
  for (std::int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    double s = 0.0;
    for (std::int64_t k = threadIdx.x; k < n; k += blockDim.x) s += x[o * n + k];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[o] = static_cast<float>(s * scale);
  }
}

/// inner > 1, phase 1: partial[(o·chunks + ch)·inner + i] = Σ over chunk ch of k (double).
__global__ void reduce_partial_kernel(const float* x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                      std::int64_t chunks, std::int64_t chunk, double* partial) {
  const std::int64_t total = outer * chunks * inner;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = t % inner, ch = (t / inner) % chunks, o = t / (inner * chunks);
    const std::int64_t k0 = ch * chunk, k1 = k0 + chunk < n ? k0 + chunk : n;
    double s = 0.0;
    for (std::int64_t k = k0; k < k1; ++k) s += x[(o * n + k) * inner + i];
    partial[t] = s;
  }
}
/// Phase 2: out[o·inner + i] = scale · Σ_ch partial.
__global__ void reduce_final_kernel(const double* partial, std::int64_t outer, std::int64_t inner,
                                    std::int64_t chunks, double scale, float* out) {
  const std::int64_t total = outer * inner;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = t % inner, o = t / inner;
    double s = 0.0;
    for (std::int64_t ch = 0; ch < chunks; ++ch) s += partial[(o * chunks + ch) * inner + i];
    out[t] = static_cast<float>(s * scale);
  }
}

struct PermuteArgs {
  std::int64_t ys[4];       // y's shape
  std::int64_t xstride[4];  // x's stride of the dimension y's dimension d reads
  int rank;
};
__global__ void permute_kernel(const float* x, PermuteArgs a, std::size_t n, float* y) {
  for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    auto r = static_cast<std::int64_t>(t);
    std::int64_t off = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      off += (r % a.ys[d]) * a.xstride[d];
      r /= a.ys[d];
    }
    y[t] = x[off];
  }
}

// ---- optimizer, clip mask, MXINT8 helpers -------------------------------------------------

// nn::AdamBase::update for element j, operation for operation: the products stored apart
// (p·keep, v·β2) rounded on their own, fmaf where the CPU calls std::fma, IEEE sqrt and division.
__device__ inline void adam_element(const DeviceBackend::AdamStep& s, float* p, const float* g, float* m, float* v,
                                    std::size_t j) {
    float pj = p[j];
    if (s.keep != 1.0f) pj = pj * s.keep;
    const float vb = v[j] * s.b2;
    float gj = g[j];
    if (s.l2_wd != 0.0f) gj = fmaf(pj, s.l2_wd, gj);
    const float mj = fmaf(s.w1, gj - m[j], m[j]);
    const float w2g = s.w2 * gj;
    const float vj = fmaf(w2g, gj, vb);
    const float denom = __fsqrt_rn(vj) / s.bc2_sqrt + s.eps;
    const float step = s.neg_step * mj;
    m[j] = mj;
    v[j] = vj;
    p[j] = pj + step / denom;
}

__global__ void adam_kernel(DeviceBackend::AdamStep s, float* p, const float* g, float* m, float* v, std::size_t n) {
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    adam_element(s, p, g, m, v, j);
}

/// One tensor of a multi-tensor call (adam_step_multi, sum_squares_multi, scale_multi).
struct TensorSlot {
  float* p;
  const float* g;
  float* m;
  float* v;
  std::size_t n;
};

// blockIdx.y: the tensor; x: a grid-stride loop over its elements.
__global__ void adam_multi_kernel(DeviceBackend::AdamStep s, const TensorSlot* t) {
  const TensorSlot& x = t[blockIdx.y];
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < x.n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    adam_element(s, x.p, x.g, x.m, x.v, j);
}

__global__ void sum_squares_multi_kernel(const TensorSlot* t, double* out) {
  const TensorSlot& x = t[blockIdx.y];
  double acc = 0.0;
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < x.n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    acc += static_cast<double>(x.g[j]) * x.g[j];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  __shared__ double warp_sums[32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = 0.0;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) b += warp_sums[w];
    atomicAdd(out, b);
  }
}

__global__ void norm_factor_kernel(const double* sum_sq, float max_norm, float* sum_out, float* norm, float* factor) {
  const double nv = sqrt(sum_sq[0]), f = static_cast<double>(max_norm) / (nv + 1e-6);
  if (sum_out) sum_out[0] = static_cast<float>(sum_sq[0]);
  norm[0] = static_cast<float>(nv);
  factor[0] = static_cast<float>(max_norm > 0.0f && f < 1.0 ? f : 1.0);
}

__global__ void to_double_kernel(const float* x, double* y) { y[0] = x[0]; }

__global__ void scale_multi_kernel(const TensorSlot* t, const float* factor) {
  const TensorSlot& x = t[blockIdx.y];
  const float f = factor[0];
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < x.n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x.p[j] = x.p[j] * f;
}

__global__ void range_mask_kernel(const float* x, std::size_t n, double lo, double hi, std::uint8_t* keep) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    keep[i] = (v >= lo && v <= hi) ? 1 : 0;
  }
}

__global__ void to_bf16_kernel(const float* x, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = qnum::detail::mx_float_to_bf16_bits(x[i]);  // round to nearest even, as format/mx_packed.hpp
}

__global__ void mxint8_rows_kernel(const std::int64_t* idx, std::size_t n, const std::int8_t* m,
                                   const std::uint8_t* s, std::size_t c, float* out) {
  for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < n * c;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t j = static_cast<std::size_t>(idx[t / c]) * c + t % c;
    out[t] = qnum::detail::mx_bf16_bits_to_float(qnum::dequantize_mxint8_to_bf16_bits(m[j], s[j / 32]));
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t M, std::size_t N) {
  const std::size_t n = M * N;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = y[i] + bias[i % N];
}

__global__ void scale_c_kernel(float* C, std::int64_t M, std::int64_t N, std::int64_t ldc, std::int64_t stride_c,
                               std::int64_t batch, float beta) {
  const std::int64_t total = batch * M * N;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = t % N, i = (t / N) % M, b = t / (M * N);
    float& c = C[b * stride_c + i * ldc + j];
    c = beta == 0.0f ? 0.0f : beta * c;
  }
}

bool fits_int(std::int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

}  // namespace

// ---- state and memory ---------------------------------------------------------------------

int CudaBackend::device_count() noexcept { return qnum::cuda::device_count(); }

void CudaBackend::init() {
  std::call_once(once_, [this] {
    qnum::detail::require(qnum::cuda::device_count() > 0,
                          "qnum::cuda: no CUDA device (cudaGetDeviceCount found none): device tensors need a GPU");
    QNUM_CUDA_CHECK(cudaSetDevice(0));
    QNUM_CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: ordered with the legacy default stream too
    // Freed blocks stay in the pool for the next allocation (as PyTorch's caching allocator):
    // with the default threshold 0 every synchronisation hands them back to the driver and a
    // training step's allocations become driver calls. memory_stats' counters are unaffected.
    cudaMemPool_t pool = nullptr;
    QNUM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    QNUM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  });
}

cudaStream_t CudaBackend::stream() {
  init();
  return stream_;
}

cublasContext* CudaBackend::blas() {
  init();
  std::lock_guard<std::mutex> lock(mem_mutex_);
  if (blas_ == nullptr) {
    cublasHandle_t h = nullptr;
    QNUM_CUBLAS_CHECK(cublasCreate(&h));
    QNUM_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // float32 GEMMs stay float32 (no TF32)
    QNUM_CUBLAS_CHECK(cublasSetStream(h, stream_));
    blas_ = h;
  }
  return blas_;
}

std::string CudaBackend::name() {
  init();
  cudaDeviceProp prop{};
  QNUM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return std::string(prop.name) + ", cuda:0";
}

void* CudaBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  cudaStream_t s = stream();
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, bytes, s);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    (void)cudaGetLastError();
    qnum::detail::fail("qnum::cuda: out of device memory: allocating ", bytes, " bytes (", bytes >> 20,
                       " MiB) failed with ", cudaGetErrorName(e), "; ", free_b, " bytes (", free_b >> 20,
                       " MiB) free of ", total_b, " (", allocated_, " bytes held by qnum tensors)");
  }
  std::lock_guard<std::mutex> lock(mem_mutex_);
  sizes_[p] = bytes;
  allocated_ += bytes;
  if (allocated_ > peak_) peak_ = allocated_;
  return p;
}

void CudaBackend::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  try {
    std::lock_guard<std::mutex> lock(mem_mutex_);
    const auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      allocated_ -= it->second;
      sizes_.erase(it);
    }
  } catch (...) {  // a failed lock: the counters miss one free, the memory is still released
  }
  (void)cudaFreeAsync(p, stream_);
  (void)cudaGetLastError();  // after the driver shut down (static destruction), nothing to do
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  QNUM_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
}
void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  QNUM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  QNUM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaBackend::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  QNUM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}
void CudaBackend::copy_rows(float* dst, std::int64_t dst_stride, const float* src, std::int64_t src_stride,
                            std::int64_t rows, std::int64_t width) {
  if (rows <= 0 || width <= 0) return;
  constexpr auto f = sizeof(float);
  QNUM_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(dst_stride) * f, src,
                                    static_cast<std::size_t>(src_stride) * f, static_cast<std::size_t>(width) * f,
                                    static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream()));
}
void CudaBackend::fill(float* x, float value, std::size_t n) {
  if (n == 0) return;
  fill_kernel<<<grid_1d(n), kT, 0, stream()>>>(x, value, n);
  check_launch("fill_kernel");
}
void CudaBackend::synchronize() { QNUM_CUDA_CHECK(cudaStreamSynchronize(stream())); }

DeviceBackend::MemoryStats CudaBackend::memory_stats() {
  init();
  MemoryStats st;
  std::size_t free_b = 0, total_b = 0;
  QNUM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  st.device_total = total_b;
  st.device_used = total_b - free_b;
  std::lock_guard<std::mutex> lock(mem_mutex_);
  st.allocated = allocated_;
  st.peak_allocated = peak_;
  return st;
}
void CudaBackend::reset_peak() {
  std::lock_guard<std::mutex> lock(mem_mutex_);
  peak_ = allocated_;
}

// ---- GEMM ---------------------------------------------------------------------------------

void CudaBackend::gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                       const float* A, std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb,
                       std::int64_t stride_b, float beta, float* C, std::int64_t ldc, std::int64_t stride_c,
                       std::int64_t batch) {
  qnum::detail::require(M >= 0 && N >= 0 && K >= 0 && batch >= 0, "qnum::cuda gemm: negative size ", M, "x", N, "x",
                        K, " batch ", batch);
  if (M == 0 || N == 0 || batch == 0) return;
  qnum::detail::require(fits_int(M) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) &&
                            fits_int(ldc) && fits_int(batch),
                        "qnum::cuda gemm: sizes ", M, "x", N, "x", K, " (lda ", lda, ", ldb ", ldb, ", ldc ", ldc,
                        ", batch ", batch, ") exceed cuBLAS's int range");
  if (K == 0) {  // an empty sum: C = beta·C (0 when beta is 0, as BLAS, which never reads C then)
    const std::size_t total = static_cast<std::size_t>(batch * M * N);
    scale_c_kernel<<<grid_1d(total), kT, 0, stream()>>>(C, M, N, ldc, stride_c, batch, beta);
    check_launch("scale_c_kernel");
    return;
  }
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's row-major storage is its
  // transpose in column-major, so B goes first with B's flag, then A with A's.
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    QNUM_CUBLAS_CHECK(cublasSgemm(blas(), ob, oa, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                  &alpha, B, static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C,
                                  static_cast<int>(ldc)));
  } else {
    QNUM_CUBLAS_CHECK(cublasSgemmStridedBatched(blas(), ob, oa, static_cast<int>(N), static_cast<int>(M),
                                                static_cast<int>(K), &alpha, B, static_cast<int>(ldb), stride_b, A,
                                                static_cast<int>(lda), stride_a, &beta, C, static_cast<int>(ldc),
                                                stride_c, static_cast<int>(batch)));
  }
}

// ---- elementwise --------------------------------------------------------------------------

void CudaBackend::binary(Binary op, const float* a, const float* b, std::size_t n, std::size_t nb, float* out) {
  if (n == 0) return;
  qnum::detail::require(nb > 0 && n % nb == 0, "qnum::cuda binary: ", nb, " values of b do not repeat into ", n);
  const unsigned g = grid_1d(n);
  cudaStream_t s = stream();
  switch (op) {
    case Binary::add: binary_kernel<0><<<g, kT, 0, s>>>(a, b, n, nb, out); break;
    case Binary::sub: binary_kernel<1><<<g, kT, 0, s>>>(a, b, n, nb, out); break;
    case Binary::mul: binary_kernel<2><<<g, kT, 0, s>>>(a, b, n, nb, out); break;
    case Binary::div: binary_kernel<3><<<g, kT, 0, s>>>(a, b, n, nb, out); break;
  }
  check_launch("binary_kernel");
}

void CudaBackend::affine(const float* x, float scale, float shift, float* y, std::size_t n) {
  if (n == 0) return;
  affine_kernel<<<grid_1d(n), kT, 0, stream()>>>(x, scale, shift, y, n);
  check_launch("affine_kernel");
}

void CudaBackend::unary(Unary f, const float* x, float* y, std::size_t n) {
  if (n == 0) return;
  const unsigned g = grid_1d(n);
  cudaStream_t s = stream();
  switch (f) {
    case Unary::exp: unary_kernel<0><<<g, kT, 0, s>>>(x, y, n); break;
    case Unary::log: unary_kernel<1><<<g, kT, 0, s>>>(x, y, n); break;
    case Unary::relu: unary_kernel<2><<<g, kT, 0, s>>>(x, y, n); break;
    case Unary::gelu: unary_kernel<3><<<g, kT, 0, s>>>(x, y, n); break;
    case Unary::tanh: unary_kernel<4><<<g, kT, 0, s>>>(x, y, n); break;
    case Unary::sigmoid: unary_kernel<5><<<g, kT, 0, s>>>(x, y, n); break;
  }
  check_launch("unary_kernel");
}

void CudaBackend::unary_backward(Unary f, const float* gr, const float* x, const float* y, float* gx, std::size_t n) {
  if (n == 0) return;
  const unsigned g = grid_1d(n);
  cudaStream_t s = stream();
  switch (f) {
    case Unary::exp: unary_backward_kernel<0><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
    case Unary::log: unary_backward_kernel<1><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
    case Unary::relu: unary_backward_kernel<2><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
    case Unary::gelu: unary_backward_kernel<3><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
    case Unary::tanh: unary_backward_kernel<4><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
    case Unary::sigmoid: unary_backward_kernel<5><<<g, kT, 0, s>>>(gr, x, y, gx, n); break;
  }
  check_launch("unary_backward_kernel");
}

void CudaBackend::reduce_sum(const float* x, std::int64_t outer, std::int64_t n, std::int64_t inner, float scale,
                             float* out) {
  qnum::detail::require(outer >= 0 && n >= 0 && inner >= 0, "qnum::cuda reduce_sum: negative size");
  if (outer == 0 || inner == 0) return;
  if (n == 0) return fill(out, 0.0f, static_cast<std::size_t>(outer * inner));
  const double sc = scale;
  if (inner == 1) {
    reduce_rows_kernel<<<grid_rows(outer), kT, 0, stream()>>>(x, outer, n, sc, out);
    check_launch("reduce_rows_kernel");
    return;
  }
  // Chunks of >= 64 along n, so that about 64k threads run when outer·inner is small.
  const std::int64_t outputs = outer * inner;
  std::int64_t chunks = (65536 + outputs - 1) / outputs;
  if (chunks > (n + 63) / 64) chunks = (n + 63) / 64;
  if (chunks < 1) chunks = 1;
  const std::int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  Scratch<double> partial(*this, static_cast<std::size_t>(outputs * chunks));
  reduce_partial_kernel<<<grid_1d(static_cast<std::size_t>(outputs * chunks)), kT, 0, stream()>>>(
      x, outer, n, inner, chunks, chunk, partial.get());
  check_launch("reduce_partial_kernel");
  reduce_final_kernel<<<grid_1d(static_cast<std::size_t>(outputs)), kT, 0, stream()>>>(partial.get(), outer, inner,
                                                                                          chunks, sc, out);
  check_launch("reduce_final_kernel");
}

void CudaBackend::permute(const float* x, const std::int64_t* shape, const int* perm, int rank, float* y) {
  qnum::detail::require(rank >= 0 && rank <= 4, "qnum::cuda permute: rank ", rank, " (at most 4)");
  PermuteArgs a{};
  a.rank = rank;
  std::int64_t xs[4] = {1, 1, 1, 1};
  std::size_t n = 1;
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[d] = stride;
    stride *= shape[d];
  }
  bool seen[4] = {false, false, false, false};
  for (int d = 0; d < rank; ++d) {
    qnum::detail::require(perm[d] >= 0 && perm[d] < rank && !seen[perm[d]], "qnum::cuda permute: perm is not a "
                                                                            "permutation of 0..",
                          rank - 1);
    seen[perm[d]] = true;
    a.ys[d] = shape[perm[d]];
    a.xstride[d] = xs[perm[d]];
    n *= static_cast<std::size_t>(shape[d]);
  }
  if (n == 0) return;
  permute_kernel<<<grid_1d(n), kT, 0, stream()>>>(x, a, n, y);
  check_launch("permute_kernel");
}

// ---- optimizer, formats -------------------------------------------------------------------

void CudaBackend::adam_step(const AdamStep& s, float* p, const float* g, float* m, float* v, std::size_t n) {
  if (n == 0) return;
  adam_kernel<<<grid_1d(n), kT, 0, stream()>>>(s, p, g, m, v, n);
  check_launch("adam_kernel");
}

namespace {
/// The slots on the device (one small upload) and the grid: x covers the largest tensor.
struct Slots {
  Scratch<TensorSlot> device;
  dim3 grid;
  Slots(CudaBackend& b, const std::vector<TensorSlot>& host, cudaStream_t st) : device(b, host.size()) {
    std::size_t most = 0;
    for (const auto& t : host) most = std::max(most, t.n);
    b.copy_to_device(device.get(), host.data(), host.size() * sizeof(TensorSlot));
    grid = dim3(std::min<unsigned>(grid_1d(most), 1024u), static_cast<unsigned>(host.size()));
    (void)st;
  }
};
void require_slots(std::size_t count, const char* what) {
  qnum::detail::require(count <= 65535, "qnum::cuda ", what, ": ", count, " tensors in one call (at most 65535)");
}
}  // namespace

void CudaBackend::adam_step_multi(const AdamStep& s, float* const* p, const float* const* g, float* const* m,
                                  float* const* v, const std::size_t* n, std::size_t count) {
  if (count == 0) return;
  require_slots(count, "adam_step_multi");
  std::vector<TensorSlot> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = {p[i], g[i], m[i], v[i], n[i]};
  const Slots slots(*this, host, stream());
  adam_multi_kernel<<<slots.grid, kT, 0, stream()>>>(s, slots.device.get());
  check_launch("adam_multi_kernel");
}

void CudaBackend::sum_squares_multi(const float* const* x, const std::size_t* n, std::size_t count, float* out) {
  require_slots(count, "sum_squares_multi");
  Scratch<double> acc(*this, 1);
  QNUM_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, sizeof(double), stream()));
  if (count > 0) {
    std::vector<TensorSlot> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = {nullptr, x[i], nullptr, nullptr, n[i]};
    const Slots slots(*this, host, stream());
    sum_squares_multi_kernel<<<slots.grid, kT, 0, stream()>>>(slots.device.get(), acc.get());
    check_launch("sum_squares_multi_kernel");
  }
  // The double total into out as float (the factor kernel below reads the float too).
  Scratch<float> unused_norm(*this, 1), unused_factor(*this, 1);
  norm_factor_kernel<<<1, 1, 0, stream()>>>(acc.get(), 0.0f, out, unused_norm.get(), unused_factor.get());
  check_launch("norm_factor_kernel");
}

void CudaBackend::grad_norm_factor(const float* sum_sq, float max_norm, float* norm, float* factor) {
  Scratch<double> d(*this, 1);
  to_double_kernel<<<1, 1, 0, stream()>>>(sum_sq, d.get());
  check_launch("to_double_kernel");
  norm_factor_kernel<<<1, 1, 0, stream()>>>(d.get(), max_norm, nullptr, norm, factor);
  check_launch("norm_factor_kernel");
}

void CudaBackend::scale_multi(float* const* x, const std::size_t* n, std::size_t count, const float* factor) {
  if (count == 0) return;
  require_slots(count, "scale_multi");
  std::vector<TensorSlot> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = {x[i], nullptr, nullptr, nullptr, n[i]};
  const Slots slots(*this, host, stream());
  scale_multi_kernel<<<slots.grid, kT, 0, stream()>>>(slots.device.get(), factor);
  check_launch("scale_multi_kernel");
}

void CudaBackend::quantize(const Format& f, const float* x, const std::int64_t* shape, int rank, bool weight_role,
                           float* y) {
  qnum::detail::require(rank >= 0 && rank <= 4, "qnum::cuda quantize: rank ", rank, " (at most 4)");
  const Shape sh(shape, shape + rank);
  const std::int64_t count = numel(sh);
  f.validate();
  if (f.output_shape(sh) != sh)
    qnum::detail::fail("qnum::cuda quantize: ", f.family(), " gives a tensor of shape ",
                       to_string(f.output_shape(sh)), " for ", to_string(sh),
                       " (stacked levels); device tensors quantize in place of the input's shape");
  if (count == 0) return;
  const auto n = static_cast<std::size_t>(count);
  const Role role = weight_role ? Role::weight : Role::activation;
  const Policy& pol = f.policy;
  cudaStream_t st = stream();
  std::visit(
      [&](const auto& s) {
        // Each family's device entry point, found by its signature (qnum/cuda/quantize/<family>.hpp).
        if constexpr (requires { qnum::cuda::quantize(s, pol, x, y, n, sh, role, st); })
          qnum::cuda::quantize(s, pol, x, y, n, sh, role, st);  // block families
        else if constexpr (requires { qnum::cuda::quantize(s, pol, x, y, sh, role, st); })
          qnum::cuda::quantize(s, pol, x, y, sh, role, st);  // scaled integers, MX tensors, nvfp4
        else if constexpr (requires { qnum::cuda::quantize(s, pol, x, y, sh, st); })
          qnum::cuda::quantize(s, pol, x, y, sh, st);  // binary family, ternary
        else if constexpr (requires { qnum::cuda::quantize(s, pol, x, y, n, std::uint64_t{0}, st); })
          qnum::cuda::quantize(s, pol, x, y, n, std::uint64_t{0}, st);  // elementwise (first flat index 0)
        else
          qnum::detail::fail("qnum::cuda quantize: the family ", s.name,
                             " has no device kernel (quantize on the CPU, or add one to cuda/)");
      },
      f.spec);
}

void CudaBackend::range_mask(const float* x, std::size_t n, double lo, double hi, std::uint8_t* keep) {
  if (n == 0) return;
  range_mask_kernel<<<grid_1d(n), kT, 0, stream()>>>(x, n, lo, hi, keep);
  check_launch("range_mask_kernel");
}

// ---- MXINT8-packed Linear -----------------------------------------------------------------

void CudaBackend::mxint8_pack(const float* w, std::int64_t N, std::int64_t K, std::int8_t* mantissa,
                              std::uint8_t* scale) {
  qnum::detail::require(N > 0 && K > 0 && K % 32 == 0, "qnum::cuda mxint8_pack: weight [", N, ", ", K,
                        "] needs K a positive multiple of 32 (the group)");
  mxint8_mase_cuda_quantize(w, static_cast<std::size_t>(N) * static_cast<std::size_t>(K), 32, mantissa, scale,
                            stream());
}

void CudaBackend::mxint8_linear(const float* x, const std::int8_t* mantissa, const std::uint8_t* scale,
                                const float* bias, std::int64_t M, std::int64_t N, std::int64_t K, float* y) {
  qnum::detail::require(M > 0 && N > 0 && K > 0 && K % 32 == 0 && fits_int(M) && fits_int(N) && fits_int(K),
                        "qnum::cuda mxint8_linear: x [", M, ", ", K, "] by packed W [", N, ", ", K,
                        "]: sizes must be positive ints and K a multiple of 32");
  cudaStream_t st = stream();
  // Transient: both bf16 copies are freed (stream-ordered) when this call returns; the
  // tracked allocator counts them, so a peak measured around the call includes them.
  const std::size_t xk = static_cast<std::size_t>(M) * static_cast<std::size_t>(K);
  const std::size_t wk = static_cast<std::size_t>(N) * static_cast<std::size_t>(K);
  Scratch<std::uint16_t> x_bf16(*this, xk), w_bf16(*this, wk);
  to_bf16_kernel<<<grid_1d(xk), kT, 0, st>>>(x, xk, x_bf16.get());
  check_launch("to_bf16_kernel");
  mxint8_gemm_dequantize_cublas(x_bf16.get(), mantissa, scale, w_bf16.get(), y, static_cast<int>(M),
                                static_cast<int>(N), static_cast<int>(K), st);
  if (bias != nullptr) {
    add_bias_kernel<<<grid_1d(static_cast<std::size_t>(M) * static_cast<std::size_t>(N)), kT, 0, st>>>(
        y, bias, static_cast<std::size_t>(M), static_cast<std::size_t>(N));
    check_launch("add_bias_kernel");
  }
}

void CudaBackend::mxint8_embedding(const std::int64_t* idx, std::int64_t n, const std::int8_t* mantissa,
                                   const std::uint8_t* scale, std::int64_t c, float* out) {
  qnum::detail::require(n >= 0 && c > 0 && c % 32 == 0, "qnum::cuda mxint8_embedding: rows of ", c,
                        " values; c must be a positive multiple of 32 (the group)");
  const std::size_t total = static_cast<std::size_t>(n) * static_cast<std::size_t>(c);
  if (total == 0) return;
  mxint8_rows_kernel<<<grid_1d(total), kT, 0, stream()>>>(idx, static_cast<std::size_t>(n), mantissa, scale,
                                                          static_cast<std::size_t>(c), out);
  check_launch("mxint8_rows_kernel");
}

}  // namespace detail
}  // namespace qnum::cuda
