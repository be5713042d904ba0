// Rounding primitives shared by every format's reference quantizer: integer rounding under
// a Rounding mode, and rounding onto an IEEE-like floating-point grid (with carry into the
// next binade, subnormals and overflow). Computation is in double, which holds every float
// exactly, so results are exact before the final (exact) conversion to float.
#pragma once

#include <cstdint>
#include <limits>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"

namespace qnum::detail {

/// floor for doubles, constexpr (std::floor is constexpr only from C++23).
QNUM_HD constexpr double floor_(double v) {
  if (!(abs(v) < 4503599627370496.0)) return v;  // |v| >= 2^52 (or NaN): already integral
  const double t = static_cast<double>(static_cast<std::int64_t>(v));
  return t > v ? t - 1.0 : t;
}
QNUM_HD constexpr double ceil_(double v) { return -floor_(-v); }

QNUM_HD constexpr double round_int_unsigned_zero(double v, Rounding r, float u);

/// Rounds v to an integer-valued double. `u` in [0,1) is the uniform draw used only by
/// Rounding::stochastic (round up with probability v - floor(v)). A zero result keeps the
/// sign of v, as nearbyint / torch.round / torch.floor do.
QNUM_HD constexpr double round_int(double v, Rounding r, float u = 0.0f) {
  const double q = round_int_unsigned_zero(v, r, u);
  if (q == 0.0) return (double_bits(v) >> 63) ? -0.0 : 0.0;
  return q;
}

QNUM_HD constexpr double round_int_unsigned_zero(double v, Rounding r, float u) {
  const double lo = floor_(v);
  const double frac = v - lo;  // exact for |v| < 2^52
  switch (r) {
    case Rounding::nearest_even:
      if (frac > 0.5) return lo + 1.0;
      if (frac < 0.5) return lo;
      return floor_(lo * 0.5) * 2.0 == lo ? lo : lo + 1.0;
    case Rounding::nearest_away:
      if (frac > 0.5) return lo + 1.0;
      if (frac < 0.5) return lo;
      return v < 0 ? lo : lo + 1.0;
    case Rounding::toward_zero:
      return v < 0 ? ceil_(v) : lo;
    case Rounding::floor:
      return lo;
    case Rounding::ceil:
      return ceil_(v);
    case Rounding::stochastic:
      return static_cast<double>(u) < frac ? lo + 1.0 : lo;
  }
  return lo;
}

/// Rounds a non-negative magnitude of a value whose sign is `negative`, so that directed
/// modes act on the signed value (floor of a negative value rounds its magnitude up).
QNUM_HD constexpr double round_magnitude(double mag, bool negative, Rounding r, float u = 0.0f) {
  if (negative) {
    if (r == Rounding::floor)
      r = Rounding::ceil;
    else if (r == Rounding::ceil)
      r = Rounding::floor;
  }
  if (r == Rounding::toward_zero) r = Rounding::floor;
  return round_int(mag, r, u);
}

/// An IEEE-like grid of magnitudes: in binade [2^e, 2^(e+1)) for e >= emin the step is
/// 2^(e - precision + 1); below 2^emin the step stays 2^(emin - precision + 1) (subnormals).
struct FloatGrid {
  int precision = 24;  // significand bits including the leading one (>= 1)
  int emin = -126;     // exponent of the smallest normal binade
  double max = 0;      // largest finite magnitude
  bool subnormals = true;
};

/// Rounds |x| onto the grid. Carries into the next binade; the result may exceed g.max,
/// which the caller resolves with its overflow policy. `mag` must be finite and >= 0.
QNUM_HD constexpr double round_to_grid(const FloatGrid& g, double mag, bool negative, Rounding r, float u = 0.0f) {
  const int e = mag == 0.0 ? g.emin : (ilog2(mag) > g.emin ? ilog2(mag) : g.emin);
  const int step_exp = e - (g.precision - 1);
  const double k = round_magnitude(scale2(mag, -step_exp), negative, r, u);
  double q = scale2(k, step_exp);
  if (!g.subnormals && q < pow2(g.emin)) q = 0.0;
  return q;
}

}  // namespace qnum::detail
