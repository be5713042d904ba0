// Packed MX storage (ggml style: one E8M0 scale byte, then the element codes bit-packed
// LSB first) for the OCP element types, and the mase-cuda MXINT8 variant (formats.md §2.14).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/hd.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"

namespace qnum {

/// Element type tags for MXBlock.
namespace mx {
struct int8 {
  static constexpr MXElement element = MXElement::integer(8);
};
struct e4m3 {
  static constexpr MXElement element = MXElement::fp(4, 3);
};
struct e5m2 {
  static constexpr MXElement element = MXElement::fp(5, 2);
};
struct e3m2 {
  static constexpr MXElement element = MXElement::fp(3, 2);
};
struct e2m3 {
  static constexpr MXElement element = MXElement::fp(2, 3);
};
struct e2m1 {
  static constexpr MXElement element = MXElement::fp(2, 1);
};
}  // namespace mx

/// One packed OCP MX block of N elements: `scale` (E8M0: 2^(scale-127), 0xFF = NaN) and
/// the N element codes, element i at bits [i*w, i*w+w) of `data` counted LSB first (FP4:
/// element 2i in the low nibble). from_floats/to_floats agree exactly with exact-mode quantize.
template <class Elem, int N = 32>
struct MXBlock {
  static constexpr MXElement element = Elem::element;
  static constexpr int block_size = N;
  static constexpr int bits = element.width;
  static constexpr std::size_t data_bytes = static_cast<std::size_t>(N * bits / 8);
  static_assert(N >= 1 && (N * bits) % 8 == 0, "MXBlock: N * element bits must be whole bytes");
  static_assert(element.is_ocp(), "MXBlock: OCP element types only");

  std::uint8_t scale = 0;
  std::uint8_t data[data_bytes] = {};

  /// Bits of storage per element, the scale amortised (MXINT8 8.25, MXFP4 4.25).
  static constexpr double bits_per_value = bits + 8.0 / N;
  /// Largest finite magnitude: element max * 2^127.
  static constexpr double max() { return detail::scale2(element.max(), 127); }
  /// Smallest positive magnitude: element min positive * 2^-127.
  static constexpr double min_positive() { return detail::scale2(element.min_positive(), -127); }
  /// The spec this block stores.
  static constexpr auto spec() {
    if constexpr (element.is_int)
      return MXIntSpec{bits, N, -1, 8, false};
    else
      return MXFPSpec{element.exponent_width, element.frac_width, N, -1, 8, false};
  }

  constexpr std::uint32_t code(int i) const {
    std::uint32_t c = 0;
    for (int b = 0; b < bits; ++b) {
      const int bit = i * bits + b;
      c |= static_cast<std::uint32_t>((data[bit / 8] >> (bit % 8)) & 1u) << b;
    }
    return c;
  }
  constexpr void set_code(int i, std::uint32_t c) {
    for (int b = 0; b < bits; ++b) {
      const int bit = i * bits + b;
      const auto m = static_cast<std::uint8_t>(1u << (bit % 8));
      data[bit / 8] = static_cast<std::uint8_t>(((c >> b) & 1u) ? data[bit / 8] | m : data[bit / 8] & ~m);
    }
  }

  /// Quantizes N floats (OCP semantics under `p`; `first_index` keys stochastic rounding).
  static MXBlock from_floats(std::span<const float> x, const Policy& p = exact, std::uint64_t first_index = 0) {
    detail::require(x.size() == static_cast<std::size_t>(N), "MXBlock: from_floats needs ", N, " values, got ",
                    x.size());
    const auto c = encode_block(spec(), x, p, first_index);
    MXBlock blk;
    blk.scale = c.scale;
    for (int i = 0; i < N; ++i) blk.set_code(i, c.elements[static_cast<std::size_t>(i)]);
    return blk;
  }
  /// The N values (all NaN when scale is 0xFF).
  std::array<float, N> to_floats() const {
    std::array<std::uint16_t, N> codes{};
    for (int i = 0; i < N; ++i) codes[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(code(i));
    std::array<float, N> out{};
    detail::mx_decode_block(element, 8, scale, codes, out);
    return out;
  }
};

using MXInt8 = MXBlock<mx::int8>;
using MXFP8E4M3 = MXBlock<mx::e4m3>;
using MXFP8E5M2 = MXBlock<mx::e5m2>;
using MXFP6E3M2 = MXBlock<mx::e3m2>;
using MXFP6E2M3 = MXBlock<mx::e2m3>;
using MXFP4 = MXBlock<mx::e2m1>;
static_assert(sizeof(MXInt8) == 33 && sizeof(MXFP8E4M3) == 33 && sizeof(MXFP8E5M2) == 33);
static_assert(sizeof(MXFP6E3M2) == 25 && sizeof(MXFP6E2M3) == 25 && sizeof(MXFP4) == 17);

/// Scale byte, then each element code, as bits: "0b01111111 00000001 ...".
template <class Elem, int N>
std::string to_binary(const MXBlock<Elem, N>& b) {
  std::string s = "0b" + detail::bit_string(b.scale, 8);
  for (int i = 0; i < N; ++i) s += " " + detail::bit_string(b.code(i), MXBlock<Elem, N>::bits);
  return s;
}

// ---- mase-cuda MXINT8 (formats.md §2.14) ---------------------------------------------------

namespace detail {
/// float -> bfloat16 bits, round to nearest even (NaN -> 0x7FC0), as torch's .bfloat16().
QNUM_HD constexpr std::uint16_t mx_float_to_bf16_bits(float x) {
  const std::uint32_t u = float_bits(x);
  if (is_nan(x)) return 0x7FC0;
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
QNUM_HD constexpr float mx_bf16_bits_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}
}  // namespace detail

/// mase-cuda's packed MXINT8: int8 mantissas m in [-127, 127] and one scale byte S per group;
/// value = m * 2^(S - 133).
struct MXInt8MaseCuda {
  std::vector<std::int8_t> mantissa;
  std::vector<std::uint8_t> scale;
  int group_size = 32;
};

namespace detail {
/// |bf16(w)| of one mase-cuda input, magnitudes below 2^-126 flushed to 0 (sign kept apart).
QNUM_HD inline float mase_cuda_magnitude(float w, bool& negative) {
  const float v = mx_bf16_bits_to_float(mx_float_to_bf16_bits(w));
  negative = v < 0;
  const float m = bits_float(float_bits(v) & 0x7FFFFFFFu);
  return m < bits_float(0x00800000u) ? 0.0f : m;
}
}  // namespace detail

/// One mase-cuda MXINT8 group of `G` floats at `w`: writes the G mantissas to `m` and returns
/// the scale byte S (the definition quantize_mxint8_mase_cuda and the CUDA kernel share).
QNUM_HD inline std::uint8_t quantize_mxint8_mase_cuda_group(const float* w, int G, std::int8_t* m) {
  std::uint32_t S = 0;
  bool zeros = true;
  for (int i = 0; i < G; ++i) {
    bool neg = false;
    const float a = detail::mase_cuda_magnitude(w[i], neg);
    zeros &= a == 0.0f;
    const std::uint32_t e = (detail::float_bits(a) >> 23) & 0xFFu;
    S = e > S ? e : S;
  }
  const float div = detail::bits_float((zeros ? 1u : S) << 23);
  for (int i = 0; i < G; ++i) {
    bool neg = false;
    const float a = detail::mase_cuda_magnitude(w[i], neg);
    // RNE to an integer (as nearbyint); NaN stays NaN and becomes 0 below.
    float q = static_cast<float>(detail::round_int(static_cast<double>(a / div * 64.0f), Rounding::nearest_even));
    if (q < 0.0f) q = 0.0f;
    if (q > 127.0f) q = 127.0f;
    const int k = detail::is_nan(q) ? 0 : static_cast<int>(q);
    m[i] = static_cast<std::int8_t>(neg ? -k : k);
  }
  return static_cast<std::uint8_t>(S);
}

/// mase-cuda quantize1d_simulated: bf16 pre-rounding, magnitudes below 2^-126 flushed,
/// S = max float32 exponent field of the group (all-zero group: S = 0), m = clamp(RNE(|w| /
/// 2^(S-127) * 64), 0, 127) with the sign applied. numel % group_size != 0 -> qnum::Error.
/// NaN inputs (S = 255) give m = 0 here (torch's float->int8 of NaN is undefined).
inline MXInt8MaseCuda quantize_mxint8_mase_cuda(std::span<const float> w, int group_size = 32) {
  detail::require(group_size > 0, "mxint8 (mase-cuda): group_size ", group_size, " must be positive");
  detail::require(w.size() % static_cast<std::size_t>(group_size) == 0, "mxint8 (mase-cuda): ", w.size(),
                  " elements are not divisible by group_size ", group_size);
  MXInt8MaseCuda r;
  r.group_size = group_size;
  r.mantissa.resize(w.size());
  const auto G = static_cast<std::size_t>(group_size);
  r.scale.resize(w.size() / G);
  for (std::size_t g = 0; g < r.scale.size(); ++g)
    r.scale[g] = quantize_mxint8_mase_cuda_group(w.data() + g * G, group_size, r.mantissa.data() + g * G);
  return r;
}

/// mase-cuda's dequantize to bf16 by bit construction: sign | S << 7 | (|m| & 63) << 1, minus
/// the implicit one (sign | S << 7) when bit 6 of |m| is clear. Exact for S in [1, 254].
QNUM_HD constexpr std::uint16_t dequantize_mxint8_to_bf16_bits(std::int8_t m, std::uint8_t S) {
  const auto mu = static_cast<std::uint8_t>(m);
  const std::uint16_t sign = (mu & 0x80u) ? 0x8000u : 0u;
  const auto mabs = static_cast<std::uint8_t>(m < 0 ? -static_cast<int>(m) : m);  // -128 stays 0x80
  const auto exp = static_cast<std::uint16_t>(static_cast<std::uint16_t>(S) << 7);
  const auto frac = static_cast<std::uint16_t>((mabs & 0x3Fu) << 1);
  const auto y = static_cast<std::uint16_t>(sign | exp | frac);
  if (mabs & 0x40u) return y;
  const auto bias = static_cast<std::uint16_t>(sign | exp);
  return detail::mx_float_to_bf16_bits(detail::mx_bf16_bits_to_float(y) - detail::mx_bf16_bits_to_float(bias));
}

/// All values of a mase-cuda MXINT8 tensor as bf16 bits.
inline std::vector<std::uint16_t> dequantize_mxint8_mase_cuda_bf16(const MXInt8MaseCuda& q) {
  std::vector<std::uint16_t> out(q.mantissa.size());
  const auto G = static_cast<std::size_t>(q.group_size);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = dequantize_mxint8_to_bf16_bits(q.mantissa[i], q.scale[i / G]);
  return out;
}

}  // namespace qnum

/// Limits of the element values an MX block can hold over all E8M0 scales (as doubles: the
/// range of MXFP blocks exceeds float32's). NaN is the scale code 0xFF.
template <class Elem, int N>
class std::numeric_limits<qnum::MXBlock<Elem, N>> {
  using T = qnum::MXBlock<Elem, N>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr double min() noexcept { return T::min_positive(); }
  static constexpr double max() noexcept { return T::max(); }
  static constexpr double lowest() noexcept { return -T::max(); }
  static constexpr double denorm_min() noexcept { return T::min_positive(); }
};
