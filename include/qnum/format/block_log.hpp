// Block log (`block_log`): log-format elements (+-2^e, 1 sign + W-1 exponent bits, no zero)
// with a shared exponent bias per block (bw bits). MASE's `block_log_quantizer`.
//
// exact: b = clamp(2^(W-1)-1 - e_top, 0, 2^bw-1) where e_top is the block max rounded to the
//   nearest power of two in the log domain (threshold 2^(k+1/2), exponent from the bits,
//   capped at 127 so 2^e_top is a float); elements rounded in the log domain under the
//   policy and clamped to [-b, 2^(W-1)-1-b]; zeros -> +2^-b. NaN in a block -> NaN block;
//   +-Inf -> e_top = 127 and the Inf saturates. An all-zero block gets b = 2^bw-1. Values
//   2^e below float32's range (e < -149) come out as float32 rounds them (0 for e <= -150).
// mase: spec §2.8 in float32: b = clamp(2^(W-1)-1-ceil(log2 max), 0, 2^bw-1), elements by
//   MASE's log rule (offset 0.1*2^-b, round(log2)).
//
// Sections: spec and validation, MASE emulation, exact block codec, tensor quantize and
// info, encode_block/decode_block, packed type BlockLog<W, BW, N>.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/block.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

// ---- spec and validation ---------------------------------------------------------------

struct BlockLogSpec {
  static constexpr std::string_view name = "block_log";
  static constexpr std::string_view help = "log elements, shared bias per block";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 1> mase_defaults{{{"block_size", "16"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;
  int exponent_bias_width = 8;
  std::vector<int> block_size{16};

  friend bool operator==(const BlockLogSpec&, const BlockLogSpec&) = default;

  /// Top of the element exponent field: exponents are [-b, top - b].
  constexpr int top() const { return (1 << (width - 1)) - 1; }
  constexpr int bias_max() const { return (1 << exponent_bias_width) - 1; }

  void validate() const {
    detail::require(width >= 2 && width <= 9, name, ": width ", width, " must be in [2, 9]");
    detail::require(exponent_bias_width >= 1 && exponent_bias_width <= 8, name, ": exponent_bias_width ",
                    exponent_bias_width, " must be in [1, 8]");
    detail::validate_block_size(name, block_size);
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "total element bits W (1 sign + W-1 exponent bits)"},
            {"exponent_bias_width", "8", "bits of the shared per-block bias"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims"}};
  }
  static BlockLogSpec from_keys(KeyValues& kv) {
    BlockLogSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_bias_width = kv.take_int({"exponent_bias_width"}, 8);
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_bias_width", exponent_bias_width).add("block_size", block_size);
  }
};

namespace detail {

// ---- MASE emulation ----------------------------------------------------------------------

/// MASE's log element with a float32 (per-block) bias, step for step (spec §2.5):
/// c = 2^-b * 0.1; sign(x + c) * 2^clamp(round(log2(|x| + c)), -b, 2^(W-1)-1-b).
QNUM_HD inline float log_mase_element(int W, float bias, float x) {
  const float emax = static_cast<float>((1 << (W - 1)) - 1) - bias, emin = -bias;
  const float c = mase_exp2(emin) * 0.1f;
  const float sign = mase_sign(x + c);
  const float value = std::fabs(x) + c;
  const float e = mase_clamp(mase_round(mase_log2(value)), emin, emax);
  return sign * mase_exp2(e);
}

/// MASE's shared bias of a block from its (zero-rule) max: clamp(top - ceil(log2 max), 0, bmax).
QNUM_HD inline float mase_block_log_bias(float block_max, float top, float bmax) {
  return mase_clamp(top - std::ceil(mase_log2(block_max)), 0.0f, bmax);
}

/// MASE's block_log on a whole tensor (spec §2.8).
inline void block_log_quantize_mase(const BlockLogSpec& s, std::span<const float> in, std::span<float> out,
                                    const Shape& shape, Role role) {
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const auto maxima = mase_block_maxima(L, in);
  const float top = static_cast<float>(s.top()), bmax = static_cast<float>(s.bias_max());
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    const float bias = mase_block_log_bias(maxima[static_cast<std::size_t>(b)], top, bmax);
    for (auto i : idx) {
      const float q = log_mase_element(s.width, bias, in[static_cast<std::size_t>(i)]);
      out[static_cast<std::size_t>(i)] = mase_fold_add(q, L.mase_fold);
    }
  });
}

// ---- exact block codec -------------------------------------------------------------------

/// Exponent of a finite positive magnitude rounded in the log domain under `r` (directed
/// modes act on the signed value; stochastic rounds up with probability m-1, unbiased).
QNUM_HD inline int log2_round(double mag, bool negative, Rounding r, float u = 0.0f) {
  const int k = ilog2(mag);
  const double m = scale2(mag, -k);  // [1, 2)
  if (m == 1.0) return k;
  if (negative && r == Rounding::floor)
    r = Rounding::ceil;
  else if (negative && r == Rounding::ceil)
    r = Rounding::floor;
  switch (r) {
    case Rounding::nearest_even:
    case Rounding::nearest_away:
      return m * m > 2.0 ? k + 1 : k;  // m*m exact: m has <= 24 bits
    case Rounding::toward_zero:
    case Rounding::floor:
      return k;
    case Rounding::ceil:
      return k + 1;
    case Rounding::stochastic:
      return static_cast<double>(u) < m - 1.0 ? k + 1 : k;
  }
  return k;
}

// The per-block steps are QNUM_HD functions of a trivially copyable parameter struct, so the
// CUDA kernels (one warp per block) run the same definitions as block_log_encode_exact.

/// What exact mode needs of a BlockLogSpec: element width, top exponent field, largest bias.
struct BlockLogExact {
  int width = 0, top = 0, bias_max = 0;
};
inline BlockLogExact block_log_exact_params(const BlockLogSpec& s) { return {s.width, s.top(), s.bias_max()}; }

/// The exact-mode shared bias of a block.
QNUM_HD inline int block_log_bias_exact(const BlockLogExact& k, const BlockScan& scan) {
  if (!scan.has_inf && scan.max == 0) return k.bias_max;
  const int etop = scan.has_inf ? 127 : std::min(log2_round(scan.max, false, Rounding::nearest_even), 127);
  return std::clamp(k.top - etop, 0, k.bias_max);
}
inline int block_log_bias_exact(const BlockLogSpec& s, const BlockScan& scan) {
  return block_log_bias_exact(block_log_exact_params(s), scan);
}

QNUM_HD inline float block_log_decode_exact(int width, int b, std::uint32_t code) {
  const int e = static_cast<int>(code & ((1u << (width - 1)) - 1u)) - b;
  const auto v = static_cast<float>(pow2(e));
  return (code >> (width - 1)) & 1u ? -v : v;
}
inline float block_log_decode_exact(const BlockLogSpec& s, int b, std::uint32_t code) {
  return block_log_decode_exact(s.width, b, code);
}

/// Code sign << (W-1) | (e + b) of one element of a block with bias b.
QNUM_HD inline std::uint32_t block_log_code_exact(const BlockLogExact& k, int b, const Policy& p, float v,
                                                  std::uint64_t index) {
  const int emin = -b, emax = k.top - b;
  bool neg = sign_bit(v);
  int e = emax;
  if (v == 0.0f) {
    e = emin;
    neg = false;  // no zero code: +-0 -> +2^emin
  } else if (!is_inf(v)) {
    e = std::clamp(log2_round(abs(static_cast<double>(v)), neg, p.rounding, stochastic_draw(p, index)), emin, emax);
  }
  return (static_cast<std::uint32_t>(neg) << (k.width - 1)) | static_cast<std::uint32_t>(e - emin);
}

/// Exact codes of one gathered block (no NaN): sign << (W-1) | (e + b); returns the bias.
inline int block_log_encode_exact(const BlockLogSpec& s, const Policy& p, std::span<const float> x,
                                  std::span<const std::int64_t> index, std::span<std::uint32_t> codes) {
  const auto k = block_log_exact_params(s);
  const int b = block_log_bias_exact(k, scan_block(x));
  for (std::size_t j = 0; j < x.size(); ++j)
    codes[j] = block_log_code_exact(k, b, p, x[j], static_cast<std::uint64_t>(index[j]));
  return b;
}

}  // namespace detail

// ---- tensor quantize and info ----------------------------------------------------------

/// Quantizes a C-order tensor of `shape` block by block; `role` matters only under MASE
/// semantics (it selects MASE's blocking path, spec §1.2).
inline void quantize(const BlockLogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::block_log_quantize_mase(s, in, out, shape, role);
  detail::quantize_blocks_exact<BlockLogSpec, detail::block_log_encode_exact, detail::block_log_decode_exact>(
      s, p, in, out, shape);
}

/// Facts: W + bw/B bits per element; 2^W distinct values per element for a fixed bias (no
/// zero); global range over b in [0, 2^bw-1] (exact: top exponent capped at 127).
inline FormatInfo info(const BlockLogSpec& s, const Policy& p) {
  int emax = s.top();
  if (!p.is_mase()) emax = std::min(emax, 127);
  FormatInfo f;
  f.bits_per_value = s.width + s.exponent_bias_width / detail::elements_per_block(s.block_size);
  f.min_positive = detail::pow2(-s.bias_max());
  f.max = detail::pow2(emax);
  f.distinct_values = detail::pow2(s.width);
  f.value_set = detail::concat("+-2^e, e in [-b, ", s.top(), "-b], shared b in [0, ", s.bias_max(),
                               "] per block; no zero (0 -> +2^-b)");
  return f;
}

// ---- encode_block / decode_block ---------------------------------------------------------

/// Exact codes of one 1-D block: shared = bias b (bw bits), codes = sign << (W-1) | (e + b).
/// NaN has no code: throws.
inline BlockCodes encode_block(const BlockLogSpec& s, std::span<const float> x, const Policy& p = exact) {
  s.validate();
  detail::require(!detail::scan_block(x).has_nan, s.name, ": NaN has no block_log code");
  std::vector<std::int64_t> index(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) index[j] = static_cast<std::int64_t>(j);
  BlockCodes c;
  c.codes.resize(x.size());
  c.shared = static_cast<std::uint32_t>(detail::block_log_encode_exact(s, p, x, index, c.codes));
  return c;
}

/// Values of a block's codes.
inline std::vector<float> decode_block(const BlockLogSpec& s, const BlockCodes& c) {
  const int b = static_cast<int>(c.shared & ((1u << s.exponent_bias_width) - 1u));
  std::vector<float> out(c.codes.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = detail::block_log_decode_exact(s, b, c.codes[j]);
  return out;
}

// ---- packed type -----------------------------------------------------------------------

/// A packed block of N log values: a BW-bit shared bias and N W-bit codes (sign, W-1 exponent
/// bits), bit-packed LSB first. from_floats/to_floats agree exactly with exact-mode quantize
/// of a 1-D block of N.
template <int W, int BW, int N>
struct BlockLog {
  static_assert(W >= 2 && W <= 9, "BlockLog: width W must be in [2, 9]");
  static_assert(BW >= 1 && BW <= 8, "BlockLog: bias bits BW must be in [1, 8]");
  static_assert(N >= 1, "BlockLog: block size N must be >= 1");
  static constexpr int code_bits = W;
  static constexpr int block_size = N;

  std::array<std::uint8_t, (BW + 7) / 8> bias{};      // shared bias b
  std::array<std::uint8_t, (N * W + 7) / 8> codes{};  // N codes, LSB first

  static BlockLogSpec spec() { return {W, BW, {N}}; }

  /// Packs N floats (exact semantics under policy p's rounding). NaN throws qnum::Error.
  static BlockLog from_floats(std::span<const float, N> x, const Policy& p = exact) {
    const auto c = encode_block(spec(), std::span<const float>(x), p);
    BlockLog b;
    detail::set_bits(b.bias, 0, BW, c.shared);
    for (int i = 0; i < N; ++i) detail::set_bits(b.codes, i * W, W, c.codes[static_cast<std::size_t>(i)]);
    return b;
  }
  std::array<float, N> to_floats() const {
    std::array<float, N> out{};
    const int b = static_cast<int>(shared_field());
    for (int i = 0; i < N; ++i) out[static_cast<std::size_t>(i)] = detail::block_log_decode_exact(spec(), b, code(i));
    return out;
  }
  constexpr std::uint32_t shared_field() const { return detail::get_bits(bias, 0, BW); }
  constexpr std::uint32_t code(int i) const { return detail::get_bits(codes, i * W, W); }

  // numeric_limits-style facts (over all shared biases).
  static constexpr int radix = 2;
  static constexpr bool is_signed = true, has_infinity = false, has_quiet_NaN = false;
  static constexpr double bits_per_value = W + static_cast<double>(BW) / N;
  static constexpr int emax = (1 << (W - 1)) - 1 < 127 ? (1 << (W - 1)) - 1 : 127;
  static constexpr int emin = -((1 << BW) - 1);
  static constexpr float max() { return static_cast<float>(detail::pow2(emax)); }
  static constexpr float lowest() { return -max(); }
  /// Smallest positive value 2^-(2^BW-1) as float32 (0 when below float32's range).
  static constexpr float min() { return static_cast<float>(detail::pow2(emin)); }
};

static_assert(sizeof(BlockLog<8, 8, 16>) == 17);
static_assert(sizeof(BlockLog<4, 4, 32>) == 17);

/// Bits of a packed block: shared bias, then each code (sign.exponent), space separated.
template <int W, int BW, int N>
std::string to_binary(const BlockLog<W, BW, N>& b) {
  std::string s = "0b" + detail::bit_string(b.shared_field(), BW) + " |";
  for (int i = 0; i < N; ++i) {
    const auto c = b.code(i);
    s += " " + std::string(1, (c >> (W - 1)) & 1u ? '1' : '0') + "." +
         detail::bit_string(c & ((1u << (W - 1)) - 1u), W - 1);
  }
  return s;
}

}  // namespace qnum

/// Limits of the element values a BlockLog can hold over all shared biases (as floats).
template <int W, int BW, int N>
class std::numeric_limits<qnum::BlockLog<W, BW, N>> {
  using T = qnum::BlockLog<W, BW, N>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr int digits = 1;  // one significant bit: every value is a power of two
  static constexpr float min() noexcept { return T::min(); }
  static constexpr float max() noexcept { return T::max(); }
  static constexpr float lowest() noexcept { return T::lowest(); }
  static constexpr float denorm_min() noexcept { return T::min(); }
};
