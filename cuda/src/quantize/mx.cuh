// What the MX block kernels share (mxint, mxfp and the OCP MX blocks of mx_block.cu;
// internal, not installed): block maxima by warp reduction (max is order-independent; NaN and
// Inf folded in as the CPU's loop sees them), the clip search's order statistics in a warp,
// the block axis moved last, and the two launchers every MX spec runs through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include <cuda_runtime.h>

#include "../launch.cuh"
#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mx_block.hpp"
#include "warp.cuh"

namespace qnum::cuda::detail {

__device__ inline qnum::detail::MxTop warp_merge(qnum::detail::MxTop t) {
  for (int off = 16; off > 0; off /= 2) {
    qnum::detail::MxTop o;
    o.top = __shfl_xor_sync(kFullMask, t.top, off);
    o.has_nan = __shfl_xor_sync(kFullMask, static_cast<int>(t.has_nan), off) != 0;
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
    const T o = __shfl_xor_sync(kFullMask, found, off);
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
inline constexpr int kClipCandidates = static_cast<int>(qnum::detail::mx_clip_quantiles.size());

/// Position -> flat index with the block axis moved last (fibers of n along the axis).
struct AxisLast {
  std::int64_t n, inner;
  __device__ std::size_t flat(std::int64_t pos) const {
    return static_cast<std::size_t>(qnum::detail::mx_axis_last_flat(pos, n, inner));
  }
};

inline AxisLast axis_last(const Shape& shape, int axis) {
  return {shape[static_cast<std::size_t>(axis)], qnum::detail::mx_outer_inner(shape, axis).second};
}

/// MASE's MX blocks of s.block_size consecutive positions with the block axis moved last:
/// launch(axis, in, nblocks) runs the family's kernel. The clip search reads other blocks'
/// inputs (the unpermuted block): in place it reads from a copy.
template <class Spec, class Launch>
void launch_mase_mx(const Spec& s, const float* in, const float* out, const Shape& shape, cudaStream_t stream,
                    Launch&& launch) {
  const int axis = qnum::detail::mase_mx_axis(s.name, s.block_dim, s.block_size, shape);
  const auto n = static_cast<std::size_t>(numel(shape));
  if (n == 0) return;
  const std::size_t nblocks = n / static_cast<std::size_t>(s.block_size);
  std::optional<StreamScratch<float>> copy;
  if (s.quantile_search && in == out) {
    copy.emplace(n, stream);
    QNUM_CUDA_CHECK(cudaMemcpyAsync(copy->get(), in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    in = copy->get();
  }
  launch(axis_last(shape, axis), in, nblocks);
}

/// OCP MX blocks along block_dim, never crossing the other axes (mx_block.cu), as
/// detail::mx_exact_quantize: the exact bundle of mxint and mxfp.
void launch_mx_exact(std::string_view family, const MXElement& e, int scale_bits, int block_size, int block_dim,
                     bool search, const Policy& p, const float* in, float* out, const Shape& shape,
                     cudaStream_t stream);

}  // namespace qnum::cuda::detail
