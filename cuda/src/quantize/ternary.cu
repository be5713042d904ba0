// ternary kernels (qnum/cuda/quantize/ternary.hpp): per-channel (exact) or per-sample (mase)
// statistics, then the elements (quantize/channels.cuh), each the CPU's QNUM_HD function
// (format/ternary.hpp).
#include "qnum/cuda/quantize/ternary.hpp"

#include "channels.cuh"
#include "io.cuh"

namespace qnum::cuda {

namespace {

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

}  // namespace

void quantize(const TernarySpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = detail::checked_numel(s.name, shape);
  detail::require_pointers(s.name, n, in, out);
  if (p.is_mase()) {
    qnum::detail::require_mase_4d(s.name, "ternary_quantizer", shape);
    const auto g = detail::mase_samples(shape);
    return detail::launch_channels<qnum::detail::TernarySampleMase>("ternary (mase)", TernaryMaseStat{s.scaling_factor},
                                                                    TernaryMaseOp{s.scaling_factor}, in, out, g.count,
                                                                    g.size, stream);
  }
  const auto g = qnum::detail::channel_groups(shape);
  detail::launch_channels<TernaryChannel>("ternary (exact)", TernaryExactStat{s}, TernaryExactOp{}, in, out, g.count,
                                          g.size, stream);
}

}  // namespace qnum::cuda
