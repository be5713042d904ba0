// mxfp in vector registers. exact (OCP): blocks along the last axis, no quantile search,
// elements with emin >= -126 (kernel/quantize/mx_block.hpp). mase: blocks along the last axis
// without quantile search in integer lanes (MASE's element codec; blocks with Inf/NaN take the
// reference); any other block dim or quantile search runs MASE's codec per block, threaded
// (in place with quantile search: the tensor reference).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "qnum/format/mxfp.hpp"
#include "qnum/kernel/quantize/mx_block.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// One MASE mxfp block through the reference codec (blocks with Inf or NaN; kept out of line).
[[gnu::noinline]] inline void mxfp_mase_reference_block(const MXFPSpec& s, const float* x, float* y, std::int64_t len) {
  std::vector<float> scratch;
  std::vector<std::uint16_t> codes(static_cast<std::size_t>(len));
  const std::uint8_t S =
      qnum::detail::mase_mxfp_extract(s, 1.0f, {x, static_cast<std::size_t>(len)}, codes.data(), scratch);
  for (std::int64_t i = 0; i < len; ++i) y[i] = qnum::detail::mase_mxfp_value(s, S, codes[static_cast<std::size_t>(i)]);
}

/// MASE mxfp (no quantile search) along the last axis: blocks of B consecutive elements of the
/// flattened tensor, as mxint. Per block the shared exponent floor(log2 amax) - emax from the
/// log2 thresholds; per element MASE's codec (mx_element.hpp: truncation to 15 fraction bits,
/// RNE to M, the carry OR-ed into the exponent field, its one subnormal binade, saturation)
/// and its decode, in integer lanes on the bits of y = x 2^-shared. Blocks holding Inf or NaN
/// take the reference (torch.quantile makes their scale NaN).
template <class A>
void mxfp_mase_simd(const MXFPSpec& s, std::span<const float> in, std::span<float> out) {
  constexpr std::int64_t N = bf<A>::size;
  const int E = s.exponent_width, M = s.frac_width;
  const int bias = qnum::detail::mase_mx_bias(E), emax = qnum::detail::mase_mx_emax(E), exp_max = (1 << E) - 1;
  const int sh = 15 - M;  // the 15 kept fraction bits rounded to M
  const Log2Thresholds& floor_t = log2_thresholds(Log2Op::floor);
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {2, 0.0f, 0.0f};
    if (mb < 0x00800000) return {0, 1.0f, 0.0f};  // every element flushed: +0 (its y is 0)
    // floor(float32 log2(block max)) as the reference computes it (log2_op_scalar's thresholds)
    const std::int32_t f = mb >> 23, fl = f - 127 + (mb >= floor_t.t[static_cast<std::size_t>(f)] ? 1 : 0);
    const int shared = std::clamp(fl - emax, -127, 128);  // <= 127 for a finite block max
    return {0, pow2f_inline(-shared), pow2f_inline(shared)};
  };
  const float sub_scale = qnum::detail::pow2f(1 - bias - M);
  // out of line (noinline): for_each_row_block's grouped loops stay small; inlined, this kernel
  // ran ~30% slower (docs/perf.md, 2026-11-28)
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) __attribute__((noinline)) {
    if (bp.kind == 2) return mxfp_mase_reference_block(s, x, y, len);
    // 2^-shared is a float (|shared| <= 127), so x * 2^-shared rounds as the reference's x / 2^shared.
    const bf<A> R(bp.a), OUT(bp.b), SUB_SCALE(sub_scale);
    const bi<A> HALF_M1((1 << (sh - 1)) - 1), ONE(1), IMPLICIT(1 << M);
    const bi<A> MAX_CODE((exp_max << M) | ((1 << M) - 1)), NORMAL_BIAS((127 - bias) << 23);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> xv = bf<A>::load_unaligned(x + i);
      // float32 subnormal or zero inputs are flushed (|x| < 2^-126; no NaN reaches this loop)
      const bf<A> yv = xsimd::select(xsimd::abs(xv) < bf<A>(0x1p-126f), bf<A>(0.0f), xv * R);
      const bi<A> yb = as_int<A>(yv);
      const bi<A> ef = (yb >> 23) & bi<A>(0xff);
      const bi<A> top15 = (yb & bi<A>(0x7fffff)) >> 8;
      bi<A> yf = (top15 + HALF_M1 + ((top15 >> sh) & ONE)) >> sh;  // RNE, may reach 2^M
      const bi<A> ye = ef + bi<A>(bias - 127);
      yf = select_i<A>((ye == bi<A>(0)) & (yf != bi<A>(0)), (yf | IMPLICIT) >> 1, yf);
      // the carry is OR-ed, not added (MASE); above the top binade the largest code
      bi<A> code = select_i<A>(ye > bi<A>(exp_max), MAX_CODE, (ye << M) | yf);
      code = select_i<A>((ye < bi<A>(0)) | (ef == bi<A>(0)), bi<A>(0), code);
      // decode: a normal code's bits are code << (23 - M) (exponent field over fraction) plus
      // the rebias; codes below 2^M are subnormal, code · 2^(1-bias-M) (exact; 0 for 0)
      const bf<A> normal = as_float<A>((code << (23 - M)) + NORMAL_BIAS);
      const bf<A> sub = xsimd::batch_cast<float>(code) * SUB_SCALE;
      // both selects on integer masks (a float mask from an integer compare, or back, costs a
      // select and a compare on every ISA)
      const bf<A> v = as_float<A>(select_i<A>(code < IMPLICIT, as_int<A>(sub), as_int<A>(normal))) * OUT;
      // y's sign where y < 0 (not for -0, which an underflowing x * 2^-shared can give)
      const bi<A> sign = select_i<A>((yb & bi<A>(0x7fffffff)) != bi<A>(0),
                                     yb & bi<A>(static_cast<std::int32_t>(0x80000000u)), bi<A>(0));
      as_float<A>(as_int<A>(v) | sign).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, static_cast<std::int64_t>(in.size()), s.block_size, prep, apply);
}

inline void mase_mxfp_tiles(const MXFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape) {
  const auto order = qnum::detail::mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  const auto nb = static_cast<std::int64_t>(order.size()) / s.block_size;
  parallel_for(nb, std::max<std::int64_t>(1, kQuantizeGrain / s.block_size), [&](std::int64_t b0, std::int64_t b1) {
    qnum::detail::MaseMXFPScratch w;
    for (std::int64_t b = b0; b < b1; ++b)
      qnum::detail::mase_mxfp_block(s, in, out, order, static_cast<std::size_t>(b), w);
  });
}

/// MXFPSpec's row of the kernel table.
template <>
struct FamilyKernel<MXFPSpec> {
  template <class A>
  static QuantizePlan plan(const MXFPSpec& s, const Policy& p, const QuantizeCall& c) {
    const Shape* shape = &c.shape;
    if (!p.is_mase()) {
      if (!mx_exact_vector(s, p, c.shape) || s.element().grid().emin < -126) return {};
      return {QuantizePath::simd, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
                in_level([&] {
                  s.validate();
                  qnum::detail::require_exact_mxfp(s);
                });
                mx_quantize_simd<A>(s.element(), s.scale_exp_bits, p, in, out, *shape, s.block_size);
              }};
    }
    if (mx_mase_vector(s, c.shape))
      return checked_plan(QuantizePath::simd, s,
                          [&s](std::span<const float> in, std::span<float> out) { mxfp_mase_simd<A>(s, in, out); });
    // in place with quantile search: its error term reads the unpermuted input, which the
    // reference may already have overwritten
    if (s.quantile_search && c.in_place) return {};
    return checked_plan(QuantizePath::scalar, s, [&s, shape](std::span<const float> in, std::span<float> out) {
      mase_mxfp_tiles(s, in, out, *shape);
    });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
