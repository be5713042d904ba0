// Torch-order float32 sums and per-channel reductions (groups along dim 0, mean |x|, MASE's
// 4-D requirement and hard sigmoid): what binary and ternary need to reproduce torch's sums.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/lane_sum.hpp"
#include "qnum/core/shape.hpp"

namespace qnum {

namespace detail {

/// SIMD width (floats) torch's CPU reduction used for the MASE reference data (AVX2 = 8).
inline constexpr int kTorchSumLanes = 8;

/// torch's cascade_sum core (aten/src/ATen/native/cpu/SumKernel.cpp, multi_row_sum): 4 rows
/// of accumulators, partial sums promoted through 4 levels every 2^level_power loads.
template <class Acc, class Load>
[[gnu::always_inline]] QNUM_HD inline std::array<Acc, 4> torch_multi_row_sum(Load load, std::int64_t size,
                                                                             const Acc& zero) {
  constexpr int num_levels = 4;
  std::int64_t ceil_log2 = 1;
  if (size > 2) ceil_log2 = 64 - std::countl_zero(static_cast<std::uint64_t>(size - 1));
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2 / num_levels);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  Acc acc[num_levels][4];
  for (auto& level : acc)
    for (auto& a : level) a = zero;
  std::int64_t i = 0;
  while (i + level_step <= size) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < 4; ++k) acc[0][k] += load(i, k);
    for (int j = 1; j < num_levels; ++j) {
      for (int k = 0; k < 4; ++k) {
        acc[j][k] += acc[j - 1][k];
        acc[j - 1][k] = zero;
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i)
    for (int k = 0; k < 4; ++k) acc[0][k] += load(i, k);
  for (int j = 1; j < num_levels; ++j)
    for (int k = 0; k < 4; ++k) acc[0][k] += acc[j][k];
  return {acc[0][0], acc[0][1], acc[0][2], acc[0][3]};
}

/// torch's row_sum: the row viewed as (-1, 4), summed by torch_multi_row_sum, tail added to
/// the first partial, then the four partials folded.
template <class Acc, class Elem>
[[gnu::always_inline]] QNUM_HD inline Acc torch_row_sum(Elem elem, std::int64_t size, const Acc& zero) {
  const std::int64_t size_ilp = size / 4;
  auto partial = torch_multi_row_sum<Acc>([&](std::int64_t i, int k) { return elem(i * 4 + k); }, size_ilp, zero);
  for (std::int64_t i = size_ilp * 4; i < size; ++i) partial[0] += elem(i);
  for (int k = 1; k < 4; ++k) partial[0] += partial[k];
  return partial[0];
}

/// A float32 SIMD register of `n` lanes for emulating torch's vectorized accumulation.
struct FloatLanes {
  std::array<float, 16> v{};
  int n = 8;
  QNUM_HD FloatLanes& operator+=(const FloatLanes& o) {
    for (int l = 0; l < n; ++l) v[static_cast<std::size_t>(l)] += o.v[static_cast<std::size_t>(l)];
    return *this;
  }
};

/// Sum of elem(0..n-1) (float32 values, e.g. |x[k]| computed on the fly) in the order torch's
/// CPU `sum` uses for an inner (contiguous) reduction, so MASE's per-sample means come out bit
/// for bit: vectorized cascade over `lanes`-wide registers, scalar tail, then the lanes added
/// left to right. One thread runs it on the GPU too (cuda/src/quantize/channels.cuh).
template <class Elem>
[[gnu::always_inline]] QNUM_HD inline float torch_sum_f32_of(Elem elem, std::int64_t n, int lanes = kTorchSumLanes) {
  if (n < lanes) return 0.0f + torch_row_sum<float>([&](std::int64_t i) { return elem(i); }, n, 0.0f);
  FloatLanes zero;
  zero.n = lanes;
  const std::int64_t vec_size = n / lanes;
  const FloatLanes acc = torch_row_sum<FloatLanes>(
      [&](std::int64_t i) {
        FloatLanes r = zero;
        for (int l = 0; l < lanes; ++l) r.v[static_cast<std::size_t>(l)] = elem(i * lanes + l);
        return r;
      },
      vec_size, zero);
  float total = 0.0f;
  for (std::int64_t k = vec_size * lanes; k < n; ++k) total += elem(k);
  for (int l = 0; l < lanes; ++l) total += acc.v[static_cast<std::size_t>(l)];
  return 0.0f + total;  // the output is zero-filled, then accumulated into
}

/// torch_sum_f32_of over a contiguous float32 run.
QNUM_HD inline float torch_sum_f32(const float* p, std::int64_t n, int lanes = kTorchSumLanes) {
  return torch_sum_f32_of([p](std::int64_t i) { return p[i]; }, n, lanes);
}

/// Per-output-channel grouping used by exact mode: rank >= 2 -> one group per index of dim 0;
/// rank 0 or 1 -> the whole tensor is one group.
struct Groups {
  std::int64_t count = 1, size = 0;
};
inline Groups channel_groups(const Shape& shape) {
  const std::int64_t n = numel(shape);
  if (shape.size() < 2 || shape[0] == 0) return {1, n};
  return {shape[0], n / shape[0]};
}

/// Mean |x| over a group of n: Σ|x| in double in lane_sum's order (8 interleaved lanes, which
/// the SIMD kernels reproduce), divided by the count; NaN propagates.
QNUM_HD inline double mean_abs_double(const float* g, std::int64_t n) {
  const double sum = lane_sum(n, [g](std::int64_t k) { return std::fabs(static_cast<double>(g[k])); });
  return n == 0 ? 0.0 : sum / static_cast<double>(n);
}
inline double mean_abs_double(std::span<const float> g) {
  return mean_abs_double(g.data(), static_cast<std::int64_t>(g.size()));
}

/// MASE's 4-D requirement (its reductions and expands name dims 1, 2, 3 explicitly).
inline void require_mase_4d(std::string_view family, std::string_view what, const Shape& shape) {
  require(shape.size() == 4, family, ": MASE's ", what,
          " works only on 4-D tensors (it reduces and expands over dims 1, 2, 3); got shape ", to_string(shape),
          " (rank ", shape.size(), "). Use exact mode (per output channel, any rank)");
}

/// MASE's hard sigmoid clamp((x + 1) / 2, 0, 1) in float32 (NaN propagates as torch.clamp does).
QNUM_HD inline float mase_hard_sigmoid(float x) {
  const float v = (x + 1.0f) / 2.0f;
  if (v != v) return v;
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

}  // namespace detail

}  // namespace qnum
