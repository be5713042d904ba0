// Bit-level helpers for IEEE binary32/binary64 used by every format's reference.
// All are constexpr so value types and tables can be built at compile time.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "qnum/core/hd.hpp"

namespace qnum::detail {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

QNUM_HD constexpr std::uint32_t float_bits(float x) { return std::bit_cast<std::uint32_t>(x); }
QNUM_HD constexpr float bits_float(std::uint32_t b) { return std::bit_cast<float>(b); }
QNUM_HD constexpr std::uint64_t double_bits(double x) { return std::bit_cast<std::uint64_t>(x); }
QNUM_HD constexpr double bits_double(std::uint64_t b) { return std::bit_cast<double>(b); }

QNUM_HD constexpr bool is_nan(double x) { return x != x; }
QNUM_HD constexpr bool is_inf(double x) {
  return x == std::numeric_limits<double>::infinity() || x == -std::numeric_limits<double>::infinity();
}
QNUM_HD constexpr bool is_finite(double x) { return !is_nan(x) && !is_inf(x); }
QNUM_HD constexpr bool sign_bit(float x) { return (float_bits(x) >> 31) != 0; }
QNUM_HD constexpr double abs(double x) { return x < 0 || (x == 0 && (double_bits(x) >> 63)) ? -x : x; }

/// Exact 2^e as a double for e in [-1074, 1023] (0 below, +inf above).
QNUM_HD constexpr double pow2(int e) {
  if (e > 1023) return std::numeric_limits<double>::infinity();
  if (e >= -1022) return bits_double(static_cast<std::uint64_t>(e + 1023) << 52);
  if (e >= -1074) return bits_double(std::uint64_t{1} << (e + 1074));
  return 0.0;
}

/// Exact 2^e as a float for e in [-149, 127] (0 below, +inf above).
QNUM_HD constexpr float pow2f(int e) {
  if (e > 127) return std::numeric_limits<float>::infinity();
  if (e >= -126) return bits_float(static_cast<std::uint32_t>(e + 127) << 23);
  if (e >= -149) return bits_float(std::uint32_t{1} << (e + 149));
  return 0.0f;
}

/// floor(log2(|x|)) from the bits, for finite non-zero x (subnormals included).
QNUM_HD constexpr int ilog2(double x) {
  const std::uint64_t b = double_bits(x) & ~(std::uint64_t{1} << 63);
  const int biased = static_cast<int>(b >> 52);
  if (biased != 0) return biased - 1023;
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  return -1074 + (63 - std::countl_zero(frac));
}

/// x * 2^e exactly (no double rounding) while the result stays a normal double.
QNUM_HD constexpr double scale2(double x, int e) {
  // split to keep each factor representable
  while (e > 1000) {
    x *= pow2(1000);
    e -= 1000;
  }
  while (e < -1000) {
    x *= pow2(-1000);
    e += 1000;
  }
  return x * pow2(e);
}

/// Bits of a code as a string of '0'/'1', most significant first, `width` digits.
inline std::string bit_string(std::uint64_t code, int width) {
  std::string s(static_cast<std::size_t>(width), '0');
  for (int i = 0; i < width; ++i)
    if ((code >> (width - 1 - i)) & 1u) s[static_cast<std::size_t>(i)] = '1';
  return s;
}

}  // namespace qnum::detail
