// mxfp kernels (qnum/cuda/quantize/mxfp.hpp): MASE's blocks under mase_compat (clip search
// included), otherwise the OCP MX blocks of mx_block.cu; every element runs the CPU's QNUM_HD
// definition (format/mxfp.hpp).
#include "qnum/cuda/quantize/mxfp.hpp"

#include <cstdint>

#include "io.cuh"
#include "mx.cuh"

namespace qnum::cuda {

namespace {

using detail::lane_id;
using detail::warp_count;
using detail::warp_id;

/// MASE mxfp: as mase_mxint_kernel (mxint.cu), with the flushed magnitudes and the
/// all-flushed flag.
__global__ void mase_mxfp_kernel(MXFPSpec s, detail::AxisLast a, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  const std::int64_t B = s.block_size;
  const int E = s.exponent_width, M = s.frac_width;
  constexpr detail::ClipQuantiles cq = detail::clip_quantiles();
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
    top = detail::warp_merge(top);
    const bool all_flushed = detail::warp_and(flushed) != 0;
    std::int32_t shared = qnum::detail::mase_mxfp_shared_exp(E, top.quantile());
    std::uint8_t S = qnum::detail::mase_mxfp_scale_byte(shared, all_flushed);
    if (s.quantile_search) {  // as mase_mxint_kernel; scored by mase_mxfp_sq_err
      float best = qnum::detail::kInf;
      for (int qi = 0; qi < detail::kClipCandidates; ++qi) {
        const std::int32_t sh = qnum::detail::mase_mxfp_shared_exp(
            E, detail::warp_torch_quantile(mag, B, static_cast<float>(cq.q[qi]), top));
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

}  // namespace

void quantize(const MXFPSpec& s, const Policy& p, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  detail::check_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase())
    return detail::launch_mase_mx(
        s, in, out, shape, stream, [&](const detail::AxisLast& a, const float* src, std::size_t nblocks) {
          mase_mxfp_kernel<<<detail::grid_for(nblocks * 32), detail::kThreads, 0, stream>>>(s, a, src, out, nblocks);
          detail::check_launch("mase_mxfp_kernel");
        });
  qnum::detail::require_exact_mxfp(s);
  detail::launch_mx_exact(s.name, s.element(), s.scale_exp_bits, s.block_size, s.block_dim, s.quantile_search, p, in,
                          out, shape, stream);
}

}  // namespace qnum::cuda
