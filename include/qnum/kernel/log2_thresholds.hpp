// MASE's float32 log2 decisions (floor / ceil / round of torch.log2 on a float) from the
// bits: per binade, the smallest float whose op(log2) reaches the next integer, found once by
// bisection with the reference log2 (format/minifloat.hpp torchf::log2). The CPU's SIMD
// kernels and the CUDA backend's MASE paths look the decision up instead of evaluating log2;
// the same floats by construction, as log2 is monotone.
#pragma once

#include <array>
#include <climits>
#include <cmath>
#include <cstdint>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/format/minifloat.hpp"

namespace qnum::detail {

enum class Log2Op : std::uint8_t { floor, ceil, nearest };

/// For each float32 exponent field f (w in [2^k, 2^(k+1)), k = f - 127): the smallest bit
/// pattern of that binade whose op(float32 log2(w)) is k+1 (it is k below it: log2 is
/// monotone and op(log2 w) lies in {k, k+1}); INT32_MAX when no such w. Field 0 (zero and
/// subnormals) and 255 get INT32_MAX (callers clamp exponents to >= -126 there).
struct Log2Thresholds {
  std::array<std::int32_t, 256> t{};
};

/// Whether the bits are a positive normal float (the values the tables decide).
QNUM_HD constexpr bool log2_positive_normal(std::uint32_t b) { return (b >> 23) >= 1 && (b >> 23) <= 254; }
/// op(log2 v) for a positive normal float's bits b in [2^k, 2^(k+1)): k, or k + 1 from the
/// binade's threshold in table t (256 entries; host or device memory).
QNUM_HD inline float log2_op_from_table(const std::int32_t* t, std::uint32_t b) {
  const std::uint32_t f = b >> 23;
  return static_cast<float>(static_cast<std::int32_t>(f) - 127 + (static_cast<std::int32_t>(b) >= t[f] ? 1 : 0));
}

inline float log2_op(Log2Op op, float v) {
  const float l = torchf::log2(v);
  switch (op) {
    case Log2Op::floor:
      return std::floor(l);
    case Log2Op::ceil:
      return std::ceil(l);
    case Log2Op::nearest:
      return torchf::round(l);
  }
  return l;
}

inline Log2Thresholds make_log2_thresholds(Log2Op op) {
  Log2Thresholds r;
  r.t.fill(INT32_MAX);
  for (int f = 1; f < 255; ++f) {
    const float next = static_cast<float>(f - 127 + 1);
    std::uint32_t lo = static_cast<std::uint32_t>(f) << 23, hi = static_cast<std::uint32_t>(f + 1) << 23;  // [lo, hi)
    if (!(log2_op(op, bits_float(hi - 1)) >= next)) continue;
    while (lo < hi) {  // smallest b in [lo, hi) with op(log2(b)) >= next
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (log2_op(op, bits_float(mid)) >= next)
        hi = mid;
      else
        lo = mid + 1;
    }
    r.t[static_cast<std::size_t>(f)] = static_cast<std::int32_t>(lo);
  }
  return r;
}

inline const Log2Thresholds& log2_thresholds(Log2Op op) {
  static const Log2Thresholds floor_t = make_log2_thresholds(Log2Op::floor);
  static const Log2Thresholds ceil_t = make_log2_thresholds(Log2Op::ceil);
  static const Log2Thresholds nearest_t = make_log2_thresholds(Log2Op::nearest);
  return op == Log2Op::floor ? floor_t : (op == Log2Op::ceil ? ceil_t : nearest_t);
}

/// op(float32 log2(v)) for one float, as log2_op computes it: from the thresholds for positive
/// normal v (no libm call: the MASE block kernels take one per block of 16), else libm.
inline float log2_op_scalar(Log2Op op, float v) {
  const std::uint32_t b = float_bits(v);
  return log2_positive_normal(b) ? log2_op_from_table(log2_thresholds(op).t.data(), b) : log2_op(op, v);
}

}  // namespace qnum::detail
