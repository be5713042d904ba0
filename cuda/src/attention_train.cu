// qnum::DeviceBackend on CUDA, part 3: training attention, forward and backward, as the CPU's
// scaled_dot_product_attention (tensor/ops_attention.hpp) computes it per (batch, head):
// S = Q·Kᵀ (cuBLAS, float32), × scale, + mask, softmax (one CTA per row, sums in double),
// dropout drawn at the flat index of [B, heads, Tq, T] after the softmax (the CPU's mask bit
// for bit), then P·V. The heads are read in place from the token-major [B, T, heads·D]
// layout: one strided-batched GEMM over the heads of each batch row.
#include <cstdint>

#include <cublas_v2.h>

#include "launch.cuh"
#include "nn_rows.cuh"
#include "qnum/core/rng.hpp"
#include "tensor_backend.cuh"

namespace qnum::cuda::detail {

namespace {

/// Row r of [B·heads·Tq, T] (r = (b·heads + h)·Tq + i): s = s·scale (+ mask[b]), softmax in
/// place; with dropout the mask at flat indices r·T + j and the dropped probabilities into pd.
__global__ void attention_probs_kernel(float* s, const float* mask, std::int64_t rows, std::int64_t Tq, std::int64_t T,
                                       std::int64_t heads, float scale, float p, float keep_scale, std::uint64_t seed,
                                       std::uint8_t* keep, float* pd) {
  __shared__ double shd[32];
  __shared__ float shf[32];
  const CounterRng rng(seed);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = s + r * T;
    const float* mrow = mask ? mask + (r / Tq / heads) * T : nullptr;
    for (std::int64_t j = threadIdx.x; j < T; j += blockDim.x) {
      float v = row[j] * scale;  // × scale and + mask rounded apart, as the CPU's two loops
      if (mrow) v = v + mrow[j];
      row[j] = v;
    }
    softmax_row(row, T, false, row, shd, shf);  // each thread reads back only what it wrote
    if (p > 0.0f)
      for (std::int64_t j = threadIdx.x; j < T; j += blockDim.x) {
        const std::uint64_t i = static_cast<std::uint64_t>(r * T + j);
        const bool k = rng.uniform4(i) >= p;
        keep[i] = k ? 1 : 0;
        pd[i] = row[j] * (k ? keep_scale : 0.0f);
      }
  }
}

/// Backward through dropout, softmax and × scale, in place on ds (= d(P after dropout)):
/// dp = ds·(keep ? keep_scale : 0), ds = float(P·(dp - Σ dp·P)), then ds·scale.
__global__ void attention_dscores_kernel(float* ds, const float* prob, const std::uint8_t* keep, std::int64_t rows,
                                         std::int64_t T, float keep_scale, float scale) {
  __shared__ double shd[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* dr = ds + r * T;
    const float* pr = prob + r * T;
    const std::uint8_t* kr = keep ? keep + r * T : nullptr;
    double s = 0.0;
    for (std::int64_t j = threadIdx.x; j < T; j += blockDim.x) {
      const float dp = kr ? dr[j] * (kr[j] ? keep_scale : 0.0f) : dr[j];
      s += static_cast<double>(dp) * pr[j];
    }
    s = block_sum(s, shd);
    for (std::int64_t j = threadIdx.x; j < T; j += blockDim.x) {
      const float dp = kr ? dr[j] * (kr[j] ? keep_scale : 0.0f) : dr[j];
      const float d = static_cast<float>(pr[j] * (dp - s));
      dr[j] = d * scale;
    }
  }
}

__global__ void keep_product_kernel(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * (keep[i] ? scale : 0.0f);
}

float keep_scale_of(float p) { return p > 0.0f ? static_cast<float>(1.0 / (1.0 - static_cast<double>(p))) : 1.0f; }

void check_sizes(const char* op, std::int64_t B, std::int64_t Tq, std::int64_t T, std::int64_t heads, std::int64_t D,
                 float p) {
  qnum::detail::require(B >= 0 && Tq >= 0 && T > 0 && heads > 0 && D > 0, "qnum::cuda ", op, ": bad sizes B ", B,
                        ", Tq ", Tq, ", T ", T, ", heads ", heads, ", D ", D);
  qnum::detail::require(p >= 0.0f && p < 1.0f, "qnum::cuda ", op, ": dropout probability ", p, " must be in [0, 1)");
}

__global__ void head_pointers_kernel(const float* a, std::int64_t ao, std::int64_t ah, const float* b,
                                     std::int64_t bo, std::int64_t bh, float* c, std::int64_t co, std::int64_t ch,
                                     std::int64_t heads, std::int64_t n, const float** pa, const float** pb,
                                     float** pc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::int64_t o = i / heads, h = i % heads;
  pa[i] = a + o * ao + h * ah;
  pb[i] = b + o * bo + h * bh;
  pc[i] = c + o * co + h * ch;
}

}  // namespace

void CudaBackend::gemm_heads(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                             const float* A, std::int64_t lda, std::int64_t a_outer, std::int64_t a_head,
                             const float* B, std::int64_t ldb, std::int64_t b_outer, std::int64_t b_head, float beta,
                             float* C, std::int64_t ldc, std::int64_t c_outer, std::int64_t c_head, std::int64_t outer,
                             std::int64_t heads) {
  const std::int64_t n = outer * heads;
  if (M == 0 || N == 0 || n == 0) return;
  if (K == 0) {  // an empty sum: gemm zeroes (scales) C per batch row
    for (std::int64_t o = 0; o < outer; ++o)
      gemm(trans_a, trans_b, M, N, K, alpha, A + o * a_outer, lda, a_head, B + o * b_outer, ldb, b_head, beta,
           C + o * c_outer, ldc, c_head, heads);
    return;
  }
  qnum::detail::require(M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX && n <= INT32_MAX,
                        "qnum::cuda attention: GEMM sizes ", M, "x", N, "x", K, " batch ", n, " out of range");
  Scratch<const float*> pa(*this, static_cast<std::size_t>(n)), pb(*this, static_cast<std::size_t>(n));
  Scratch<float*> pc(*this, static_cast<std::size_t>(n));
  head_pointers_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream()>>>(
      A, a_outer, a_head, B, b_outer, b_head, C, c_outer, c_head, heads, n, pa.get(), pb.get(), pc.get());
  check_launch("head_pointers_kernel");
  // Row-major C = op(A)·op(B) as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ (see gemm).
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  QNUM_CUBLAS_CHECK(cublasSgemmBatched(blas(), ob, oa, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                       &alpha, pb.get(), static_cast<int>(ldb), pa.get(), static_cast<int>(lda),
                                       &beta, pc.get(), static_cast<int>(ldc), static_cast<int>(n)));
}

void CudaBackend::attention(const float* q, const float* k, const float* v, const float* mask, std::int64_t B,
                            std::int64_t Tq, std::int64_t T, std::int64_t heads, std::int64_t D, float scale, float p,
                            std::uint64_t seed, float* probs, std::uint8_t* keep, float* out) {
  check_sizes("attention", B, Tq, T, heads, D, p);
  if (B == 0 || Tq == 0) return;
  const bool drop = p > 0.0f;
  qnum::detail::require(!drop || keep != nullptr, "qnum::cuda attention: dropout p ", p, " needs a keep buffer");
  const std::int64_t HD = heads * D, block = Tq * T, rows = B * heads * Tq;
  const auto scores = static_cast<std::size_t>(rows * T);
  // S = Q·Kᵀ per head into probs ([B, heads, Tq, T]), one strided batch of heads per batch row.
  gemm_heads(false, true, Tq, T, D, 1.0f, q, HD, Tq * HD, D, k, HD, T * HD, D, 0.0f, probs, T, heads * block, block, B,
             heads);
  Scratch<float> dropped(*this, drop ? scores : 0);
  const float ks = keep_scale_of(p);
  attention_probs_kernel<<<grid_rows(rows), row_threads(T), 0, stream()>>>(
      probs, mask, rows, Tq, T, heads, scale, p, ks, seed, drop ? keep : nullptr, drop ? dropped.get() : nullptr);
  check_launch("attention_probs_kernel");
  const float* pv = drop ? dropped.get() : probs;
  // out = P·V, written in place of the heads' columns
  gemm_heads(false, false, Tq, D, T, 1.0f, pv, T, heads * block, block, v, HD, T * HD, D, 0.0f, out, HD, Tq * HD, D, B,
             heads);
}

void CudaBackend::attention_backward(const float* g, const float* q, const float* k, const float* v,
                                     const float* probs, const std::uint8_t* keep, std::int64_t B, std::int64_t Tq,
                                     std::int64_t T, std::int64_t heads, std::int64_t D, float scale, float p,
                                     float* gq, float* gk, float* gv) {
  check_sizes("attention_backward", B, Tq, T, heads, D, p);
  if (B == 0) return;
  const bool drop = p > 0.0f;
  qnum::detail::require(!drop || keep != nullptr, "qnum::cuda attention_backward: dropout p ", p,
                        " needs the forward's keep buffer");
  const std::int64_t HD = heads * D, block = Tq * T, rows = B * heads * Tq;
  const auto scores = static_cast<std::size_t>(rows * T);
  const float ks = keep_scale_of(p);
  Scratch<float> ds(*this, scores);
  // d(P after dropout) = dO·Vᵀ
  gemm_heads(false, true, Tq, T, D, 1.0f, g, HD, Tq * HD, D, v, HD, T * HD, D, 0.0f, ds.get(), T, heads * block, block,
             B, heads);
  {
    Scratch<float> dropped(*this, drop ? scores : 0);
    const float* pd = probs;
    if (drop && scores > 0) {
      keep_product_kernel<<<grid_1d(scores), 256, 0, stream()>>>(probs, keep, ks, dropped.get(), scores);
      check_launch("keep_product_kernel");
      pd = dropped.get();
    }
    // dV = Pᵀ·dO (P after dropout)
    gemm_heads(true, false, T, D, Tq, 1.0f, pd, T, heads * block, block, g, HD, Tq * HD, D, 0.0f, gv, HD, T * HD, D, B,
               heads);
  }
  if (rows > 0) {
    attention_dscores_kernel<<<grid_rows(rows), row_threads(T), 0, stream()>>>(ds.get(), probs,
                                                                               drop ? keep : nullptr, rows, T, ks,
                                                                               scale);
    check_launch("attention_dscores_kernel");
  }
  // dQ = dS·K, dK = dSᵀ·Q
  if (Tq > 0)
    gemm_heads(false, false, Tq, D, T, 1.0f, ds.get(), T, heads * block, block, k, HD, T * HD, D, 0.0f, gq, HD, Tq * HD,
               D, B, heads);
  gemm_heads(true, false, T, D, Tq, 1.0f, ds.get(), T, heads * block, block, q, HD, Tq * HD, D, 0.0f, gk, HD, T * HD, D,
             B, heads);
}

}  // namespace qnum::cuda::detail
