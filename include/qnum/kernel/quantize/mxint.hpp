// mxint in vector registers. exact (OCP) and mase: blocks along the last axis, no quantile
// search (kernel/quantize/mx_block.hpp; MASE's blocks of B consecutive elements, which may
// straddle rows). Quantile search and other block dims: the tensor reference.
#pragma once

#include <cstdint>
#include <span>

#include "qnum/format/mxint.hpp"
#include "qnum/kernel/quantize/mx_block.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// MASE mxint (no quantile search) along the last axis: blocks of B consecutive elements of
/// the flattened tensor (they may straddle rows, as in MASE).
template <class A>
void mxint_mase_simd(const MXIntSpec& s, std::span<const float> in, std::span<float> out) {
  constexpr std::int64_t N = bf<A>::size;
  const auto base = qnum::detail::mase_mxint_params(s, 1.0f);  // mul, lo, hi: the same for every block
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // torch.quantile of a block with NaN or Inf is NaN
    // clip = max(block max, tiny): its exponent without libm's log2
    const float sc = mb < 0x00800000 ? -126.0f : ceil_log2_normal(mb);
    const auto q = qnum::detail::mase_mxint_params_at(s, sc);
    return {0, q.p2, q.outscale};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    // p = 2^sc with sc in [-126, 128] and mul = 2^(w-1): their reciprocals are floats (or 0
    // for 2^128 = Inf), so multiplying rounds exactly as the reference's divisions do.
    const bf<A> R(1.0f / bp.a), OUT(bp.b), MUL(base.mul), INV_MUL(1.0f / base.mul), LO(base.lo), HI(base.hi);
    for (std::int64_t i = 0; i < len; i += N) {
      bf<A> m = xsimd::nearbyint(bf<A>::load_unaligned(x + i) * R * MUL);
      m = xsimd::select(m < LO, LO, m);
      m = xsimd::select(m > HI, HI, m);
      (m * INV_MUL * OUT).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, static_cast<std::int64_t>(in.size()), s.block_size, prep, apply);
}

/// MXIntSpec's row of the kernel table.
template <>
struct FamilyKernel<MXIntSpec> {
  template <class A>
  static QuantizePlan plan(const MXIntSpec& s, const Policy& p, const QuantizeCall& c) {
    const Shape* shape = &c.shape;
    if (!p.is_mase()) {
      if (!mx_exact_vector(s, p, c.shape)) return {};
      return checked_plan(QuantizePath::simd, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
        mx_quantize_simd<A>(s.element(), s.scale_bits, p, in, out, *shape, s.block_size);
      });
    }
    if (!mx_mase_vector(s, c.shape)) return {};
    return checked_plan(QuantizePath::simd, s,
                        [&s](std::span<const float> in, std::span<float> out) { mxint_mase_simd<A>(s, in, out); });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
