// Exact (OCP) MX blocks in vector registers, shared by mxint and mxfp: blocks along the last
// axis, no quantile search, nearest even. Per block the scale exponent from the block max's
// bits, y = x 2^-s, the element rounding (integer or GridKernel), y' 2^s.
#pragma once

#include <cstdint>
#include <span>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/mx_block.hpp"
#include "qnum/format/mx_element.hpp"
#include "qnum/kernel/quantize/grid.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Whether the exact MX kernel covers spec s (mxint or mxfp) on a tensor of `shape`: nearest
/// even, no quantile search, blocks along the last axis.
template <class Spec>
bool mx_exact_vector(const Spec& s, const Policy& p, const Shape& shape) {
  const std::size_t rank = shape.empty() ? 1 : shape.size();
  return p.rounding == Rounding::nearest_even && !s.quantile_search &&
         (s.block_dim == -1 || s.block_dim == static_cast<int>(rank) - 1);
}

/// Whether the MASE MX kernels cover spec s (no quantile search): blocks of B consecutive
/// elements of the flattened tensor along the last axis.
template <class Spec>
bool mx_mase_vector(const Spec& s, const Shape& shape) {
  const int rank = static_cast<int>(shape.size());
  return !shape.empty() && !s.quantile_search && s.block_size >= 1 && (s.block_dim == -1 || s.block_dim == rank - 1) &&
         numel(shape) % s.block_size == 0;
}

/// MX exact (OCP): scale exponent from the block max, y = x 2^-s, element rounding, y' 2^s.
template <class A>
void mx_quantize_simd(const MXElement& e, int scale_bits, const Policy& p, std::span<const float> in,
                      std::span<float> out, const Shape& shape, std::int64_t bs) {
  constexpr std::int64_t N = bf<A>::size;
  const std::int64_t row = shape.empty() ? 1 : shape.back();
  const GridKernel<MXElement> grid(e, p, e.grid(p.subnormals == Subnormals::keep), false);
  const float kscale = qnum::detail::pow2f(e.frac_width), kinv = qnum::detail::pow2f(-e.frac_width);
  const auto kmin = static_cast<float>(e.kmin()), kmax = static_cast<float>(e.kmax());
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // NaN or Inf: NaN scale, the whole block is NaN
    const int sexp = qnum::detail::mx_exact_scale_exp(e, scale_bits,
                                                      static_cast<double>(bits_float(static_cast<std::uint32_t>(mb))));
    return {0, pow2f_inline(-sexp), pow2f_inline(sexp)};
  };
  // out of line (noinline): for_each_row_block's grouped loops stay small; inlined, this kernel
  // ran ~30% slower (docs/perf.md, 2026-11-28)
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) __attribute__((noinline)) {
    if (bp.kind == 1) return fill_nan(y, len);
    const bf<A> down(bp.a), up(bp.b);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i) * down;  // == float(x 2^-s), one rounding
      bf<A> q;
      if (e.is_int) {
        bf<A> k = xsimd::nearbyint(v * bf<A>(kscale));  // exact product; keeps the sign of zero
        k = xsimd::select(k < bf<A>(kmin), bf<A>(kmin), k);
        k = xsimd::select(k > bf<A>(kmax), bf<A>(kmax), k);
        q = k * bf<A>(kinv);
      } else {
        q = grid.template apply<A>(v);
      }
      (q * up).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
