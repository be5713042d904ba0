// Scaled-integer and MX block kernels (cuda/include/qnum/cuda/scaled.hpp). Each scale comes
// from a max over its row / tile / block, reduced in any order (max is order-independent; the
// NaN and Inf cases are folded into the reduced value exactly as the CPU's loop sees them);
// every element then runs the CPU's QNUM_HD definition (compiled with --fmad=false).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "launch.cuh"
#include "qnum/cuda/check.hpp"
#include "qnum/cuda/scaled.hpp"

namespace qnum::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;
using detail::StreamScratch;

namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

/// Shape checks shared by every entry point (the CPU's check_tensor_io, for device pointers);
/// returns numel.
std::size_t check_io(std::string_view family, const float* in, const float* out, const Shape& shape) {
  for (auto d : shape) qnum::detail::require(d >= 0, family, ": negative dimension in shape ", to_string(shape));
  const auto n = static_cast<std::size_t>(numel(shape));
  qnum::detail::require(n == 0 || (in != nullptr && out != nullptr), family, ": null device pointer for ", n,
                        " elements (shape ", to_string(shape), ")");
  return n;
}

// ---- warp helpers: one warp per row chunk / tile / block --------------------------------
// The item loop variable is the same on every lane of a warp (item = global thread / 32), so
// each loop is warp-uniform and every lane reaches every __shfl_xor_sync.

__device__ inline std::size_t warp_id() {
  return (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ inline std::size_t warp_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x / 32; }
__device__ inline int lane_id() { return static_cast<int>(threadIdx.x & 31u); }

__device__ inline std::uint32_t warp_max(std::uint32_t v) {
  for (int off = 16; off > 0; off /= 2) v = max(v, __shfl_xor_sync(kFull, v, off));
  return v;
}
__device__ inline int warp_or(int v) {
  for (int off = 16; off > 0; off /= 2) v |= __shfl_xor_sync(kFull, v, off);
  return v;
}
__device__ inline int warp_and(int v) {
  for (int off = 16; off > 0; off /= 2) v &= __shfl_xor_sync(kFull, v, off);
  return v;
}
__device__ inline qnum::detail::MxTop warp_merge(qnum::detail::MxTop t) {
  for (int off = 16; off > 0; off /= 2) {
    qnum::detail::MxTop o;
    o.top = __shfl_xor_sync(kFull, t.top, off);
    o.has_nan = __shfl_xor_sync(kFull, static_cast<int>(t.has_nan), off) != 0;
    t.merge(o);
  }
  return t;
}

/// The k-th smallest (0-based) of v(0) .. v(n-1), values without NaN, on every lane: the value
/// with at most k smaller ones and more than k smaller-or-equal ones (tied values are equal,
/// so any order statistic is one value: what the CPU's sort puts at k). O(n^2 / 32) compares,
/// no scratch memory: the clip search's quantiles of one block.
template <class T, class V>
__device__ T warp_kth(const V& v, std::int64_t n, std::int64_t k) {
  T found = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = lane_id(); j < n; j += 32) {
    const T x = v(j);
    std::int64_t less = 0, leq = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const T y = v(i);
      less += y < x;
      leq += y <= x;
    }
    if (less <= k && k < leq) found = x;
  }
  for (int off = 16; off > 0; off /= 2) {
    const T o = __shfl_xor_sync(kFull, found, off);
    found = o > found ? o : found;
  }
  return found;
}

/// torch.quantile(v, q) of the block's magnitudes v (as detail::mx_torch_quantile), given
/// their MxTop: q = 1 from the reduction, NaN if any is NaN, else the lerp of two ranks.
template <class V>
__device__ float warp_torch_quantile(const V& v, std::int64_t n, float q, const qnum::detail::MxTop& top) {
  if (q == 1.0f) return top.quantile();
  if (top.has_nan) return qnum::detail::kNaN;  // rank n-1: the NaN the CPU's sort puts last
  const auto r = qnum::detail::mx_torch_quantile_rank(static_cast<std::size_t>(n), q, false);
  const float a = warp_kth<float>(v, n, static_cast<std::int64_t>(r.below));
  const float b = r.above == r.below ? a : warp_kth<float>(v, n, static_cast<std::int64_t>(r.above));
  return qnum::detail::mx_torch_lerp(a, b, r.w);
}

/// MASE's clip candidates, in its order (a device-side copy of detail::mx_clip_quantiles).
struct ClipQuantiles {
  double q[qnum::detail::mx_clip_quantiles.size()];
};
constexpr ClipQuantiles clip_quantiles() {
  ClipQuantiles c{};
  for (std::size_t i = 0; i < qnum::detail::mx_clip_quantiles.size(); ++i) c.q[i] = qnum::detail::mx_clip_quantiles[i];
  return c;
}
constexpr int kClipCandidates = static_cast<int>(qnum::detail::mx_clip_quantiles.size());

// ---- scale_integer ----------------------------------------------------------------------

constexpr std::size_t kRowChunk = 4096;  // elements one warp reduces; longer rows merge chunks

/// keys[row] = max abs_max_key over the row (keys zeroed before when rows are split).
__global__ void row_abs_max_kernel(const float* in, std::size_t rows, std::size_t len, std::size_t chunks,
                                   std::uint32_t* keys) {
  const int lane = lane_id();
  for (std::size_t item = warp_id(); item < rows * chunks; item += warp_count()) {
    const std::size_t row = item / chunks, c = item % chunks;
    const std::size_t begin = row * len + c * kRowChunk, end = row * len + std::min(len, (c + 1) * kRowChunk);
    std::uint32_t key = 0;
    for (std::size_t i = begin + static_cast<std::size_t>(lane); i < end; i += 32)
      key = max(key, qnum::detail::abs_max_key(in[i]));
    key = warp_max(key);
    if (lane == 0) {
      if (chunks == 1)
        keys[row] = key;
      else
        atomicMax(keys + row, key);
    }
  }
}

__global__ void scale_integer_kernel(ScaleIntegerSpec s, Policy p, const float* in, float* out, std::size_t n,
                                     std::size_t len, const std::uint32_t* keys) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float m = qnum::detail::bits_float(keys[i / len]);
    out[i] = qnum::detail::scale_integer_element(s, p, in[i], m, i);
  }
}

// ---- mxint_hardware ---------------------------------------------------------------------

struct TileGeometry {
  std::int64_t t1, t0, p1, p0;  // last two dims and the tile
  __device__ std::int64_t tiles_r() const { return t1 / p1; }
  __device__ std::int64_t tiles_c() const { return t0 / p0; }
  /// Flat index of element e (row-major in the tile) of tile g.
  __device__ std::size_t flat(std::size_t g, std::int64_t e) const {
    const auto gi = static_cast<std::int64_t>(g);
    const std::int64_t c = gi % tiles_c(), r = gi / tiles_c() % tiles_r(), b = gi / (tiles_c() * tiles_r());
    return static_cast<std::size_t>((b * t1 + r * p1 + e / p0) * t0 + c * p0 + e % p0);
  }
};

__global__ void mxint_hardware_kernel(int width, int exponent_width, TileGeometry t, const float* in, float* out,
                                      std::size_t tiles) {
  const int lane = lane_id();
  const std::int64_t len = t.p1 * t.p0;
  for (std::size_t g = warp_id(); g < tiles; g += warp_count()) {
    std::uint32_t key = 0;
    for (std::int64_t e = lane; e < len; e += 32) key = max(key, qnum::detail::abs_max_key(in[t.flat(g, e)]));
    // the largest key is the CPU's amax: max |x|, or NaN when the tile holds one
    const float p2 = qnum::detail::mxint_hardware_step(exponent_width, qnum::detail::bits_float(warp_max(key)));
    for (std::int64_t e = lane; e < len; e += 32) {
      const std::size_t k = t.flat(g, e);
      out[k] = qnum::detail::mxint_hardware_element(width, p2, in[k]);
    }
  }
}

// ---- MX blocks ---------------------------------------------------------------------------

/// Position -> flat index with the block axis moved last (fibers of n along the axis).
struct AxisLast {
  std::int64_t n, inner;
  __device__ std::size_t flat(std::int64_t pos) const {
    return static_cast<std::size_t>(qnum::detail::mx_axis_last_flat(pos, n, inner));
  }
};

/// MASE mxint: blocks of B consecutive positions (they may straddle fibers). The clip search
/// scores each candidate against the *unpermuted* block in[first + j] (as MASE does): every
/// lane sums the whole block in element order, the CPU's order.
__global__ void mase_mxint_kernel(MXIntSpec s, AxisLast a, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  const std::int64_t B = s.block_size;
  constexpr ClipQuantiles cq = clip_quantiles();
  for (std::size_t b = warp_id(); b < nblocks; b += warp_count()) {
    const std::int64_t first = static_cast<std::int64_t>(b) * B;
    const auto mag = [&](std::int64_t j) { return std::fabs(in[a.flat(first + j)]); };
    qnum::detail::MxTop top;
    for (std::int64_t j = lane; j < B; j += 32) top.add(mag(j));
    top = warp_merge(top);
    auto q = qnum::detail::mase_mxint_params(s, top.quantile());
    if (s.quantile_search) {
      float best = 0;
      bool have = false;
      for (int qi = 0; qi < kClipCandidates; ++qi) {
        const auto cand =
            qnum::detail::mase_mxint_params(s, warp_torch_quantile(mag, B, static_cast<float>(cq.q[qi]), top));
        double acc = 0;
        for (std::int64_t j = 0; j < B; ++j)
          acc += qnum::detail::mase_mxint_sq_err(qnum::detail::mase_mxint_element(cand, in[a.flat(first + j)]),
                                                 in[static_cast<std::size_t>(first + j)]);
        const float err = std::sqrt(static_cast<float>(acc));
        if (qnum::detail::mase_argmin_takes(have, best, err)) best = err, have = true, q = cand;
      }
      __syncwarp();  // every lane has read the block before any lane writes (in == out)
    }
    for (std::int64_t j = lane; j < B; j += 32) {
      const std::size_t k = a.flat(first + j);
      out[k] = qnum::detail::mase_mxint_element(q, in[k]);
    }
  }
}

/// MASE mxfp: as mase_mxint_kernel, with the flushed magnitudes and the all-flushed flag.
__global__ void mase_mxfp_kernel(MXFPSpec s, AxisLast a, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  const std::int64_t B = s.block_size;
  const int E = s.exponent_width, M = s.frac_width;
  constexpr ClipQuantiles cq = clip_quantiles();
  for (std::size_t b = warp_id(); b < nblocks; b += warp_count()) {
    const std::int64_t first = static_cast<std::int64_t>(b) * B;
    const auto mag = [&](std::int64_t j) { return qnum::detail::mase_mxfp_abs(in[a.flat(first + j)]); };
    qnum::detail::MxTop top;
    int flushed = 1;
    for (std::int64_t j = lane; j < B; j += 32) {
      const float x = in[a.flat(first + j)];
      top.add(qnum::detail::mase_mxfp_abs(x));
      flushed &= static_cast<int>(qnum::detail::mase_mxfp_flushes(x));
    }
    top = warp_merge(top);
    const bool all_flushed = warp_and(flushed) != 0;
    std::int32_t shared = qnum::detail::mase_mxfp_shared_exp(E, top.quantile());
    std::uint8_t S = qnum::detail::mase_mxfp_scale_byte(shared, all_flushed);
    if (s.quantile_search) {  // as mase_mxint_kernel; scored by mase_mxfp_sq_err
      float best = qnum::detail::kInf;
      for (int qi = 0; qi < kClipCandidates; ++qi) {
        const std::int32_t sh =
            qnum::detail::mase_mxfp_shared_exp(E, warp_torch_quantile(mag, B, static_cast<float>(cq.q[qi]), top));
        const std::uint8_t Sq = qnum::detail::mase_mxfp_scale_byte(sh, all_flushed);
        float err = 0.0f;
        for (std::int64_t j = 0; j < B; ++j)
          err += qnum::detail::mase_mxfp_sq_err(M, Sq, qnum::detail::mase_mxfp_code(E, M, sh, in[a.flat(first + j)]),
                                                in[static_cast<std::size_t>(first + j)]);
        if (err < best) best = err, S = Sq, shared = sh;
      }
      __syncwarp();  // every lane has read the block before any lane writes (in == out)
    }
    for (std::int64_t j = lane; j < B; j += 32) {
      const std::size_t k = a.flat(first + j);
      out[k] = qnum::detail::mase_mxfp_value(s, S, qnum::detail::mase_mxfp_code(E, M, shared, in[k]));
    }
  }
}

/// OCP MX: blocks of bs along each fiber (the last one of a fiber may be short), as
/// detail::mx_exact_block (`search`: its clip search, errors summed in element order by every lane).
__global__ void mx_exact_kernel(MXElement e, int scale_bits, bool search, Policy p, AxisLast a, int bs,
                                std::size_t per_fiber, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  constexpr ClipQuantiles cq = clip_quantiles();
  for (std::size_t g = warp_id(); g < nblocks; g += warp_count()) {
    const auto f = static_cast<std::int64_t>(g / per_fiber), c = static_cast<std::int64_t>(g % per_fiber);
    const std::int64_t first = f * a.n + c * bs;
    const std::int64_t len = std::min<std::int64_t>(bs, a.n - c * bs);
    double amax = 0;
    int special = 0;
    for (std::int64_t j = lane; j < len; j += 32) {
      const float x = in[a.flat(first + j)];
      special |= !qnum::detail::is_finite(x);
      amax = fmax(amax, qnum::detail::abs(static_cast<double>(x)));
    }
    for (int off = 16; off > 0; off /= 2) amax = fmax(amax, __shfl_xor_sync(kFull, amax, off));
    if (warp_or(special)) {  // OCP: NaN scale, the whole block is NaN
      for (std::int64_t j = lane; j < len; j += 32) out[a.flat(first + j)] = qnum::detail::kNaN;
      continue;
    }
    int sexp = qnum::detail::mx_exact_scale_exp(e, scale_bits, amax);
    if (search && len > 1) {
      const auto mag = [&](std::int64_t j) { return qnum::detail::abs(static_cast<double>(in[a.flat(first + j)])); };
      double best = std::numeric_limits<double>::infinity();
      int tried = std::numeric_limits<int>::min();
      for (int qi = 0; qi < kClipCandidates; ++qi) {
        const auto r = qnum::detail::mx_exact_clip_rank(static_cast<std::size_t>(len), cq.q[qi]);
        const double lo = warp_kth<double>(mag, len, static_cast<std::int64_t>(r.lo));
        const double hi = r.hi == r.lo ? lo : warp_kth<double>(mag, len, static_cast<std::int64_t>(r.hi));
        const int cand = qnum::detail::mx_exact_scale_exp(e, scale_bits, qnum::detail::mx_exact_clip(lo, hi, r.frac));
        if (cand == tried) continue;  // same scale, same result
        tried = cand;
        double err = 0;
        for (std::int64_t j = 0; j < len; ++j) {
          const std::size_t k = a.flat(first + j);
          err += qnum::detail::mx_exact_sq_err(e, p, cand, in[k], k);
        }
        if (err < best) best = err, sexp = cand;
      }
      __syncwarp();  // every lane has read the block before any lane writes (in == out)
    }
    for (std::int64_t j = lane; j < len; j += 32) {
      const std::size_t k = a.flat(first + j);
      out[k] = qnum::detail::mx_exact_value(sexp, qnum::detail::mx_block_element(e, p, sexp, in[k], k));
    }
  }
}

AxisLast axis_last(const Shape& shape, int axis) {
  return {shape[static_cast<std::size_t>(axis)], qnum::detail::mx_outer_inner(shape, axis).second};
}

template <class Spec>
void launch_mase_mx(const Spec& s, const float* in, float* out, const Shape& shape, cudaStream_t stream) {
  const int axis = qnum::detail::mase_mx_axis(s.name, s.block_dim, s.block_size, shape);
  const auto n = static_cast<std::size_t>(numel(shape));
  if (n == 0) return;
  const std::size_t nblocks = n / static_cast<std::size_t>(s.block_size);
  // The clip search reads other blocks' inputs (the unpermuted block): in place, from a copy.
  std::optional<StreamScratch<float>> copy;
  if (s.quantile_search && in == out) {
    copy.emplace(n, stream);
    QNUM_CUDA_CHECK(cudaMemcpyAsync(copy->get(), in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    in = copy->get();
  }
  if constexpr (std::is_same_v<Spec, MXIntSpec>) {
    mase_mxint_kernel<<<grid_for(nblocks * 32), kThreads, 0, stream>>>(s, axis_last(shape, axis), in, out, nblocks);
    check_launch("mase_mxint_kernel");
  } else {
    mase_mxfp_kernel<<<grid_for(nblocks * 32), kThreads, 0, stream>>>(s, axis_last(shape, axis), in, out, nblocks);
    check_launch("mase_mxfp_kernel");
  }
}

void launch_mx_exact(std::string_view family, const MXElement& e, int scale_bits, int block_size, int block_dim,
                     bool search, const Policy& p, const float* in, float* out, const Shape& shape,
                     cudaStream_t stream) {
  const Shape sh = shape.empty() ? Shape{1} : shape;
  const int axis = qnum::detail::mx_axis(family, block_dim, sh.size());
  const auto n = static_cast<std::size_t>(numel(sh));
  if (n == 0) return;
  const AxisLast a = axis_last(sh, axis);
  const std::size_t per_fiber = (static_cast<std::size_t>(a.n) + block_size - 1) / static_cast<std::size_t>(block_size);
  const std::size_t nblocks = n / static_cast<std::size_t>(a.n) * per_fiber;
  mx_exact_kernel<<<grid_for(nblocks * 32), kThreads, 0, stream>>>(e, scale_bits, search, p, a, block_size, per_fiber,
                                                                   in, out, nblocks);
  check_launch("mx_exact_kernel");
}

}  // namespace

void quantize(const ScaleIntegerSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = check_io(s.name, in, out, shape);
  const auto len = static_cast<std::size_t>(shape.empty() ? 1 : shape.back());
  if (n == 0 || len == 0) return;
  const std::size_t rows = n / len, chunks = (len + kRowChunk - 1) / kRowChunk;
  StreamScratch<std::uint32_t> keys(rows, stream);
  auto* k = keys.get();
  if (chunks > 1) QNUM_CUDA_CHECK(cudaMemsetAsync(k, 0, rows * sizeof(std::uint32_t), stream));
  row_abs_max_kernel<<<grid_for(rows * chunks * 32), kThreads, 0, stream>>>(in, rows, len, chunks, k);
  check_launch("row_abs_max_kernel");
  scale_integer_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, p, in, out, n, len, k);
  check_launch("scale_integer_kernel");
}

void quantize(const MXIntHardwareSpec& s, const Policy&, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  const std::size_t n = check_io(s.name, in, out, shape);
  s.validate();
  qnum::detail::require(!shape.empty(), s.name, ": needs a tensor of rank >= 1, got a scalar");
  const std::int64_t t0 = shape.back(), t1 = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const std::int64_t p1 = s.parallelism.size() == 2 ? s.parallelism[0] : 1, p0 = s.parallelism.back();
  qnum::detail::require(t1 % p1 == 0 && t0 % p0 == 0, s.name, ": parallelism [", p1, ", ", p0,
                        "] does not tile the last two dims [", t1, ", ", t0, "]");
  if (n == 0) return;
  const std::size_t tiles = n / static_cast<std::size_t>(p1 * p0);
  mxint_hardware_kernel<<<grid_for(tiles * 32), kThreads, 0, stream>>>(s.width, s.exponent_width,
                                                                       TileGeometry{t1, t0, p1, p0}, in, out, tiles);
  check_launch("mxint_hardware_kernel");
}

void quantize(const MXIntSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  check_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return launch_mase_mx(s, in, out, shape, stream);
  launch_mx_exact(s.name, s.element(), s.scale_bits, s.block_size, s.block_dim, s.quantile_search, p, in, out, shape,
                  stream);
}

void quantize(const MXFPSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  check_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return launch_mase_mx(s, in, out, shape, stream);
  qnum::detail::require_exact_mxfp(s);
  launch_mx_exact(s.name, s.element(), s.scale_exp_bits, s.block_size, s.block_dim, s.quantile_search, p, in, out,
                  shape, stream);
}

}  // namespace qnum::cuda
