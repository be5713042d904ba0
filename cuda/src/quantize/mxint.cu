// mxint kernels (qnum/cuda/quantize/mxint.hpp): MASE's blocks under mase_compat (clip search
// included), otherwise the OCP MX blocks of mx_block.cu; every element runs the CPU's QNUM_HD
// definition (format/mxint.hpp).
#include "qnum/cuda/quantize/mxint.hpp"

#include <cmath>
#include <cstdint>

#include "io.cuh"
#include "mx.cuh"

namespace qnum::cuda {

namespace {

using detail::lane_id;
using detail::warp_count;
using detail::warp_id;

/// MASE mxint: blocks of B consecutive positions (they may straddle fibers). The clip search
/// scores each candidate against the *unpermuted* block in[first + j] (as MASE does): every
/// lane sums the whole block in element order, the CPU's order.
__global__ void mase_mxint_kernel(MXIntSpec s, detail::AxisLast a, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  const std::int64_t B = s.block_size;
  constexpr detail::ClipQuantiles cq = detail::clip_quantiles();
  for (std::size_t b = warp_id(); b < nblocks; b += warp_count()) {
    const std::int64_t first = static_cast<std::int64_t>(b) * B;
    const auto mag = [&](std::int64_t j) { return std::fabs(in[a.flat(first + j)]); };
    qnum::detail::MxTop top;
    for (std::int64_t j = lane; j < B; j += 32) top.add(mag(j));
    top = detail::warp_merge(top);
    auto q = qnum::detail::mase_mxint_params(s, top.quantile());
    if (s.quantile_search) {
      float best = 0;
      bool have = false;
      for (int qi = 0; qi < detail::kClipCandidates; ++qi) {
        const auto cand =
            qnum::detail::mase_mxint_params(s, detail::warp_torch_quantile(mag, B, static_cast<float>(cq.q[qi]), top));
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

}  // namespace

void quantize(const MXIntSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  detail::check_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase())
    return detail::launch_mase_mx(
        s, in, out, shape, stream, [&](const detail::AxisLast& a, const float* src, std::size_t nblocks) {
          mase_mxint_kernel<<<detail::grid_for(nblocks * 32), detail::kThreads, 0, stream>>>(s, a, src, out, nblocks);
          detail::check_launch("mase_mxint_kernel");
        });
  detail::launch_mx_exact(s.name, s.element(), s.scale_bits, s.block_size, s.block_dim, s.quantile_search, p, in, out,
                          shape, stream);
}

}  // namespace qnum::cuda
