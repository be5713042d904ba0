// qnum::DeviceBackend on CUDA, part 2: the neural-network row ops (layer_norm, softmax,
// cross_entropy and their backwards), embedding, dropout and its mask product.
//
// Row ops run one CTA per row (grid-stride over rows), sums in double as the CPU's ops
// (tensor/ops_nn.hpp) take them; the order of the additions differs from the CPU's, so the
// results agree within a few float ulps rather than bit for bit. Dropout's mask is the CPU's
// bit for bit (CounterRng::uniform4 of the same flat index).
#include <cstdint>

#include "launch.cuh"
#include "nn_rows.cuh"
#include "qnum/core/rng.hpp"
#include "qnum/cuda/kernels.hpp"
#include "tensor_backend.cuh"

namespace qnum::cuda::detail {

namespace {

constexpr int kT = 256;

// ---- layer_norm ---------------------------------------------------------------------------

__global__ void layer_norm_kernel(const float* x, std::int64_t rows, std::int64_t c, const float* w, const float* b,
                                  float eps, float* y, float* mean, float* rstd) {
  __shared__ double sh[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * c;
    double s = 0.0;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) s += xr[k];
    const double m = block_sum(s, sh) / static_cast<double>(c);
    double q = 0.0;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const double d = xr[k] - m;
      q += d * d;
    }
    const double var = block_sum(q, sh) / static_cast<double>(c);
    const double rs = 1.0 / sqrt(var + static_cast<double>(eps));
    float* yr = y + r * c;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const float h = static_cast<float>((xr[k] - m) * rs);  // x̂, rounded as the CPU's
      const float hw = h * (w ? w[k] : 1.0f);
      yr[k] = hw + (b ? b[k] : 0.0f);
    }
    if (threadIdx.x == 0) {
      mean[r] = static_cast<float>(m);
      rstd[r] = static_cast<float>(rs);
    }
  }
}

__device__ float ln_xhat(float x, float mean, float rstd) {
  return static_cast<float>((static_cast<double>(x) - static_cast<double>(mean)) * static_cast<double>(rstd));
}

__global__ void layer_norm_backward_kernel(const float* g, const float* x, const float* mean, const float* rstd,
                                           const float* w, std::int64_t rows, std::int64_t c, float* gx) {
  __shared__ double sh[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* gr = g + r * c;
    const float* xr = x + r * c;
    const float mu = mean[r], rs = rstd[r];
    double s1 = 0.0, s2 = 0.0;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const double gw = static_cast<double>(gr[k]) * (w ? w[k] : 1.0f);
      s1 += gw;
      s2 += gw * ln_xhat(xr[k], mu, rs);
    }
    const double m1 = block_sum(s1, sh) / static_cast<double>(c);
    const double m2 = block_sum(s2, sh) / static_cast<double>(c);
    const double sd = rs;
    float* out = gx + r * c;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const double gw = static_cast<double>(gr[k]) * (w ? w[k] : 1.0f);
      out[k] = static_cast<float>(sd * (gw - m1 - ln_xhat(xr[k], mu, rs) * m2));
    }
  }
}

/// gw, gb partial sums over chunks of rows: partial[ch·c + k] (gw) and partial[(chunks + ch)·c + k] (gb).
__global__ void layer_norm_param_partial_kernel(const float* g, const float* x, const float* mean, const float* rstd,
                                                std::int64_t rows, std::int64_t c, std::int64_t chunks,
                                                std::int64_t chunk, double* partial) {
  const std::int64_t total = chunks * c;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t k = t % c, ch = t / c;
    const std::int64_t r0 = ch * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    double sw = 0.0, sb = 0.0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const float gv = g[r * c + k];
      sw += static_cast<double>(gv) * ln_xhat(x[r * c + k], mean[r], rstd[r]);
      sb += gv;
    }
    partial[t] = sw;
    partial[total + t] = sb;
  }
}
__global__ void layer_norm_param_final_kernel(const double* partial, std::int64_t c, std::int64_t chunks, float* gw,
                                              float* gb) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < c;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double sw = 0.0, sb = 0.0;
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      sw += partial[ch * c + k];
      sb += partial[(chunks + ch) * c + k];
    }
    if (gw) gw[k] = static_cast<float>(sw);
    if (gb) gb[k] = static_cast<float>(sb);
  }
}

// ---- cross_entropy ------------------------------------------------------------------------

/// One CTA: Σ -logp[r, t_r] and the count over rows whose target counts; loss = mean (0 if none).
__global__ void cross_entropy_loss_kernel(const float* logp, const std::int64_t* t, std::int64_t rows, std::int64_t c,
                                          std::int64_t ignore, float* loss) {
  __shared__ double sh[32];
  double s = 0.0, cnt = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const std::int64_t tr = t[r];
    if (tr == ignore || tr < 0 || tr >= c) continue;
    s -= logp[r * c + tr];
    cnt += 1.0;
  }
  s = block_sum(s, sh);
  cnt = block_sum(cnt, sh);
  if (threadIdx.x == 0) loss[0] = cnt == 0.0 ? 0.0f : static_cast<float>(s / cnt);
}

__global__ void count_targets_kernel(const std::int64_t* t, std::int64_t rows, std::int64_t c, std::int64_t ignore,
                                     double* count) {
  __shared__ double sh[32];
  double cnt = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const std::int64_t tr = t[r];
    if (tr != ignore && tr >= 0 && tr < c) cnt += 1.0;
  }
  cnt = block_sum(cnt, sh);
  if (threadIdx.x == 0) count[0] = cnt;
}

__global__ void cross_entropy_backward_kernel(const float* g, const float* logp, const std::int64_t* t,
                                              std::int64_t rows, std::int64_t c, std::int64_t ignore,
                                              const double* count, float* gx) {
  const double cnt = count[0];
  const double scale = cnt == 0.0 ? 0.0 : static_cast<double>(g[0]) / cnt;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t tr = t[r];
    const bool counted = tr != ignore && tr >= 0 && tr < c;
    for (std::int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const std::int64_t j = r * c + k;
      gx[j] = counted ? static_cast<float>(scale * (exp(static_cast<double>(logp[j])) - (k == tr ? 1.0 : 0.0)))
                      : 0.0f;
    }
  }
}

// ---- embedding, dropout -------------------------------------------------------------------

__global__ void embedding_kernel(const std::int64_t* idx, std::int64_t n, const float* w, std::int64_t c, float* out) {
  const std::int64_t total = n * c;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = t / c, k = t % c;
    out[t] = w[idx[i] * c + k];
  }
}

__global__ void embedding_backward_kernel(const std::int64_t* idx, std::int64_t n, const float* g, std::int64_t c,
                                          float* gw) {
  const std::int64_t total = n * c;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = t / c, k = t % c;
    atomicAdd(gw + idx[i] * c + k, g[t]);  // repeated indices: float additions in any order
  }
}

/// One Philox draw per thread covering the four elements that share it (uniform4's layout:
/// element 64G + 16w + l takes word w of draw(16G + l)); elements outside [first, first + n)
/// are skipped.
__global__ void dropout_kernel(const float* x, std::size_t n, float p, float scale, std::uint64_t seed,
                               std::uint64_t first, std::uint8_t* keep, float* y) {
  const CounterRng rng(seed);
  const std::uint64_t c_lo = 16 * (first / 64), c_hi = 16 * ((first + n - 1) / 64) + 16;
  for (std::uint64_t c = c_lo + blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; c < c_hi;
       c += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const auto words = rng.draw(c);
    const std::uint64_t base = 64 * (c / 16) + c % 16;
    for (int w = 0; w < 4; ++w) {
      const std::uint64_t gi = base + 16 * static_cast<std::uint64_t>(w);
      if (gi < first || gi >= first + n) continue;
      const std::size_t e = static_cast<std::size_t>(gi - first);
      const float u = static_cast<float>(words[static_cast<std::size_t>(w)] >> 8) * (1.0f / 16777216.0f);
      const bool k = u >= p;
      keep[e] = k ? 1 : 0;
      y[e] = x[e] * (k ? scale : 0.0f);
    }
  }
}

__global__ void mask_product_kernel(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * (keep[i] ? scale : 0.0f);
}

}  // namespace

void CudaBackend::layer_norm(const float* x, std::int64_t rows, std::int64_t c, const float* w, const float* b,
                             float eps, float* y, float* mean, float* rstd) {
  qnum::detail::require(rows >= 0 && c > 0, "qnum::cuda layer_norm: ", rows, " rows of ", c);
  if (rows == 0) return;
  layer_norm_kernel<<<grid_rows(rows), row_threads(c), 0, stream()>>>(x, rows, c, w, b, eps, y, mean, rstd);
  check_launch("layer_norm_kernel");
}

void CudaBackend::layer_norm_backward(const float* g, const float* x, const float* mean, const float* rstd,
                                      const float* w, std::int64_t rows, std::int64_t c, float* gx, float* gw,
                                      float* gb) {
  qnum::detail::require(rows >= 0 && c > 0, "qnum::cuda layer_norm_backward: ", rows, " rows of ", c);
  if (rows == 0) {
    if (gw) fill(gw, 0.0f, static_cast<std::size_t>(c));
    if (gb) fill(gb, 0.0f, static_cast<std::size_t>(c));
    return;
  }
  cudaStream_t st = stream();
  if (gx) {
    layer_norm_backward_kernel<<<grid_rows(rows), row_threads(c), 0, st>>>(g, x, mean, rstd, w, rows, c, gx);
    check_launch("layer_norm_backward_kernel");
  }
  if (gw == nullptr && gb == nullptr) return;
  std::int64_t chunks = (65536 + c - 1) / c;
  if (chunks > (rows + 31) / 32) chunks = (rows + 31) / 32;
  if (chunks < 1) chunks = 1;
  const std::int64_t chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk - 1) / chunk;
  Scratch<double> partial(*this, static_cast<std::size_t>(2 * chunks * c));
  layer_norm_param_partial_kernel<<<grid_1d(static_cast<std::size_t>(chunks * c)), kT, 0, st>>>(
      g, x, mean, rstd, rows, c, chunks, chunk, partial.get());
  check_launch("layer_norm_param_partial_kernel");
  layer_norm_param_final_kernel<<<grid_1d(static_cast<std::size_t>(c)), kT, 0, st>>>(partial.get(), c, chunks, gw,
                                                                                     gb);
  check_launch("layer_norm_param_final_kernel");
}

void CudaBackend::softmax(const float* x, std::int64_t rows, std::int64_t n, bool log_space, float* y) {
  qnum::detail::require(rows >= 0 && n > 0, "qnum::cuda softmax: ", rows, " rows of ", n);
  if (rows == 0) return;
  softmax_rows_kernel<<<grid_rows(rows), row_threads(n), 0, stream()>>>(x, rows, n, log_space, y);
  check_launch("softmax_rows_kernel");
}

void CudaBackend::softmax_backward(const float* g, const float* y, std::int64_t rows, std::int64_t n, bool log_space,
                                   float* gx) {
  qnum::detail::require(rows >= 0 && n > 0, "qnum::cuda softmax_backward: ", rows, " rows of ", n);
  if (rows == 0) return;
  softmax_backward_rows_kernel<<<grid_rows(rows), row_threads(n), 0, stream()>>>(g, y, rows, n, log_space, gx);
  check_launch("softmax_backward_rows_kernel");
}

void CudaBackend::cross_entropy(const float* logits, const std::int64_t* targets, std::int64_t rows, std::int64_t c,
                                std::int64_t ignore_index, float* logp, float* loss) {
  qnum::detail::require(rows >= 0 && c > 0, "qnum::cuda cross_entropy: ", rows, " rows of ", c);
  cudaStream_t st = stream();
  if (rows > 0) {
    softmax_rows_kernel<<<grid_rows(rows), row_threads(c), 0, st>>>(logits, rows, c, true, logp);
    check_launch("softmax_rows_kernel");
  }
  cross_entropy_loss_kernel<<<1, 1024, 0, st>>>(logp, targets, rows, c, ignore_index, loss);
  check_launch("cross_entropy_loss_kernel");
}

void CudaBackend::cross_entropy_backward(const float* g, const float* logp, const std::int64_t* targets,
                                         std::int64_t rows, std::int64_t c, std::int64_t ignore_index, float* gx) {
  qnum::detail::require(rows >= 0 && c > 0, "qnum::cuda cross_entropy_backward: ", rows, " rows of ", c);
  if (rows == 0) return;
  cudaStream_t st = stream();
  Scratch<double> count(*this, 1);
  count_targets_kernel<<<1, 1024, 0, st>>>(targets, rows, c, ignore_index, count.get());
  check_launch("count_targets_kernel");
  cross_entropy_backward_kernel<<<grid_rows(rows), row_threads(c), 0, st>>>(g, logp, targets, rows, c, ignore_index,
                                                                            count.get(), gx);
  check_launch("cross_entropy_backward_kernel");
}

void CudaBackend::embedding(const std::int64_t* idx, std::int64_t n, const float* weight, std::int64_t c,
                            float* out) {
  qnum::detail::require(n >= 0 && c >= 0, "qnum::cuda embedding: ", n, " indices of rows of ", c);
  if (n == 0 || c == 0) return;
  embedding_kernel<<<grid_1d(static_cast<std::size_t>(n * c)), kT, 0, stream()>>>(idx, n, weight, c, out);
  check_launch("embedding_kernel");
}

void CudaBackend::embedding_backward(const std::int64_t* idx, std::int64_t n, const float* g, std::int64_t c,
                                     float* gw) {
  qnum::detail::require(n >= 0 && c >= 0, "qnum::cuda embedding_backward: ", n, " indices of rows of ", c);
  if (n == 0 || c == 0) return;
  embedding_backward_kernel<<<grid_1d(static_cast<std::size_t>(n * c)), kT, 0, stream()>>>(idx, n, g, c, gw);
  check_launch("embedding_backward_kernel");
}

void CudaBackend::dropout(const float* x, std::size_t n, float p, float scale, std::uint64_t seed,
                          std::uint64_t first, std::uint8_t* keep, float* y) {
  if (n == 0) return;
  const std::uint64_t draws = 16 * ((first + n - 1) / 64) + 16 - 16 * (first / 64);
  dropout_kernel<<<grid_1d(static_cast<std::size_t>(draws)), kT, 0, stream()>>>(x, n, p, scale, seed, first, keep, y);
  check_launch("dropout_kernel");
}

void CudaBackend::mask_product(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) {
  if (n == 0) return;
  mask_product_kernel<<<grid_1d(n), kT, 0, stream()>>>(x, keep, scale, y, n);
  check_launch("mask_product_kernel");
}

}  // namespace qnum::cuda::detail
