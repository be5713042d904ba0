// Fixed point and minifloat_ieee under the `exact` bundle (round to nearest even, saturate,
// subnormals kept) computed in float32 arithmetic and bits: the CUDA backend's fast path.
// A second implementation like the CPU's SIMD kernels, not a definition: the scalar
// references (format/fixed.hpp, format/minifloat.hpp) define the values, and tests prove
// these equal on every float32 input on the GPU (qnum-cuda-tests) and on a dense sample of
// inputs on the CPU (qnum-kernel-tests). `make` returns nothing where the argument below does
// not hold; callers then run the reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/format/fixed.hpp"
#include "qnum/format/minifloat.hpp"

namespace qnum::detail {

/// W <= 24, |F| <= 126: x * 2^F is exact (or overflows to Inf, which saturates, or underflows
/// far below 0.5, where both give 0), rint is RNE, k * 2^-F is exact for |k| < 2^24.
struct FixedExactF32 {
  float scale = 1, inv_scale = 1, kmin = 0, kmax = 0;

  static std::optional<FixedExactF32> make(const FixedSpec& s, const Policy& p) {
    if (!(p == exact) || s.width > 24 || s.frac_width > 126 || s.frac_width < -126) return std::nullopt;
    return FixedExactF32{pow2f(s.frac_width), pow2f(-s.frac_width), static_cast<float>(s.kmin()),
                         static_cast<float>(s.kmax())};
  }
  QNUM_HD float operator()(float x) const {
    if (x != x) return x;                                               // NaN stays NaN (fmin/fmax would drop it)
    const float k = fminf(fmaxf(rintf(x * scale), kmin), kmax) + 0.0f;  // + 0: a zero mantissa is +0
    return k * inv_scale;
  }
};

/// Grids with emin >= -126 and M <= 22: below 2^emin one rint of |x| * 2^(M - emin) (exact
/// scaling up, in two factors); from 2^emin up, RNE at bit 23 - M of the float's bits (a carry moves into the
/// exponent as it should, past float's range to Inf); then saturation at the largest finite.
struct MinifloatExactF32 {
  float min_normal = 0, sub_up_hi = 1, sub_up_lo = 1, sub_down = 1, maxv = 0;
  std::uint32_t half_minus_one = 0, lsb_shift = 0, drop_mask = 0;
  bool inf_code = false;

  static std::optional<MinifloatExactF32> make(const MinifloatSpec& s, const Policy& p) {
    const int m = s.mantissa_bits(), emin = 1 - s.bias();
    if (!(p == exact) || m < 0 || m > 22 || emin < -126) return std::nullopt;
    MinifloatExactF32 op;
    op.min_normal = pow2f(emin);
    op.sub_up_hi = pow2f((m - emin) / 2);  // two factors: 2^(M - emin) may pass 2^127 (bfloat16: 2^133)
    op.sub_up_lo = pow2f(m - emin - (m - emin) / 2);
    op.sub_down = pow2f(emin - m);
    op.maxv = static_cast<float>(minifloat_max(s));
    op.lsb_shift = static_cast<std::uint32_t>(23 - m);
    op.half_minus_one = (1u << (22 - m)) - 1u;
    op.drop_mask = (1u << (23 - m)) - 1u;
    op.inf_code = s.specials == Specials::ieee;
    return op;
  }
  QNUM_HD float operator()(float x) const {
    if (x != x) return x;
    const float a = fabsf(x);
    float q;
    if (a == kInf) {
      q = inf_code ? a : maxv;
    } else if (a < min_normal) {
      q = rintf(a * sub_up_hi * sub_up_lo) * sub_down;
    } else {
      std::uint32_t u = float_bits(a);
      u = (u + half_minus_one + ((u >> lsb_shift) & 1u)) & ~drop_mask;
      q = fminf(bits_float(u), maxv);
    }
    return sign_bit(x) ? -q : q;
  }
};

}  // namespace qnum::detail
