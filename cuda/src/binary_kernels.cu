// Binary-family and ternary kernels. Elementwise modes: one thread per element calling the
// QNUM_HD element definition. Per-channel modes: one thread per channel computes the
// channel's statistics with the CPU's own QNUM_HD function (so lane_sum's and torch's
// summation orders are the CPU's, term for term), then one thread per element applies them.
// Compiled with --fmad=false: no contraction the CPU reference lacks.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "launch.cuh"
#include "qnum/cuda/binary.hpp"
#include "qnum/cuda/check.hpp"

namespace qnum::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;
using detail::StreamScratch;

namespace {

// Channel statistics run one long serial sum per thread (with torch's 16 lane registers in
// local memory): small CTAs spread few channels over more SMs.
constexpr int kStatThreads = 64;

/// numel(shape) after the CPU's shape check (no negative dimension).
std::size_t checked_numel(std::string_view family, const Shape& shape) {
  for (auto d : shape) qnum::detail::require(d >= 0, family, ": negative dimension in shape ", to_string(shape));
  return static_cast<std::size_t>(numel(shape));
}

void require_pointers(std::string_view family, std::size_t n, const float* in, const float* out) {
  qnum::detail::require(n == 0 || (in != nullptr && out != nullptr), "qnum::cuda::quantize(", family,
                        "): null device pointer with ", n, " elements to process");
}

// ---- kernels ---------------------------------------------------------------------------

/// out[i] = op(in[i], i), grid-stride.
template <class Op>
__global__ void map_kernel(Op op, const float* in, float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = op(in[i], i);
}

/// stats[g] = stat(channel g's `size` elements), one thread per channel (the CPU's serial order).
template <class Stat, class T>
__global__ void stats_kernel(Stat stat, const float* in, std::size_t groups, std::int64_t size, T* stats) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride)
    stats[g] = stat(in + g * static_cast<std::size_t>(size), size);
}

/// out[i] = op(in[i], i, stats[channel of i]), grid-stride.
template <class Op, class T>
__global__ void channel_map_kernel(Op op, const float* in, const T* stats, std::int64_t size, float* out,
                                   std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = op(in[i], i, stats[i / static_cast<std::size_t>(size)]);
}

/// residual_sign's means as a kernel argument (levels <= 8, checked by residual_sign_prepare).
struct ResidualMeans {
  double m[8];
  std::size_t levels;
  bool mase;
};

__global__ void residual_sign_kernel(ResidualMeans means, const float* in, float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    qnum::detail::residual_sign_element(means.m, means.levels, means.mase, in[i], out + i, n);
}

// ---- element and channel operations (each one QNUM_HD definition) -----------------------

/// The draw of element i as the CPU's binary_quantize_impl takes it: explicit (or uploaded
/// torch) uniforms when given, else CounterRng(seed).uniform(i); 0 when deterministic.
struct Draw {
  bool stochastic;
  std::uint64_t seed;
  const float* u;
  __device__ float operator()(std::size_t i) const {
    if (!stochastic) return 0.0f;
    return u != nullptr ? u[i] : CounterRng(seed).uniform(static_cast<std::uint64_t>(i));
  }
};

struct BipolarOp {
  Draw draw;
  bool mase;
  __device__ float operator()(float x, std::size_t i) const {
    return qnum::detail::binary_bipolar_element(draw.stochastic, mase, x, draw(i));
  }
};

struct AlphaExactStat {
  __device__ float operator()(const float* g, std::int64_t n) const { return qnum::detail::binary_alpha_exact(g, n); }
};
struct ScaledExactOp {
  Draw draw;
  __device__ float operator()(float x, std::size_t i, float alpha) const {
    return qnum::detail::binary_scaled_element_exact(draw.stochastic, x, alpha, draw(i));
  }
};

struct AlphaMaseStat {
  bool stochastic;
  __device__ float operator()(const float* g, std::int64_t n) const {
    return qnum::detail::binary_alpha_mase(stochastic, g, n);
  }
};
struct ScaledMaseOp {
  bool stochastic;
  __device__ float operator()(float x, std::size_t, float alpha) const {
    return qnum::detail::binary_zero_scaled_element_mase(stochastic, x, alpha);
  }
};

struct TernaryExactStat {
  TernarySpec s;
  __device__ TernaryChannel operator()(const float* g, std::int64_t n) const {
    return qnum::detail::ternary_channel_exact(s, g, n);
  }
};
struct TernaryExactOp {
  __device__ float operator()(float x, std::size_t, const TernaryChannel& c) const {
    return qnum::detail::ternary_element_exact(x, c, static_cast<float>(c.alpha));
  }
};

struct TernaryMaseStat {
  bool scaling_factor;
  __device__ qnum::detail::TernarySampleMase operator()(const float* g, std::int64_t n) const {
    return qnum::detail::ternary_sample_stats_mase(scaling_factor, g, n);
  }
};
struct TernaryMaseOp {
  bool scaling_factor;
  __device__ float operator()(float x, std::size_t, const qnum::detail::TernarySampleMase& m) const {
    return qnum::detail::ternary_element_mase(scaling_factor, x, m);
  }
};

struct BinarizeOp {
  Policy p;
  __device__ float operator()(float x, std::size_t i) const {
    return qnum::quantize(BinarizeSpec{}, p, x, static_cast<std::uint64_t>(i));
  }
};

// ---- launchers -------------------------------------------------------------------------

template <class Op>
void launch_map(const char* kernel, const Op& op, const float* in, float* out, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, in, out, n);
  check_launch(kernel);
}

/// Statistics of `groups` channels of `size` elements into stream-ordered scratch, then the
/// elements (in == out is fine: every statistic is computed before any element is written).
template <class T, class Stat, class Op>
void launch_channels(const char* kernel, const Stat& stat, const Op& op, const float* in, float* out,
                     std::int64_t groups, std::int64_t size, cudaStream_t stream) {
  const auto n = static_cast<std::size_t>(groups * size);
  if (n == 0) return;
  const StreamScratch<T> stats(static_cast<std::size_t>(groups), stream);
  stats_kernel<<<grid_for(static_cast<std::size_t>(groups), kStatThreads), kStatThreads, 0, stream>>>(
      stat, in, static_cast<std::size_t>(groups), size, stats.get());
  check_launch(kernel);
  channel_map_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, in, stats.get(), size, out, n);
  check_launch(kernel);
}

/// MASE's per-sample grouping (4-D, checked by the caller): shape[0] samples.
qnum::detail::Groups mase_samples(const Shape& shape) {
  if (shape[0] == 0) return {0, 0};
  return {shape[0], numel(shape) / shape[0]};
}

void binary_impl(const BinarySpec& s, const Policy& p, const float* in, const float* u, bool explicit_u, float* out,
                 const Shape& shape, cudaStream_t stream) {
  s.validate();
  const std::size_t n = checked_numel(s.name, shape);
  require_pointers(s.name, n, in, out);
  if (explicit_u)
    qnum::detail::require(n == 0 || u != nullptr, s.name, ": explicit uniforms must not be null (", n, " elements)");
  const bool mase = p.is_mase();
  if (!s.bipolar && mase)
    qnum::detail::require_mase_4d(s.name, "binary_quantizer(bipolar=False) (MASE issue 261)", shape);
  if (n == 0) return;

  if (s.bipolar) {
    if (mase && s.stochastic && !explicit_u) {
      // torch.manual_seed(seed); torch.rand_like(x): a sequential mt19937 stream, so the CPU's
      // own generator makes it and the device reads it as explicit draws.
      const std::vector<float> torch_u = torch_cpu_rand(p.seed, n);
      const StreamScratch<float> du(n, stream);
      QNUM_CUDA_CHECK(cudaMemcpyAsync(du.get(), torch_u.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
      return launch_map("binary bipolar", BipolarOp{{true, p.seed, du.get()}, true}, in, out, n, stream);
    }
    return launch_map("binary bipolar", BipolarOp{{s.stochastic, p.seed, u}, mase}, in, out, n, stream);
  }
  if (mase) {
    const auto g = mase_samples(shape);
    return launch_channels<float>("binary zero-scaled (mase)", AlphaMaseStat{s.stochastic}, ScaledMaseOp{s.stochastic},
                                  in, out, g.count, g.size, stream);
  }
  const auto g = qnum::detail::channel_groups(shape);
  launch_channels<float>("binary scaled (exact)", AlphaExactStat{}, ScaledExactOp{{s.stochastic, p.seed, u}}, in, out,
                         g.count, g.size, stream);
}

}  // namespace

void quantize(const BinarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  binary_impl(s, p, in, nullptr, false, out, shape, stream);
}

void quantize(const BinarySpec& s, const Policy& p, const float* in, const float* u, float* out, const Shape& shape,
              cudaStream_t stream) {
  binary_impl(s, p, in, u, true, out, shape, stream);
}

void quantize(const TernarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = checked_numel(s.name, shape);
  require_pointers(s.name, n, in, out);
  if (p.is_mase()) {
    qnum::detail::require_mase_4d(s.name, "ternary_quantizer", shape);
    const auto g = mase_samples(shape);
    return launch_channels<qnum::detail::TernarySampleMase>("ternary (mase)", TernaryMaseStat{s.scaling_factor},
                                                            TernaryMaseOp{s.scaling_factor}, in, out, g.count, g.size,
                                                            stream);
  }
  const auto g = qnum::detail::channel_groups(shape);
  launch_channels<TernaryChannel>("ternary (exact)", TernaryExactStat{s}, TernaryExactOp{}, in, out, g.count, g.size,
                                  stream);
}

void quantize(const ResidualSignSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = checked_numel(s.name, shape);
  const auto means = qnum::detail::residual_sign_prepare(s, p, n, n * static_cast<std::size_t>(s.levels), shape);
  require_pointers(s.name, n, in, out);
  if (n == 0) return;
  ResidualMeans m{};
  std::copy(means.begin(), means.end(), m.m);
  m.levels = means.size();
  m.mase = p.is_mase();
  residual_sign_kernel<<<grid_for(n), kThreads, 0, stream>>>(m, in, out, n);
  check_launch("residual_sign");
}

void quantize(const BinarizeSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  const std::size_t n = checked_numel(s.name, shape);
  require_pointers(s.name, n, in, out);
  launch_map("binarize", BinarizeOp{p}, in, out, n, stream);
}

}  // namespace qnum::cuda
