// block_fp kernels (qnum/cuda/quantize/block_fp.hpp): a shared exponent per block (exact: a
// first rounding pass votes on the carry); the exact and mase_compat ops of the block walk in
// quantize/blocks.cuh, each calling the CPU's QNUM_HD definitions (format/block_fp.hpp).
#include "qnum/cuda/quantize/block_fp.hpp"

#include "blocks.cuh"

namespace qnum::cuda {

namespace {

namespace qd = qnum::detail;

// exact: the block's shared state from its scan (prepare), each element from it (value)
struct BlockFPExactOp {
  qd::BlockFPExact k;
  Policy p;
  /// The shared exponent after the carry vote: every lane rounds its elements at e; one carry
  /// anywhere moves the block one binade up (skipped when no carry could move it).
  __device__ int prepare(const qd::BlockScan& sc, const detail::DeviceLayout& L, const detail::Tile& t,
                         const float* in) const {
    const int e = qd::block_fp_exponent_exact(k, sc);
    if (qd::block_fp_carry_exponent(k, e, true, sc) == e) return e;
    bool carry = false;
    for (std::int64_t j = detail::lane_id(); j < t.len; j += detail::kWarp) {
      const std::int64_t i = t.flat(L, j);
      (void)qd::block_fp_code_exact(k, e, p, in[i], static_cast<std::uint64_t>(i), carry);
    }
    return qd::block_fp_carry_exponent(k, e, __any_sync(detail::kFullMask, carry) != 0, sc);
  }
  __device__ float value(int e, float x, std::uint64_t i) const {
    bool carry = false;  // the final exponent's carry is already resolved (saturates)
    return qd::block_fp_decode_exact(k.M, e, qd::block_fp_code_exact(k, e, p, x, i, carry));
  }
};

// mase_compat: the block's float32 scale or bias from its fixed-up max (prepare), each element
struct BlockFPMaseOp {
  qd::BlockFPMase k;
  __device__ float prepare(float block_max) const { return qd::mase_block_fp_scale(block_max, k.emin, k.emax); }
  __device__ float value(float scale, float x, bool fold) const {
    return qd::mase_block_fp_element(x, scale, k.shift, k.kmax, fold);
  }
};

}  // namespace

void quantize(const BlockFPSpec& s, const Policy& p, const float* in, float* out, std::size_t n, const Shape& shape,
              Role role, cudaStream_t stream) {
  const auto L = detail::checked_layout(s, p, in, out, n, shape, role);
  if (!L) return;
  if (p.is_mase())
    detail::launch_mase(BlockFPMaseOp{qd::block_fp_mase_params(s)}, *L, in, out, stream);
  else
    detail::launch_exact(BlockFPExactOp{qd::block_fp_exact_params(s), p}, *L, in, out, stream);
}

}  // namespace qnum::cuda
