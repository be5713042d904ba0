// NVFP4 (`nvfp4`), NVIDIA's 4-bit float with two-level scaling: FP4 E2M1 elements
// (+-{0, 0.5, 1, 1.5, 2, 3, 4, 6}) in blocks of 16 consecutive elements along the last axis,
// one FP8 E4M3 scale per block and one fp32 scale per tensor.
//
// exact (the only mode: MASE has no NVFP4):
//   A = max |x| over the tensor's finite elements; tensor scale t = float32(A / (6 * 448))
//   (at least 2^-149, so it never vanishes; A = 0 gives all zeros).
//   block scale s = the E4M3 value nearest (ties to even) to amax_block / (6 t), at most 448;
//   element = the E2M1 value nearest (ties to even) to x / (s t), at most 6;
//   value = element * s * t, rounded once to float32 (clamped to +-FLT_MAX).
//   Both roundings are exact decisions: the block scale rounds amax / (6t) taken in double (a
//   quotient of float32 operands is never within 2^-53 of an E4M3 tie without being on it);
//   elements compare |x| with the E2M1 midpoints times s*t (exact products in double).
//   A NaN or Inf in a block gives the block E4M3's NaN scale code: the whole block is NaN.
//   A block whose scale rounds to 0 quantizes to (signed) zeros.
//   Blocks never cross rows; a row's last block may be shorter.
//
// Sections: spec, E2M1/E4M3 rounding and the packed block (QNUM_HD: the CUDA kernel runs
// them too), tensor encode/decode, tensor quantize, info.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/mx_element.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

// ---- spec ---------------------------------------------------------------------------------

struct NVFP4Spec {
  static constexpr std::string_view name = "nvfp4";
  static constexpr std::string_view help = "NVIDIA FP4: E2M1 x E4M3 scale per 16 x fp32 tensor scale";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // MASE has no NVFP4
  static constexpr Grouping grouping() { return Grouping::tensor; }
  static constexpr bool saturates = false;  // the tensor scale follows the tensor's own max
  static constexpr int block_size = 16;
  static constexpr float element_max = 6.0f;       // E2M1
  static constexpr float scale_max = 448.0f;       // E4M3
  static constexpr std::uint8_t nan_scale = 0x7F;  // E4M3 S.1111.111

  friend bool operator==(const NVFP4Spec&, const NVFP4Spec&) = default;

  void validate(const Policy& p) const {
    detail::require(!p.is_mase(), name, ": nvfp4 has no MASE counterpart; use mode=exact");
    detail::require(p.rounding == Rounding::nearest_even, name,
                    ": NVFP4 rounds to nearest even; rounding=", to_string(p.rounding), " is not supported");
    detail::require(p.subnormals == Subnormals::keep, name, ": NVFP4 keeps subnormals (E2M1 0.5, E4M3 2^-9)");
  }
  static std::vector<KeyDoc> key_docs() { return {}; }
  static NVFP4Spec from_keys(KeyValues&) { return {}; }
  void write_keys(KeyWriter&) const {}
};

// ---- E2M1 / E4M3 rounding and the packed block ----------------------------------------------
// QNUM_HD: the CPU reference and the CUDA kernel (cuda/src/quantize/nvfp4.cu) run these.

namespace detail {

// Functions, not constants: a namespace-scope constant cannot be referenced from device code.
QNUM_HD constexpr MXElement nvfp4_e2m1() { return MXElement::fp(2, 1); }
QNUM_HD constexpr MXElement nvfp4_e4m3() { return MXElement::fp(4, 3); }

/// The E2M1 magnitude code (0..7) of a = |x| under the block factor st = s * t > 0: the E2M1
/// value nearest to a / st, ties to the even code, saturating at 6. Decided by comparing a with
/// the midpoints between E2M1 magnitudes times st (`mid_st`, exact products in double), which
/// is the exact decision and needs no division.
QNUM_HD inline std::uint8_t nvfp4_e2m1_code(double a, const double* mid_st) {
  int c = 0;
  while (c < 7 && a > mid_st[c]) ++c;
  if (c < 7 && a == mid_st[c] && c % 2 == 1) ++c;  // a tie between codes c and c + 1: the even one
  return static_cast<std::uint8_t>(c);
}

/// The midpoints between consecutive E2M1 magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6) times st.
QNUM_HD inline void nvfp4_e2m1_midpoints(double st, double* mid_st) {
  constexpr double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  for (int k = 0; k < 7; ++k) mid_st[k] = mid[k] * st;  // <= 3 + 28 significant bits: exact
}

/// The E4M3 code (0..0x7E) nearest to v >= 0, ties to even, saturating at 448.
QNUM_HD inline std::uint8_t nvfp4_e4m3_code(double v) {
  if (!(v < 448.0)) return 0x7E;
  if (v == 0.0) return 0;
  const int e = ilog2(v) > -6 ? ilog2(v) : -6;  // binades below 2^-6 share the subnormal step 2^-9
  const double q = scale2(round_int(scale2(v, 3 - e), Rounding::nearest_even), e - 3);
  return static_cast<std::uint8_t>(mx_element_code(nvfp4_e4m3(), static_cast<float>(q < 448.0 ? q : 448.0)));
}

}  // namespace detail

/// One packed NVFP4 block: the E4M3 scale byte, then 16 E2M1 codes (sign | exponent 2 |
/// mantissa 1), element 2i in the low nibble of data[i]. Nine bytes per 16 elements.
struct NVFP4Block {
  std::uint8_t scale = 0;
  std::uint8_t data[8] = {};

  friend bool operator==(const NVFP4Block&, const NVFP4Block&) = default;

  QNUM_HD std::uint8_t code(int i) const { return static_cast<std::uint8_t>((data[i / 2] >> (4 * (i % 2))) & 0xF); }
  QNUM_HD void set_code(int i, std::uint8_t c) {
    const int shift = 4 * (i % 2);
    data[i / 2] = static_cast<std::uint8_t>((data[i / 2] & ~(0xF << shift)) | ((c & 0xF) << shift));
  }
  /// The block scale's value (NaN for the NaN code).
  QNUM_HD float scale_value() const { return decode(detail::nvfp4_e4m3(), scale); }
  /// The value of E2M1 code c (sign included) in this block under tensor scale t: c * scale * t
  /// rounded once, within +-FLT_MAX; NaN for the NaN scale.
  QNUM_HD float code_value(std::uint8_t c, float t) const {
    const double s = scale_value();
    if (detail::is_nan(s)) return static_cast<float>(s);
    const double v = static_cast<double>(decode(detail::nvfp4_e2m1(), c)) * s * static_cast<double>(t);
    constexpr double fmax = std::numeric_limits<float>::max();
    return static_cast<float>(v < -fmax ? -fmax : (v > fmax ? fmax : v));
  }
  /// Element i's value under tensor scale t.
  QNUM_HD float value(int i, float t) const { return code_value(code(i), t); }
};
static_assert(sizeof(NVFP4Block) == 9, "NVFP4Block: one scale byte and 16 four-bit codes");

namespace detail {

/// The fp32 tensor scale for a finite max magnitude `amax` (see the top of the file).
QNUM_HD inline float nvfp4_tensor_scale_of(float amax) {
  if (amax == 0.0f) return 1.0f;
  const float t = amax / (NVFP4Spec::element_max * NVFP4Spec::scale_max);  // float32 division: rounded once
  return t > 0.0f ? t : bits_float(1u);                                    // at least 2^-149
}

/// Encodes n (<= 16) elements under tensor scale t.
QNUM_HD inline NVFP4Block nvfp4_encode(const float* x, int n, float t) {
  NVFP4Block b;
  double amax = 0.0;
  for (int i = 0; i < n; ++i) {
    if (!is_finite(x[i])) {
      b.scale = NVFP4Spec::nan_scale;
      return b;
    }
    const double a = abs(static_cast<double>(x[i]));
    amax = a > amax ? a : amax;
  }
  const double td = t;
  b.scale = nvfp4_e4m3_code(amax / (6.0 * td));
  const double st = static_cast<double>(b.scale_value()) * td;
  double mid_st[7];
  nvfp4_e2m1_midpoints(st, mid_st);
  for (int i = 0; i < n; ++i) {
    const std::uint8_t mag = st > 0.0 ? nvfp4_e2m1_code(abs(static_cast<double>(x[i])), mid_st) : 0;
    b.set_code(i, static_cast<std::uint8_t>(mag | (sign_bit(x[i]) ? 0x8 : 0x0)));
  }
  return b;
}

/// quantize's definition of one block: out[i] = the value of encode(x)[i] (out may equal x),
/// each of the 16 code values computed once per block.
QNUM_HD inline void nvfp4_block_values(const float* x, int n, float t, float* out) {
  const NVFP4Block b = nvfp4_encode(x, n, t);
  float values[16];
  for (int c = 0; c < 16; ++c) values[c] = b.code_value(static_cast<std::uint8_t>(c), t);
  for (int i = 0; i < n; ++i) out[i] = values[b.code(i)];
}

}  // namespace detail

/// The fp32 tensor scale t = float32(A / 2688), A = max |x| over the finite elements (at least
/// 2^-149; 1 for a tensor with no nonzero finite element, whose blocks are all zero or NaN).
inline float nvfp4_tensor_scale(std::span<const float> x) {
  float a = 0.0f;
  for (float v : x)
    if (std::isfinite(v)) a = std::max(a, std::fabs(v));
  return detail::nvfp4_tensor_scale_of(a);
}

/// Encodes up to 16 elements under tensor scale t (exact; missing elements are zero codes).
inline NVFP4Block encode_block(const NVFP4Spec&, std::span<const float> x, float t) {
  detail::require(x.size() <= NVFP4Spec::block_size, "nvfp4: a block holds at most 16 elements, got ", x.size());
  return detail::nvfp4_encode(x.data(), static_cast<int>(x.size()), t);
}

/// The first n (<= 16) values of a block under tensor scale t.
inline void decode_block(const NVFP4Block& b, float t, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = b.value(static_cast<int>(i), t);
}

/// A whole tensor in NVFP4: its shape, tensor scale and blocks (row by row, ceil(n/16) per row
/// of n elements along the last axis).
struct NVFP4Tensor {
  Shape shape;
  float tensor_scale = 1.0f;
  std::vector<NVFP4Block> blocks;
};

namespace detail {
/// Rows and row length of `shape` for NVFP4's blocking (a scalar is one row of one).
inline std::pair<std::int64_t, std::int64_t> nvfp4_rows(const Shape& shape) {
  const std::int64_t n = shape.empty() ? 1 : shape.back();
  return {n == 0 ? 0 : numel(shape) / n, n};
}
}  // namespace detail

inline NVFP4Tensor encode(const NVFP4Spec& s, std::span<const float> in, const Shape& shape) {
  std::vector<float> unused(in.size());
  detail::check_tensor_io(s.name, in, unused, shape);
  NVFP4Tensor q{shape, nvfp4_tensor_scale(in), {}};
  const auto [rows, n] = detail::nvfp4_rows(shape);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += NVFP4Spec::block_size)
      q.blocks.push_back(encode_block(
          s,
          in.subspan(static_cast<std::size_t>(r * n + j), static_cast<std::size_t>(std::min<std::int64_t>(16, n - j))),
          q.tensor_scale));
  return q;
}

inline void decode(const NVFP4Tensor& q, std::span<float> out) {
  detail::require(static_cast<std::int64_t>(out.size()) == numel(q.shape), "nvfp4: output has ", out.size(),
                  " elements, the tensor ", numel(q.shape));
  const auto [rows, n] = detail::nvfp4_rows(q.shape);
  std::size_t b = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += NVFP4Spec::block_size)
      decode_block(q.blocks.at(b++), q.tensor_scale,
                   out.subspan(static_cast<std::size_t>(r * n + j),
                               static_cast<std::size_t>(std::min<std::int64_t>(16, n - j))));
}

// ---- tensor quantize and info ---------------------------------------------------------------

/// Quantize = decode(encode): one definition of the format. `out` may alias `in`.
inline void quantize(const NVFP4Spec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  s.validate(p);
  detail::check_tensor_io(s.name, in, out, shape);
  const float t = nvfp4_tensor_scale(in);
  const auto [rows, n] = detail::nvfp4_rows(shape);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += NVFP4Spec::block_size) {
      const auto off = static_cast<std::size_t>(r * n + j);
      const auto len = static_cast<std::size_t>(std::min<std::int64_t>(NVFP4Spec::block_size, n - j));
      detail::nvfp4_block_values(in.data() + off, static_cast<int>(len), t, out.data() + off);
    }
}

inline FormatInfo info(const NVFP4Spec& s, const Policy& p) {
  s.validate(p);
  FormatInfo f;
  f.bits_per_value = 4.0 + 8.0 / NVFP4Spec::block_size;  // the tensor's fp32 scale not counted
  f.distinct_values = detail::nvfp4_e2m1().distinct_values();
  f.min_positive = detail::nvfp4_e2m1().min_positive() * detail::nvfp4_e4m3().min_positive();  // for tensor scale 1
  f.max = static_cast<double>(NVFP4Spec::element_max) * NVFP4Spec::scale_max;
  f.value_set =
      "E2M1 {0, 0.5, 1, 1.5, 2, 3, 4, 6} * E4M3 block scale (per 16 along the last axis) * fp32 tensor scale "
      "max|x| / 2688; shown for tensor scale 1";
  return f;
}

}  // namespace qnum
