// OCP MX block kernels (qnum/cuda/quantize/mx_block.hpp, and launch_mx_exact of mx.cuh: the
// exact bundle of mxint and mxfp): one warp per block, the scale from the block's max |x|,
// then every element runs the CPU's QNUM_HD definition (format/mx_block.hpp).
#include "qnum/cuda/quantize/mx_block.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "map.cuh"
#include "mx.cuh"

namespace qnum::cuda {

namespace {

using detail::kFullMask;
using detail::lane_id;
using detail::warp_count;
using detail::warp_id;

/// Flat blocks of bs (the last one may be short), as detail::mx_exact_block.
__global__ void mx_blocks_kernel(MXElement e, Policy p, const float* in, std::size_t n, int bs, std::size_t nblocks,
                                 float* values, std::uint8_t* scales, std::uint16_t* codes) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::size_t warps = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  for (std::size_t b = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; b < nblocks;
       b += warps) {  // b is the same on every lane of the warp
    const std::size_t start = b * static_cast<std::size_t>(bs);
    const int len = static_cast<int>(n - start < static_cast<std::size_t>(bs) ? n - start : bs);
    double amax = 0;
    int special = 0;
    for (int i = lane; i < len; i += 32) {
      const float x = in[start + static_cast<std::size_t>(i)];
      special |= !qnum::detail::is_finite(x);
      amax = fmax(amax, qnum::detail::abs(static_cast<double>(x)));
    }
    for (int off = 16; off > 0; off /= 2) {
      amax = fmax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
      special |= __shfl_xor_sync(0xFFFFFFFFu, special, off);
    }
    if (special) {  // OCP: NaN scale, the whole block is NaN
      for (int i = lane; i < len; i += 32) {
        if (values) values[start + static_cast<std::size_t>(i)] = qnum::detail::kNaN;
        if (codes) codes[start + static_cast<std::size_t>(i)] = 0;
      }
      if (scales && lane == 0) scales[b] = 0xFF;
      continue;
    }
    const int sexp = qnum::detail::mx_exact_scale_exp(e, 8, amax);
    for (int i = lane; i < len; i += 32) {
      const std::size_t k = start + static_cast<std::size_t>(i);
      const float q = qnum::detail::mx_block_element(e, p, sexp, in[k], k);
      if (values) values[k] = static_cast<float>(qnum::detail::scale2(static_cast<double>(q), sexp));
      if (codes) codes[k] = static_cast<std::uint16_t>(qnum::detail::mx_element_code(e, q));
    }
    if (scales && lane == 0) scales[b] = static_cast<std::uint8_t>(sexp + qnum::detail::mx_scale_bias(8));
  }
}

/// OCP MX: blocks of bs along each fiber (the last one of a fiber may be short), as
/// detail::mx_exact_block (`search`: its clip search, errors summed in element order by every lane).
__global__ void mx_exact_kernel(MXElement e, int scale_bits, bool search, Policy p, detail::AxisLast a, int bs,
                                std::size_t per_fiber, const float* in, float* out, std::size_t nblocks) {
  const int lane = lane_id();
  constexpr detail::ClipQuantiles cq = detail::clip_quantiles();
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
    for (int off = 16; off > 0; off /= 2) amax = fmax(amax, __shfl_xor_sync(kFullMask, amax, off));
    if (detail::warp_or(special)) {  // OCP: NaN scale, the whole block is NaN
      for (std::int64_t j = lane; j < len; j += 32) out[a.flat(first + j)] = qnum::detail::kNaN;
      continue;
    }
    int sexp = qnum::detail::mx_exact_scale_exp(e, scale_bits, amax);
    if (search && len > 1) {
      const auto mag = [&](std::int64_t j) { return qnum::detail::abs(static_cast<double>(in[a.flat(first + j)])); };
      double best = std::numeric_limits<double>::infinity();
      int tried = std::numeric_limits<int>::min();
      for (int qi = 0; qi < detail::kClipCandidates; ++qi) {
        const auto r = qnum::detail::mx_exact_clip_rank(static_cast<std::size_t>(len), cq.q[qi]);
        const double lo = detail::warp_kth<double>(mag, len, static_cast<std::int64_t>(r.lo));
        const double hi = r.hi == r.lo ? lo : detail::warp_kth<double>(mag, len, static_cast<std::int64_t>(r.hi));
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

}  // namespace

namespace detail {

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

}  // namespace detail

void quantize(const MXElement& e, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  qnum::detail::require(e.is_ocp() && e.width >= 2 && e.width <= 16, "qnum::cuda::quantize: MX element ", e.name(),
                        " is not an OCP element type of at most 16 bits");
  detail::launch_reference(e, p, in, out, n, first, stream);
}

void mx_quantize_blocks(const MXElement& e, const Policy& p, const float* in, std::size_t n, int block_size,
                        float* values, std::uint8_t* scales, std::uint16_t* codes, cudaStream_t stream) {
  qnum::detail::require(block_size >= 1, "qnum::cuda::mx_quantize_blocks: block_size ", block_size, " must be >= 1");
  qnum::detail::require(e.is_ocp() && e.width >= 2 && e.width <= 16, "qnum::cuda::mx_quantize_blocks: element ",
                        e.name(), " is not an OCP element type of at most 16 bits");
  if (n == 0) return;
  const std::size_t nblocks = (n + static_cast<std::size_t>(block_size) - 1) / static_cast<std::size_t>(block_size);
  mx_blocks_kernel<<<detail::grid_for(nblocks * 32), detail::kThreads, 0, stream>>>(e, p, in, n, block_size, nblocks,
                                                                                    values, scales, codes);
  detail::check_launch("mx_blocks_kernel");
}

}  // namespace qnum::cuda
