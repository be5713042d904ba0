// residual_sign kernel (qnum/cuda/quantize/residual_sign.hpp): the level means on the host as
// the CPU computes them, then one thread per element running the CPU's QNUM_HD
// residual_sign_element (format/residual_sign.hpp), every level's output stacked [L, ...].
#include "qnum/cuda/quantize/residual_sign.hpp"

#include <algorithm>

#include "../launch.cuh"
#include "io.cuh"

namespace qnum::cuda {

namespace {

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

}  // namespace

void quantize(const ResidualSignSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  s.validate();
  const std::size_t n = detail::checked_numel(s.name, shape);
  const auto means = qnum::detail::residual_sign_prepare(s, p, n, n * static_cast<std::size_t>(s.levels), shape);
  detail::require_pointers(s.name, n, in, out);
  if (n == 0) return;
  ResidualMeans m{};
  std::copy(means.begin(), means.end(), m.m);
  m.levels = means.size();
  m.mase = p.is_mase();
  residual_sign_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(m, in, out, n);
  detail::check_launch("residual_sign");
}

}  // namespace qnum::cuda
