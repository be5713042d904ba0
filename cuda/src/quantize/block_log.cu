// block_log kernels (qnum/cuda/quantize/block_log.hpp): a shared bias per block; the exact
// and mase_compat ops of the block walk in quantize/blocks.cuh, each calling the CPU's QNUM_HD
// definitions (format/block_log.hpp).
#include "qnum/cuda/quantize/block_log.hpp"

#include "blocks.cuh"

namespace qnum::cuda {

namespace {

namespace qd = qnum::detail;

// exact: the block's shared state from its scan (prepare), each element from it (value)
struct BlockLogExactOp {
  qd::BlockLogExact k;
  Policy p;
  __device__ int prepare(const qd::BlockScan& sc, const detail::DeviceLayout&, const detail::Tile&,
                         const float*) const {
    return qd::block_log_bias_exact(k, sc);
  }
  __device__ float value(int b, float x, std::uint64_t i) const {
    return qd::block_log_decode_exact(k.width, b, qd::block_log_code_exact(k, b, p, x, i));
  }
};

// mase_compat: the block's float32 scale or bias from its fixed-up max (prepare), each element
struct BlockLogMaseOp {
  int width;
  float top, bias_max;
  __device__ float prepare(float block_max) const { return qd::mase_block_log_bias(block_max, top, bias_max); }
  __device__ float value(float bias, float x, bool fold) const {
    return qd::mase_fold_add(qd::log_mase_element(width, bias, x), fold);
  }
};

}  // namespace

void quantize(const BlockLogSpec& s, const Policy& p, const float* in, float* out, std::size_t n, const Shape& shape,
              Role role, cudaStream_t stream) {
  const auto L = detail::checked_layout(s, p, in, out, n, shape, role);
  if (!L) return;
  if (p.is_mase())
    detail::launch_mase(BlockLogMaseOp{s.width, static_cast<float>(s.top()), static_cast<float>(s.bias_max())}, *L, in,
                        out, stream);
  else
    detail::launch_exact(BlockLogExactOp{qd::block_log_exact_params(s), p}, *L, in, out, stream);
}

}  // namespace qnum::cuda
