// What the block families (block_fp, block_minifloat, block_log) share on the device
// (internal; not installed): one warp per block of any BlockLayout (qnum's exact tiles or
// MASE's role-dependent ones, partial last tiles included), running the QNUM_HD per-block and
// per-element definitions the CPU reference uses (include/qnum/format/block*.hpp), so results
// are bit-identical to the CPU's tensor quantize. Exact: max |x| / NaN / Inf by warp
// reduction, the shared field from it, then every element (block_fp: a first rounding pass
// votes on the carry). mase_compat: a pass writes each block's max and the min zero-rule key
// over the tensor, a second pass quantizes with the fixed-up maxima (scratch allocated with
// cudaMallocAsync on the call's stream). A family's .cu supplies its exact and mase ops.
// Compiled with --fmad=false: no contraction the CPU reference lacks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "../launch.cuh"
#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/block.hpp"
#include "warp.cuh"

namespace qnum::cuda::detail {

namespace qd = qnum::detail;

/// Dims a device layout holds after merging runs of tile-1 dims: an exact layout has one such
/// run in front of at most 3 block_size dims, MASE's layouts have rank <= 3.
inline constexpr int kMaxRank = 4;

// ---- layout on the device -----------------------------------------------------------------

/// A BlockLayout by value: tiles along each dim, C-order strides and the tile grid.
struct DeviceLayout {
  int rank = 0;
  std::int64_t shape[kMaxRank]{}, tile[kMaxRank]{}, grid[kMaxRank]{}, stride[kMaxRank]{};
  std::int64_t num_blocks = 0;
  bool fold = false;  // MASE's F.fold path (-0 -> +0)
};

/// The device form of a non-empty layout. Adjacent dims that both have tile 1 merge into one
/// (their blocks are single elements along them, numbered in the same C order); a rank-0
/// tensor is one block of one element. Block numbering only has to be a bijection: stochastic
/// draws are keyed by flat index and MASE's zero-block rule is a min over all blocks.
inline DeviceLayout device_layout(const BlockLayout& L) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (size, tile)
  for (std::size_t d = 0; d < L.rank(); ++d) {
    if (!dims.empty() && dims.back().second == 1 && L.tile[d] == 1)
      dims.back().first *= L.shape[d];
    else
      dims.emplace_back(L.shape[d], L.tile[d]);
  }
  if (dims.empty()) dims.emplace_back(1, 1);
  qd::require(dims.size() <= static_cast<std::size_t>(kMaxRank), "qnum::cuda::quantize: block layout of shape ",
              to_string(L.shape), " has ", dims.size(), " dims after merging, more than ", kMaxRank);
  DeviceLayout D;
  D.rank = static_cast<int>(dims.size());
  D.num_blocks = 1;
  D.fold = L.mase_fold;
  for (int d = D.rank; d-- > 0;) {
    D.shape[d] = dims[static_cast<std::size_t>(d)].first;
    D.tile[d] = dims[static_cast<std::size_t>(d)].second;
    D.grid[d] = (D.shape[d] + D.tile[d] - 1) / D.tile[d];
    D.stride[d] = d + 1 < D.rank ? D.stride[d + 1] * D.shape[d + 1] : 1;
    D.num_blocks *= D.grid[d];
  }
  return D;
}

/// One block's tile: where it starts, its (clipped) extent per dim and its element count.
struct Tile {
  std::int64_t base = 0, len = 1;
  std::int64_t ext[kMaxRank]{};

  __device__ Tile(const DeviceLayout& L, std::int64_t b) {
    for (int d = L.rank; d-- > 0;) {
      const std::int64_t c = b % L.grid[d];
      b /= L.grid[d];
      const std::int64_t start = c * L.tile[d];
      ext[d] = L.tile[d] < L.shape[d] - start ? L.tile[d] : L.shape[d] - start;
      base += start * L.stride[d];
      len *= ext[d];
    }
  }
  /// Flat (C-order) index of the tile's element j, j in [0, len) in C order within the tile.
  __device__ std::int64_t flat(const DeviceLayout& L, std::int64_t j) const {
    std::int64_t off = base;
    for (int d = L.rank - 1; d > 0; --d) {
      off += (j % ext[d]) * L.stride[d];
      j /= ext[d];
    }
    return off + j * L.stride[0];
  }
};

/// Calls f(block id, tile) for this warp's blocks (grid-stride over warps). The block id is the
/// same on every lane, so warp collectives inside f always see all 32 lanes.
template <class F>
__device__ void for_each_warp_block(const DeviceLayout& L, F&& f) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (std::int64_t b = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; b < L.num_blocks;
       b += warps)
    f(b, Tile(L, b));
}

/// The block's scan from the lanes' partial scans (scan_merge is order-free).
__device__ inline qd::BlockScan warp_scan(qd::BlockScan s) {
  for (int off = kWarp / 2; off > 0; off /= 2) {
    qd::BlockScan o;
    o.max = __shfl_xor_sync(kFullMask, s.max, off);
    o.has_nan = __shfl_xor_sync(kFullMask, static_cast<int>(s.has_nan), off) != 0;
    o.has_inf = __shfl_xor_sync(kFullMask, static_cast<int>(s.has_inf), off) != 0;
    qd::scan_merge(s, o);
  }
  return s;
}

// ---- exact bundle -------------------------------------------------------------------------
// An op gives the block's shared state from its scan (prepare; may run a warp-wide pass over
// the block) and each element's value from that state (value), as the family's
// *_encode_exact + *_decode_exact do on the CPU. A NaN anywhere makes the block NaN.

/// Exact bundle, one warp per block. Every element is read before it is written by the same
/// lane (and block_fp's vote synchronises the warp), so `out` may alias `in`.
template <class Op>
__global__ void exact_blocks_kernel(Op op, DeviceLayout L, const float* in, float* out) {
  const int lane = lane_id();
  for_each_warp_block(L, [&](std::int64_t, const Tile& t) {
    qd::BlockScan sc;
    for (std::int64_t j = lane; j < t.len; j += kWarp) qd::scan_add(sc, in[t.flat(L, j)]);
    sc = warp_scan(sc);
    if (sc.has_nan) {  // warp-uniform
      for (std::int64_t j = lane; j < t.len; j += kWarp) out[t.flat(L, j)] = qd::kNaN;
      return;
    }
    const auto state = op.prepare(sc, L, t, in);
    for (std::int64_t j = lane; j < t.len; j += kWarp) {
      const std::int64_t i = t.flat(L, j);
      out[i] = op.value(state, in[i], static_cast<std::uint64_t>(i));
    }
  });
}

// ---- mase_compat bundle -------------------------------------------------------------------
// Pass 1 writes each block's max |x| (NaN-sticky) and the min zero-rule key over the tensor;
// pass 2 fixes each max up (mase_zero_rule_apply), derives the block's float32 scale or bias
// and quantizes the elements (F.fold's +0 where the layout says so).

// A non-template kernel: internal linkage, so each block family's translation unit has its own.
namespace {
__global__ void mase_maxima_kernel(DeviceLayout L, const float* in, float* maxima, std::uint32_t* min_key) {
  const int lane = lane_id();
  for_each_warp_block(L, [&](std::int64_t b, const Tile& t) {
    float m = 0.0f;
    for (std::int64_t j = lane; j < t.len; j += kWarp) m = qd::mase_max_merge(m, std::fabs(in[t.flat(L, j)]));
    for (int off = kWarp / 2; off > 0; off /= 2) m = qd::mase_max_merge(m, __shfl_xor_sync(kFullMask, m, off));
    if (lane == 0) {
      maxima[b] = m;
      atomicMin(min_key, qd::mase_zero_rule_key(m));
    }
  });
}
}  // namespace

/// Pass 2; all reads of `in` by pass 1 precede it on the stream, and each element is read
/// before it is written by the same lane, so `out` may alias `in`.
template <class Op>
__global__ void mase_blocks_kernel(Op op, DeviceLayout L, const float* in, float* out, const float* maxima,
                                   const std::uint32_t* min_key) {
  const int lane = lane_id();
  const std::uint32_t key = *min_key;
  for_each_warp_block(L, [&](std::int64_t b, const Tile& t) {
    const auto state = op.prepare(qd::mase_zero_rule_apply(maxima[b], key));
    for (std::int64_t j = lane; j < t.len; j += kWarp) {
      const std::int64_t i = t.flat(L, j);
      out[i] = op.value(state, in[i], L.fold);
    }
  });
}

// ---- launchers ----------------------------------------------------------------------------

template <class Op>
void launch_exact(const Op& op, const DeviceLayout& L, const float* in, float* out, cudaStream_t stream) {
  const auto blocks = static_cast<std::size_t>(L.num_blocks);
  exact_blocks_kernel<<<grid_for(blocks * kWarp), kThreads, 0, stream>>>(op, L, in, out);
  check_launch("exact_blocks_kernel");
}

template <class Op>
void launch_mase(const Op& op, const DeviceLayout& L, const float* in, float* out, cudaStream_t stream) {
  const auto blocks = static_cast<std::size_t>(L.num_blocks);
  StreamScratch<float> maxima(blocks, stream);
  StreamScratch<std::uint32_t> min_key(1, stream);
  QNUM_CUDA_CHECK(cudaMemsetAsync(min_key.get(), 0xFF, sizeof(std::uint32_t), stream));  // ~0: no non-zero max yet
  mase_maxima_kernel<<<grid_for(blocks * kWarp), kThreads, 0, stream>>>(L, in, maxima.get(), min_key.get());
  check_launch("mase_maxima_kernel");
  mase_blocks_kernel<<<grid_for(blocks * kWarp), kThreads, 0, stream>>>(op, L, in, out, maxima.get(), min_key.get());
  check_launch("mase_blocks_kernel");
}

/// The CPU's argument checks in the CPU's order (tensor sizes, spec, layout: MASE's role and
/// rank errors), then the pointers; nullopt when there is nothing to do (n == 0).
template <class Spec>
std::optional<DeviceLayout> checked_layout(const Spec& s, const Policy& p, const float* in, const float* out,
                                           std::size_t n, const Shape& shape, Role role) {
  for (auto d : shape) qd::require(d >= 0, s.name, ": negative dimension in shape ", to_string(shape));
  qd::require(static_cast<std::size_t>(numel(shape)) == n, s.name, ": ", n, " elements but shape ", to_string(shape),
              " needs ", numel(shape));
  s.validate();
  const auto L = block_layout(s.name, p, shape, s.block_size, role);
  if (n == 0) return std::nullopt;
  qd::require(in != nullptr && out != nullptr, s.name, ": null device pointer (qnum::cuda::quantize with ", n,
              " elements)");
  return device_layout(L);
}

}  // namespace qnum::cuda::detail
