// block_minifloat kernels (qnum/cuda/quantize/block_minifloat.hpp): a shared bias per block;
// the exact and mase_compat ops of the block walk in quantize/blocks.cuh, each calling the
// CPU's QNUM_HD definitions (format/block_minifloat.hpp).
#include "qnum/cuda/quantize/block_minifloat.hpp"

#include "blocks.cuh"

namespace qnum::cuda {

namespace {

namespace qd = qnum::detail;

// exact: the block's shared state from its scan (prepare), each element from it (value)
struct BlockMinifloatExactOp {
  qd::BlockMinifloatExact k;
  Policy p;
  struct State {
    int b;
    qd::FloatGrid g;
  };
  __device__ State prepare(const qd::BlockScan& sc, const detail::DeviceLayout&, const detail::Tile&,
                           const float*) const {
    const int b = qd::block_minifloat_bias_exact(k, sc);
    return {b, qd::block_minifloat_grid(k, b, p)};
  }
  __device__ float value(const State& s, float x, std::uint64_t i) const {
    return qd::block_minifloat_decode_exact(k, s.b, qd::block_minifloat_element_code(k, s.g, s.b, p, x, i));
  }
};

// mase_compat: the block's float32 scale or bias from its fixed-up max (prepare), each element
struct BlockMinifloatMaseOp {
  int width, exponent_width;
  float bias_max;
  __device__ float prepare(float block_max) const { return qd::mase_block_minifloat_bias(block_max, bias_max); }
  __device__ float value(float bias, float x, bool fold) const {
    return qd::mase_fold_add(qd::minifloat_ieee_mase_element(width, exponent_width, bias, x), fold);
  }
};

}  // namespace

void quantize(const BlockMinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              const Shape& shape, Role role, cudaStream_t stream) {
  const auto L = detail::checked_layout(s, p, in, out, n, shape, role);
  if (!L) return;
  if (p.is_mase())
    detail::launch_mase(BlockMinifloatMaseOp{s.width, s.exponent_width, static_cast<float>(s.bias_max(true))}, *L, in,
                        out, stream);
  else
    detail::launch_exact(BlockMinifloatExactOp{qd::block_minifloat_exact_params(s), p}, *L, in, out, stream);
}

}  // namespace qnum::cuda
