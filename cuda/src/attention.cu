// Fused attention forward (flash-style online softmax; no [seq_q, seq_k] buffer), fp32
// throughout (tensor-core tf32/bf16 would not meet the 1e-4 agreement with the CPU).
//  * head_dim <= 64 (BERT's heads): tiled. A CTA owns 64 query rows of one (batch, head) and
//    streams 64-key tiles of K and V through shared memory, so each K/V element is read once
//    per 64 queries instead of once per query; each thread keeps a 4x4 block of scores and of
//    the output in registers (explicit fmaf: the library is built with --fmad=false).
//  * larger heads: one warp per query row, keys streamed from global memory.
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

constexpr int kTile = 64;           // query rows per CTA = keys per tile = padded head dim
constexpr int kPad = kTile + 4;     // row stride of transposed tiles: float4-aligned, fewer bank conflicts
constexpr int kTiledThreads = 256;  // a 16 x 16 grid of threads, each 4 rows x 4 columns
constexpr std::size_t kTiledSmem = sizeof(float) * (3 * kTile * kPad + kTile * kTile);

__device__ inline float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }

/// Max and sum over the 16 threads that share a row (one half-warp: lanes differ in bits 0-3).
__device__ inline float row_max16(float x) {
  for (int off = 8; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, off));
  return x;
}
__device__ inline float row_sum16(float x) {
  for (int off = 8; off > 0; off /= 2) x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
  return x;
}

__global__ void __launch_bounds__(kTiledThreads)
    attention_tiled_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                           const float* __restrict__ mask, float* __restrict__ out, int heads, int sq, int sk, int d,
                           int q_tiles, float scale) {
  extern __shared__ float4 smem4[];
  float* Qt = reinterpret_cast<float*>(smem4);  // [dim][query]: Qt[c * kPad + r]
  float* Kt = Qt + kTile * kPad;                // [dim][key]
  float* Ps = Kt + kTile * kPad;                // [query][key] probabilities of this tile
  float* Vs = Ps + kTile * kPad;                // [key][dim]
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const long long bh = static_cast<long long>(blockIdx.x) / q_tiles;
  const int q0 = static_cast<int>(blockIdx.x % q_tiles) * kTile;
  const float* qb = q + bh * sq * d;
  const float* kb = k + bh * static_cast<long long>(sk) * d;
  const float* vb = v + bh * static_cast<long long>(sk) * d;
  const float* mb = mask ? mask + (bh / heads) * sk : nullptr;

  for (int idx = tid; idx < kTile * kTile; idx += kTiledThreads) {  // zero-padded beyond seq_q and d
    const int r = idx / kTile, c = idx % kTile;
    Qt[c * kPad + r] = q0 + r < sq && c < d ? qb[static_cast<long long>(q0 + r) * d + c] : 0.0f;
  }
  float m[4], l[4], acc[4][4];
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  }
  for (int k0 = 0; k0 < sk; k0 += kTile) {
    __syncthreads();  // the previous tile's K, V and P are no longer read
    for (int idx = tid; idx < kTile * kTile; idx += kTiledThreads) {
      const int j = idx / kTile, c = idx % kTile;
      const bool in = k0 + j < sk && c < d;
      const long long g = static_cast<long long>(k0 + j) * d + c;
      Kt[c * kPad + j] = in ? kb[g] : 0.0f;
      Vs[j * kTile + c] = in ? vb[g] : 0.0f;
    }
    __syncthreads();
    float s[4][4] = {};
    for (int c = 0; c < kTile; ++c) {
      const float4 a = ld4(Qt + c * kPad + ty * 4), b = ld4(Kt + c * kPad + tx * 4);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) s[i][j] = fmaf(av[i], bv[j], s[i][j]);
    }
    float add[4];  // the additive mask; keys past seq_k are masked out
    for (int j = 0; j < 4; ++j) {
      const int key = k0 + tx * 4 + j;
      add[j] = key < sk ? (mb ? mb[key] : 0.0f) : -INFINITY;
    }
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
      for (int j = 0; j < 4; ++j) {
        s[i][j] = s[i][j] * scale + add[j];
        mx = fmaxf(mx, s[i][j]);
      }
      const float mn = fmaxf(m[i], row_max16(mx));
      float p[4], psum = 0.0f;
      for (int j = 0; j < 4; ++j) {
        p[j] = mn == -INFINITY ? 0.0f : expf(s[i][j] - mn);  // masked keys: 0
        psum += p[j];
      }
      const float corr = mn == -INFINITY ? 1.0f : expf(m[i] - mn);  // 0 when m was -inf
      l[i] = l[i] * corr + row_sum16(psum);
      for (int j = 0; j < 4; ++j) acc[i][j] *= corr;
      m[i] = mn;
      *reinterpret_cast<float4*>(Ps + (ty * 4 + i) * kPad + tx * 4) = make_float4(p[0], p[1], p[2], p[3]);
    }
    __syncthreads();
    for (int kk = 0; kk < kTile; kk += 4) {
      float pv[4][4], vv[4][4];
      for (int i = 0; i < 4; ++i) {
        const float4 t = ld4(Ps + (ty * 4 + i) * kPad + kk);
        pv[i][0] = t.x, pv[i][1] = t.y, pv[i][2] = t.z, pv[i][3] = t.w;
      }
      for (int u = 0; u < 4; ++u) {
        const float4 t = ld4(Vs + (kk + u) * kTile + tx * 4);
        vv[u][0] = t.x, vv[u][1] = t.y, vv[u][2] = t.z, vv[u][3] = t.w;
      }
      for (int i = 0; i < 4; ++i)
        for (int u = 0; u < 4; ++u)
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(pv[i][u], vv[u][j], acc[i][j]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    const int r = q0 + ty * 4 + i;
    if (r >= sq) continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;  // a fully masked row gives zeros, as on the CPU
    for (int j = 0; j < 4; ++j)
      if (const int c = tx * 4 + j; c < d) out[(bh * sq + r) * d + c] = acc[i][j] * inv;
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
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));  // as the CPU's
  if (head_dim <= kTile) {
    const long long q_tiles = (seq_q + kTile - 1) / kTile, ctas = batch * heads * q_tiles;
    qnum::detail::require(ctas < (std::int64_t{1} << 31), what, ": ", ctas, " query tiles exceed the grid limit");
    static const bool smem_ok = [] {  // > 48 KiB of dynamic shared memory needs an opt-in, once
      QNUM_CUDA_CHECK(cudaFuncSetAttribute(attention_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kTiledSmem)));
      return true;
    }();
    (void)smem_ok;
    attention_tiled_kernel<<<static_cast<unsigned>(ctas), kTiledThreads, kTiledSmem, stream>>>(
        q, k, v, mask, out, static_cast<int>(heads), static_cast<int>(seq_q), static_cast<int>(seq_k),
        static_cast<int>(head_dim), static_cast<int>(q_tiles), scale);
    QNUM_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const long long rows = batch * heads * seq_q;
  const long long ctas = (rows * 32 + 255) / 256;
  const unsigned grid = static_cast<unsigned>(ctas < (1 << 16) ? ctas : (1 << 16));
  attention_kernel<<<grid, 256, 0, stream>>>(q, k, v, mask, out, rows, static_cast<int>(heads), static_cast<int>(seq_q),
                                             static_cast<int>(seq_k), static_cast<int>(head_dim), scale);
  QNUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace qnum::cuda
