// binary kernels (qnum/cuda/quantize/binary.hpp). Bipolar: one thread per element calling the
// QNUM_HD element definition (quantize/map.cuh); scaled ({0, alpha}): per-channel statistics
// then the elements (quantize/channels.cuh), each the CPU's QNUM_HD function (format/binary.hpp).
#include "qnum/cuda/quantize/binary.hpp"

#include <cstdint>
#include <vector>

#include "channels.cuh"
#include "io.cuh"
#include "map.cuh"

namespace qnum::cuda {

namespace {

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

void binary_impl(const BinarySpec& s, const Policy& p, const float* in, const float* u, bool explicit_u, float* out,
                 const Shape& shape, cudaStream_t stream) {
  s.validate();
  const std::size_t n = detail::checked_numel(s.name, shape);
  detail::require_pointers(s.name, n, in, out);
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
      const detail::StreamScratch<float> du(n, stream);
      QNUM_CUDA_CHECK(cudaMemcpyAsync(du.get(), torch_u.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
      return detail::launch_indexed("binary bipolar", BipolarOp{{true, p.seed, du.get()}, true}, in, out, n, stream);
    }
    return detail::launch_indexed("binary bipolar", BipolarOp{{s.stochastic, p.seed, u}, mase}, in, out, n, stream);
  }
  if (mase) {
    const auto g = detail::mase_samples(shape);
    return detail::launch_channels<float>("binary zero-scaled (mase)", AlphaMaseStat{s.stochastic},
                                          ScaledMaseOp{s.stochastic}, in, out, g.count, g.size, stream);
  }
  const auto g = qnum::detail::channel_groups(shape);
  detail::launch_channels<float>("binary scaled (exact)", AlphaExactStat{}, ScaledExactOp{{s.stochastic, p.seed, u}},
                                 in, out, g.count, g.size, stream);
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

}  // namespace qnum::cuda
