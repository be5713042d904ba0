// block_fp in vector registers. exact: nearest even, blocks inside one row (the max's bits
// give the shared exponent, the carry decided by its mantissa); mase: every MASE tile (1-D
// bias, 2-D weight/activation, 3-D activation) with MASE's float32 steps on whole vectors.
// Other settings (exact 2-D tiles, other roundings): the tensor reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "qnum/format/block_fp.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// block_fp exact along the last axis.
template <class A>
void block_fp_quantize_simd(const BlockFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                            const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int M = s.mantissa_bits(), emin = s.emin(), emax = s.emax_exact();
  const float kmax = static_cast<float>(qnum::detail::pow2(M) - 1.0);
  // max/2^lg >= 2 - 2^-M rounds up to 2^M (M >= 24: max 2^(M-e) is an integer, no carry)
  const std::int32_t carry_mant = M >= 24 ? 0x800000 : 0x800000 - (1 << (23 - M));
  auto pow2_fast = [](int t) {  // 2^t, t in [-149, 127]
    return t >= -126 ? bits_float(static_cast<std::uint32_t>(t + 127) << 23) : qnum::detail::pow2f(t);
  };
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x00800000 && mb < 0x7f800000) {  // normal max: integer arithmetic on its bits
      const int lg = (mb >> 23) - 127;
      int e = std::clamp(lg + 1, emin, emax);
      if (M - e > 127) return {2, 0.0f, 0.0f};
      // carry (see below): only when e = lg + 1 < emax, decided by the max's mantissa
      if (e == lg + 1 && e < emax && (mb & 0x7fffff) >= carry_mant) ++e;
      return {0, pow2_fast(M - e), pow2_fast(e - M)};
    }
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    const bool has_inf = mb == 0x7f800000;
    int e = emin;
    if (has_inf)
      e = emax;
    else if (mb > 0)
      e = std::clamp(qnum::detail::ilog2(static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)))) + 1, emin,
                     emax);
    if (M - e > 127) return {2, 0.0f, 0.0f};  // 2^(M-e) is no float (blocks below 2^-104)
    // Carry: some element reaches 2^M at step 2^(e-M); rounding is monotone, so it is the
    // max that does (Inf blocks keep e = emax and saturate).
    if (!has_inf && e < emax &&
        rne_nonneg(bits_float(static_cast<std::uint32_t>(mb)) * qnum::detail::pow2f(M - e)) > kmax)
      ++e;
    // |x| 2^(M-e) is exact in float, or below 2^-126, which rounds to 0 either way; 2^(M-e)
    // and 2^(e-M) are exact floats (M - e in [-127, 127], e - M >= -149 by validation).
    return {0, qnum::detail::pow2f(M - e), qnum::detail::pow2f(e - M)};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2)
      return reference_block<BlockFPSpec, qnum::detail::block_fp_encode_exact, qnum::detail::block_fp_decode_exact>(
          s, p, x, y, len);
    const bf<A> scale(bp.a), step(bp.b);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> k = xsimd::nearbyint(xsimd::abs(v) * scale);
      const bf<A> mag = xsimd::min(k, bf<A>(kmax)) * step;
      const bi<A> sgn = as_int<A>(v) & bi<A>(static_cast<std::int32_t>(0x80000000u));
      as_float<A>(as_int<A>(mag) | sgn).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

// ---- mase mode ------------------------------------------------------------------------------
// The same float32 steps as the references in block_fp.hpp / mx.hpp (shared per-element
// functions for the tails), on whole vectors; block maxima as integer maxima of |x|'s bits
// (NaN > Inf > finite), which give the same float as the reference's max for every non-NaN
// block and a NaN for a NaN block.

/// One run of a MASE block_fp block with scale p: the reference's float32 steps on vectors.
template <class A>
inline void mase_block_fp_run(const float* x, float* y, std::int64_t len, float p, float shift, float kmax, bool fold) {
  constexpr std::int64_t N = bf<A>::size;
  // Dividing by a power of two p is multiplying by 1/p whenever 1/p is a float (p >= 2^-127,
  // Inf, NaN, 0 included): both round the same exact quotient once. Also k / shift.
  const bool reciprocal = !(p > 0.0f && p < 0x1p-127f);
  const bf<A> P(p), R(1.0f / p), SHIFT(shift), INV_SHIFT(1.0f / shift), ZERO(0.0f);
  const bi<A> SIGN(static_cast<std::int32_t>(0x80000000u));
  std::int64_t i = 0;
  // MASE's steps in fewer operations, the same floats, for a finite non-zero scale p:
  // sign(x + 1e-9) · p · (k / 2^M) is ±(p · (k / 2^M)) with x's sign wherever it is used
  // (|x| > 1e-8; k / 2^M is exact, so one rounding either way), and the blend (1 - c) q + c x
  // is x + 0 on c lanes (0 · q is a zero there: q is finite, and x = -0 gives +0 both ways)
  // and q + 0 · x on the others (NaN for x = ±Inf, as MASE's 0 · x). A NaN scale (a NaN
  // block, or one borrowing its max) makes c lanes NaN too: MASE's own steps then.
  if (p > 0.0f && p < std::numeric_limits<float>::infinity()) [[likely]] {
    for (; i + N <= len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> av = xsimd::abs(v);
      const bf<A> a = av + bf<A>(1e-9f);
      const bf<A> k = clamp_t<A>(xsimd::nearbyint((reciprocal ? a * R : a / P) * SHIFT), 0.0f, kmax);
      bf<A> q = as_float<A>(as_int<A>(P * (k * INV_SHIFT)) | (as_int<A>(v) & SIGN));
      if (fold) q = ZERO + q;
      xsimd::select(av <= bf<A>(1e-8f), v + ZERO, xsimd::fma(v, ZERO, q)).store_unaligned(y + i);
    }
  } else {
    for (; i + N <= len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bf<A> a = xsimd::abs(v) + bf<A>(1e-9f);
      const bf<A> k = clamp_t<A>(xsimd::nearbyint((reciprocal ? a * R : a / P) * SHIFT), 0.0f, kmax);
      bf<A> q = sign_t<A>(v + bf<A>(1e-9f)) * P * (k * INV_SHIFT);
      if (fold) q = ZERO + q;
      const bf<A> c = xsimd::select((v == ZERO) | (xsimd::abs(v) <= bf<A>(1e-8f)), bf<A>(1.0f), ZERO);
      ((bf<A>(1.0f) - c) * q + c * v).store_unaligned(y + i);
    }
  }
  for (; i < len; ++i) y[i] = qnum::detail::mase_block_fp_element(x[i], p, shift, kmax, fold);
}

/// MASE block_fp. Tiles inside one row (bias, activations) take one pass
/// (mase_row_local_runs); tiles spanning rows (2-D weights) two (mase_tile_runs): block
/// maxima, then the elements.
template <class A>
void block_fp_mase_simd(const BlockFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape,
                        Role role) {
  const BlockLayout L = mase_block_layout(s.name, shape, s.block_size, role);
  const float emin = static_cast<float>(s.emin()), emax = static_cast<float>(s.emax());
  const float shift = qnum::detail::pow2f(s.mantissa_bits()), kmax = shift - 1.0f;
  const bool fold = L.mase_fold;
  auto scale_of = [&](float block_max) { return qnum::detail::mase_block_fp_scale(block_max, emin, emax); };
  auto scale_of_bits = [&](std::int32_t mb) {  // the same, without libm's log2 for normal maxima
    if (mb >= 0x00800000 && mb < 0x7f800000) {
      const float e = qnum::detail::mase_clamp(ceil_log2_normal(mb), emin, emax);
      return pow2f_inline(static_cast<int>(e));  // = mase_exp2(e) for a finite integral e
    }
    return scale_of(bits_float(static_cast<std::uint32_t>(mb)));
  };
  auto scale_of_bits_f = [&](float block_max) {
    return scale_of_bits(static_cast<std::int32_t>(qnum::detail::float_bits(block_max) & 0x7fffffffu));
  };
  auto run_scaled = [&](const float* x, float* y, std::int64_t len, float scale) {
    mase_block_fp_run<A>(x, y, len, scale, shift, kmax, fold);
  };
  if (mase_row_local_runs<A>(L, in, out, scale_of_bits_f, run_scaled)) return;
  mase_tile_runs<A>(L, in, out, scale_of_bits_f, run_scaled);
}

/// BlockFPSpec's row of the kernel table.
template <>
struct FamilyKernel<BlockFPSpec> {
  template <class A>
  static QuantizePlan plan(const BlockFPSpec& s, const Policy& p, const QuantizeCall& c) {
    const Shape* shape = &c.shape;
    if (!p.is_mase()) {
      if (p.rounding != Rounding::nearest_even || c.shape.empty() ||
          !blocks_inside_rows(exact_block_layout(c.shape, s.block_size)))
        return {};
      return checked_plan(QuantizePath::simd, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
        block_fp_quantize_simd<A>(s, p, in, out, *shape);
      });
    }
    if (!mase_tiles_accepted(c.shape, c.role)) return {};
    return checked_plan(QuantizePath::simd, s,
                        [&s, shape, role = c.role](std::span<const float> in, std::span<float> out) {
                          block_fp_mase_simd<A>(s, in, out, *shape, role);
                        });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
