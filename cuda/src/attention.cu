// Fused attention forward (flash-style online softmax; no [seq_q, seq_k] buffer): one warp per
// query row, keys streamed once, fp32 throughout. A first, simple version: correct and fused,
// not tuned (no tensor cores, no K/V tiles in shared memory).
#include <cmath>
#include <cstdint>

#include "qnum/cuda/check.hpp"
#include "qnum/cuda/kernels.hpp"

namespace qnum::cuda {

namespace {

constexpr int kMaxPerLane = 8;  // head_dim <= 256

__global__ void attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                 const float* __restrict__ mask, float* __restrict__ out, long long rows, int heads,
                                 int sq, int sk, int d, float scale) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) / 32;
  for (long long r = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const long long bh = r / sq;  // (batch, head) of this query row
    const float* qr = q + r * d;
    const float* kb = k + bh * static_cast<long long>(sk) * d;
    const float* vb = v + bh * static_cast<long long>(sk) * d;
    const float* mb = mask ? mask + (bh / heads) * sk : nullptr;
    float qv[kMaxPerLane], acc[kMaxPerLane];
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int c = lane + 32 * t;
      qv[t] = c < d ? qr[c] : 0.0f;
      acc[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int j = 0; j < sk; ++j) {
      float dot = 0.0f;
      for (int t = 0; t < kMaxPerLane; ++t) {
        const int c = lane + 32 * t;
        if (c < d) dot += qv[t] * kb[static_cast<long long>(j) * d + c];
      }
      for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, off);
      const float s = dot * scale + (mb ? mb[j] : 0.0f);
      if (s == -INFINITY) continue;  // masked key: weight 0
      const float mn = fmaxf(m, s);
      const float corr = expf(m - mn);  // 0 when m was -inf
      const float p = expf(s - mn);
      l = l * corr + p;
      for (int t = 0; t < kMaxPerLane; ++t) {
        const int c = lane + 32 * t;
        if (c < d) acc[t] = acc[t] * corr + p * vb[static_cast<long long>(j) * d + c];
      }
      m = mn;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a fully masked row gives zeros, as on the CPU
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int c = lane + 32 * t;
      if (c < d) out[r * d + c] = acc[t] * inv;
    }
  }
}

}  // namespace

void attention_fused(const float* q, const float* k, const float* v, const float* mask, float* out, std::int64_t batch,
                     std::int64_t heads, std::int64_t seq_q, std::int64_t seq_k, std::int64_t head_dim,
                     cudaStream_t stream) {
  const char* what = "qnum::cuda::attention_fused";
  qnum::detail::require(batch >= 1 && heads >= 1 && seq_q >= 1 && seq_k >= 1 && head_dim >= 1, what, ": batch ", batch,
                        ", heads ", heads, ", seq_q ", seq_q, ", seq_k ", seq_k, ", head_dim ", head_dim,
                        " must all be >= 1");
  qnum::detail::require(head_dim <= 32 * kMaxPerLane, what, ": head_dim ", head_dim, " must be <= ", 32 * kMaxPerLane);
  constexpr std::int64_t lim = std::int64_t{1} << 31;
  qnum::detail::require(seq_q < lim && seq_k < lim && heads < lim && batch < (std::int64_t{1} << 40) / heads &&
                            batch * heads < (std::int64_t{1} << 40) / seq_q &&
                            batch * heads * seq_q < (std::int64_t{1} << 40) / (seq_k > head_dim ? seq_k : head_dim),
                        what, ": shape too large");
  qnum::detail::require(q && k && v && out, what, ": null buffer");
  const long long rows = batch * heads * seq_q;
  const long long ctas = (rows * 32 + 255) / 256;
  const unsigned grid = static_cast<unsigned>(ctas < (1 << 16) ? ctas : (1 << 16));
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));  // as the CPU's
  attention_kernel<<<grid, 256, 0, stream>>>(q, k, v, mask, out, rows, static_cast<int>(heads), static_cast<int>(seq_q),
                                             static_cast<int>(seq_k), static_cast<int>(head_dim), scale);
  QNUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace qnum::cuda
