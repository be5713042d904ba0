// Block floating point (`block_fp`, MSFP): a shared exponent per block and sign-magnitude
// mantissas of M = W-1 bits. MASE's `block_fp_quantizer`.
//
// exact: shared e = floor(log2 max)+1 from the bits (max in [2^(e-1), 2^e)); elements
//   k*2^(e-M), k in [0, 2^M-1], rounded under the policy; if a magnitude rounds to 2^M the
//   block moves to e+1 and is re-rounded; e is clamped to [-b, min(2^E-1-b, 128)], saturating
//   at the top. NaN in a block -> NaN block; +-Inf -> the block takes the top exponent and
//   the Inf saturates. No epsilons, no pass-through.
// mase: spec §2.6 in float32 (ceil exponent, +1e-9, no carry, |x| <= 1e-8 passed through).
//
// Sections: spec and validation, MASE emulation, exact block codec, tensor quantize and
// info, encode_block/decode_block, packed type BlockFP<M, E, N>.
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

struct BlockFPSpec {
  static constexpr std::string_view name = "block_fp";
  static constexpr std::string_view help = "shared exponent per block, sign-magnitude mantissas";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 4> mase_defaults{
      {{"width", "12"}, {"exponent_width", "8"}, {"exponent_bias", "none"}, {"block_size", "16"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;                     // sign + mantissa bits (M = W-1)
  int exponent_width = 8;            // shared exponent bits E
  std::optional<int> exponent_bias;  // none: 2^(E-1)-1
  std::vector<int> block_size{16};

  friend bool operator==(const BlockFPSpec&, const BlockFPSpec&) = default;

  constexpr int mantissa_bits() const { return width - 1; }
  constexpr int bias() const { return exponent_bias ? *exponent_bias : (1 << (exponent_width - 1)) - 1; }
  /// Shared exponent range [-b, 2^E-1-b].
  constexpr int emin() const { return -bias(); }
  constexpr int emax() const { return (1 << exponent_width) - 1 - bias(); }
  /// Largest shared exponent exact mode uses: 2^128 bounds every float32, so e <= 128.
  constexpr int emax_exact() const { return emax() < 128 ? emax() : 128; }

  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width <= 8, name, ": exponent_width ", exponent_width,
                    " must be in [1, 8]");
    const int b = bias();
    detail::require(b >= -128 && -b - mantissa_bits() >= -149, name, ": exponent_bias ", b, " must be in [-128, ",
                    149 - mantissa_bits(), "] (the smallest step 2^(-bias-M) and the range must overlap float32)");
    detail::validate_block_size(name, block_size);
  }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "sign + mantissa bits W (mantissa M = W-1)"},
            {"exponent_width", "8", "shared exponent bits E"},
            {"exponent_bias", "none", "bias b; none = 2^(E-1)-1"},
            {"block_size", "16", "block shape, right-aligned to the tensor's trailing dims (e.g. 1x16)"}};
  }
  static BlockFPSpec from_keys(KeyValues& kv) {
    BlockFPSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 8);
    s.exponent_bias = kv.take_opt_int32({"exponent_bias"});
    if (auto b = kv.take_int_list({"block_size"})) s.block_size = *b;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("exponent_bias", exponent_bias);
    w.add("block_size", block_size);
  }
};

namespace detail {

// ---- MASE emulation ----------------------------------------------------------------------

/// MASE block_fp's block scale 2^e, e = clamp(ceil(log2 max), emin, emax) in float32
/// (2^128 = inf makes such blocks NaN, as in MASE).
QNUM_HD inline float mase_block_fp_scale(float block_max, float emin, float emax) {
  return mase_exp2(mase_clamp(std::ceil(mase_log2(block_max)), emin, emax));
}

/// One element of a MASE block_fp block with scale p (shift = 2^M, kmax = 2^M - 1).
QNUM_HD inline float mase_block_fp_element(float x, float p, float shift, float kmax, bool fold) {
  const float sign = mase_sign(x + 1e-9f);
  const float v = std::fabs(x) + 1e-9f;
  const float k = mase_clamp(mase_round(v / p * shift), 0.0f, kmax);
  float q = sign * p * (k / shift);
  if (fold) q = 0.0f + q;
  const float c = mase_close_to_zero(x) ? 1.0f : 0.0f;
  return (1.0f - c) * q + c * x;
}

/// MASE's block_fp on a whole tensor, step for step in float32 (spec §2.6): shared
/// e = clamp(ceil(log2 max)); s = sign(x+1e-9); k = clamp(round((|x|+1e-9)/2^e*2^M)); the
/// fold paths add +0; finally |x| <= 1e-8 passes through as (1-c)*q + c*x.
/// The float32 constants of MASE's block_fp (trivially copyable: the CUDA kernels take it by value).
struct BlockFPMase {
  float emin = 0, emax = 0, shift = 0, kmax = 0;
};
inline BlockFPMase block_fp_mase_params(const BlockFPSpec& s) {
  const float shift = pow2f(s.mantissa_bits());
  return {static_cast<float>(s.emin()), static_cast<float>(s.emax()), shift, shift - 1.0f};
}

inline void block_fp_quantize_mase(const BlockFPSpec& s, std::span<const float> in, std::span<float> out,
                                   const Shape& shape, Role role) {
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const auto maxima = mase_block_maxima(L, in);
  const auto k = block_fp_mase_params(s);
  for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
    const float p = mase_block_fp_scale(maxima[static_cast<std::size_t>(b)], k.emin, k.emax);
    for (auto i : idx)
      out[static_cast<std::size_t>(i)] =
          mase_block_fp_element(in[static_cast<std::size_t>(i)], p, k.shift, k.kmax, L.mase_fold);
  });
}

// ---- exact block codec -------------------------------------------------------------------

// The per-block steps are QNUM_HD functions of a trivially copyable parameter struct, so the
// CUDA kernels (one warp per block) run the same definitions as block_fp_encode_exact.

/// What exact mode needs of a BlockFPSpec: mantissa bits and the shared exponent range.
struct BlockFPExact {
  int M = 0, emin = 0, emax = 0;
};
inline BlockFPExact block_fp_exact_params(const BlockFPSpec& s) {
  return {s.mantissa_bits(), s.emin(), s.emax_exact()};
}

/// The shared exponent before any carry: max in [2^(e-1), 2^e), the top one for an Inf.
QNUM_HD inline int block_fp_exponent_exact(const BlockFPExact& k, const BlockScan& scan) {
  if (scan.has_inf) return k.emax;
  if (scan.max > 0) return std::clamp(ilog2(scan.max) + 1, k.emin, k.emax);
  return k.emin;
}

/// Code (sign << M | k) of one element at shared exponent e; sets `carry` when its magnitude
/// rounded to 2^M (the code saturates at 2^M - 1).
QNUM_HD inline std::uint32_t block_fp_code_exact(const BlockFPExact& k, int e, const Policy& p, float x,
                                                 std::uint64_t index, bool& carry) {
  const double kmax = pow2(k.M) - 1.0;
  const bool neg = sign_bit(x);
  double m = kmax + 1.0;
  if (!is_inf(x))
    m = round_magnitude(scale2(abs(static_cast<double>(x)), k.M - e), neg, p.rounding, stochastic_draw(p, index));
  carry = carry || m > kmax;
  return (static_cast<std::uint32_t>(neg) << k.M) | static_cast<std::uint32_t>(std::min(m, kmax));
}

/// The exponent after the first rounding pass: one binade up when some element carried (the
/// coarser step cannot carry again), unless already at the top or the block holds an Inf.
QNUM_HD inline int block_fp_carry_exponent(const BlockFPExact& k, int e, bool carry, const BlockScan& scan) {
  return carry && e < k.emax && !scan.has_inf ? e + 1 : e;
}

/// Value of a sign-magnitude code with M mantissa bits at shared exponent e.
QNUM_HD inline float block_fp_decode_exact(int M, int e, std::uint32_t code) {
  const double k = static_cast<double>(code & ((1u << M) - 1u));
  const double v = scale2(k, e - M);
  return static_cast<float>((code >> M) & 1u ? -v : v);
}
inline float block_fp_decode_exact(const BlockFPSpec& s, int e, std::uint32_t code) {
  return block_fp_decode_exact(s.mantissa_bits(), e, code);
}

/// Exact codes of one gathered block: returns the shared exponent e and writes sign-magnitude
/// codes (sign << M | k). `index[j]` keys element j's stochastic draw. Requires no NaN.
inline int block_fp_encode_exact(const BlockFPSpec& s, const Policy& p, std::span<const float> x,
                                 std::span<const std::int64_t> index, std::span<std::uint32_t> codes) {
  const auto k = block_fp_exact_params(s);
  const auto scan = scan_block(x);
  // Rounds every element at step 2^(e-M); true when some magnitude reached 2^M (carry).
  auto round_all = [&](int e) {
    bool carry = false;
    for (std::size_t j = 0; j < x.size(); ++j)
      codes[j] = block_fp_code_exact(k, e, p, x[j], static_cast<std::uint64_t>(index[j]), carry);
    return carry;
  };
  const int e = block_fp_exponent_exact(k, scan);
  const int e2 = block_fp_carry_exponent(k, e, round_all(e), scan);
  if (e2 != e) round_all(e2);
  return e2;
}

}  // namespace detail

// ---- tensor quantize and info ----------------------------------------------------------

/// Quantizes a C-order tensor of `shape` block by block; `role` matters only under MASE
/// semantics (it selects MASE's blocking path, spec §1.2).
inline void quantize(const BlockFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::block_fp_quantize_mase(s, in, out, shape, role);
  detail::quantize_blocks_exact<BlockFPSpec, detail::block_fp_encode_exact, detail::block_fp_decode_exact>(s, p, in,
                                                                                                           out, shape);
}

/// Facts: W + E/B bits per element; for a fixed shared exponent an element takes
/// 2^W - 1 distinct values (+-0 alias); global range over all shared exponents.
inline FormatInfo info(const BlockFPSpec& s, const Policy& p) {
  const int M = s.mantissa_bits();
  const int top = p.is_mase() ? s.emax() : s.emax_exact();
  FormatInfo f;
  f.bits_per_value = s.width + s.exponent_width / detail::elements_per_block(s.block_size);
  f.min_positive = detail::pow2(s.emin() - M);
  f.max = (1.0 - detail::pow2(-M)) * detail::pow2(top);
  f.distinct_values = detail::pow2(s.width) - 1;
  f.value_set = detail::concat("+-k * 2^(e-", M, "), k in [0, ", (std::int64_t{1} << M) - 1, "], shared e in [",
                               s.emin(), ", ", top, "] per block");
  return f;
}

// ---- encode_block / decode_block ---------------------------------------------------------

/// Exact codes of one 1-D block: shared = biased exponent e + b (E bits), codes = sign << M | k.
/// Stochastic draws are keyed by position in the block. NaN has no code: throws.
inline BlockCodes encode_block(const BlockFPSpec& s, std::span<const float> x, const Policy& p = exact) {
  s.validate();
  BlockCodes c;
  detail::require(!detail::scan_block(x).has_nan, s.name, ": NaN has no block_fp code");
  std::vector<std::int64_t> index(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) index[j] = static_cast<std::int64_t>(j);
  c.codes.resize(x.size());
  const int e = detail::block_fp_encode_exact(s, p, x, index, c.codes);
  c.shared = static_cast<std::uint32_t>(e + s.bias());
  return c;
}

/// Values of a block's codes.
inline std::vector<float> decode_block(const BlockFPSpec& s, const BlockCodes& c) {
  const int e = static_cast<int>(c.shared & ((1u << s.exponent_width) - 1u)) - s.bias();
  std::vector<float> out(c.codes.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = detail::block_fp_decode_exact(s, e, c.codes[j]);
  return out;
}

// ---- packed type -----------------------------------------------------------------------

/// A packed block of N values (ggml style): one E-bit shared biased exponent (bias 2^(E-1)-1)
/// and N sign-magnitude (M+1)-bit codes, bit-packed LSB first. BlockFP<7, 8, 16> is 17 bytes.
/// from_floats/to_floats agree exactly with exact-mode quantize of a 1-D block of N.
template <int M, int E, int N>
struct BlockFP {
  static_assert(M >= 1 && M <= 23, "BlockFP: mantissa bits M must be in [1, 23]");
  static_assert(E >= 1 && E <= 8, "BlockFP: exponent bits E must be in [1, 8]");
  static_assert(N >= 1, "BlockFP: block size N must be >= 1");
  static constexpr int bias = (1 << (E - 1)) - 1;
  static_assert(-bias - M >= -149, "BlockFP: the smallest step 2^(-bias-M) is below float32's range");
  static constexpr int code_bits = M + 1;
  static constexpr int block_size = N;
  static constexpr int emin = -bias;
  static constexpr int emax = (1 << E) - 1 - bias < 128 ? (1 << E) - 1 - bias : 128;

  std::array<std::uint8_t, (E + 7) / 8> exponent{};         // e + bias
  std::array<std::uint8_t, (N * (M + 1) + 7) / 8> codes{};  // N codes, LSB first

  static BlockFPSpec spec() { return {M + 1, E, std::nullopt, {N}}; }

  /// Packs N floats (exact semantics under policy p's rounding). NaN throws qnum::Error.
  static BlockFP from_floats(std::span<const float, N> x, const Policy& p = exact) {
    const auto c = encode_block(spec(), std::span<const float>(x), p);
    BlockFP b;
    detail::set_bits(b.exponent, 0, E, c.shared);
    for (int i = 0; i < N; ++i)
      detail::set_bits(b.codes, i * code_bits, code_bits, c.codes[static_cast<std::size_t>(i)]);
    return b;
  }
  std::array<float, N> to_floats() const {
    std::array<float, N> out{};
    const int e = static_cast<int>(shared_field()) - bias;
    for (int i = 0; i < N; ++i) out[static_cast<std::size_t>(i)] = detail::block_fp_decode_exact(spec(), e, code(i));
    return out;
  }
  constexpr std::uint32_t shared_field() const { return detail::get_bits(exponent, 0, E); }
  constexpr std::uint32_t code(int i) const { return detail::get_bits(codes, i * code_bits, code_bits); }

  // numeric_limits-style facts (over all shared exponents).
  static constexpr int radix = 2;
  static constexpr int digits = M;  // magnitude bits per element
  static constexpr bool is_signed = true, has_infinity = false, has_quiet_NaN = false;
  static constexpr double bits_per_value = M + 1 + static_cast<double>(E) / N;
  /// Largest magnitude (1 - 2^-M) * 2^emax.
  static constexpr float max() { return static_cast<float>((1.0 - detail::pow2(-M)) * detail::pow2(emax)); }
  static constexpr float lowest() { return -max(); }
  /// Smallest positive value 2^(emin - M).
  static constexpr float min() { return static_cast<float>(detail::pow2(emin - M)); }
  /// Step just above 1 (block whose max is 1: e = 1, step 2^(1-M)).
  static constexpr float epsilon() { return static_cast<float>(detail::pow2(1 - M)); }
};

static_assert(sizeof(BlockFP<7, 8, 16>) == 17);
static_assert(sizeof(BlockFP<3, 8, 16>) == 9);

/// Bits of a packed block: shared exponent, then each code (sign.magnitude), space separated.
template <int M, int E, int N>
std::string to_binary(const BlockFP<M, E, N>& b) {
  std::string s = "0b" + detail::bit_string(b.shared_field(), E) + " |";
  for (int i = 0; i < N; ++i) {
    const auto c = b.code(i);
    s += " " + std::string(1, (c >> M) & 1u ? '1' : '0') + "." + detail::bit_string(c & ((1u << M) - 1u), M);
  }
  return s;
}

}  // namespace qnum

/// Limits of the element values a BlockFP can hold over all shared exponents (a block is a
/// container of numbers, so max()/min() are the element facts, as floats).
template <int M, int E, int N>
class std::numeric_limits<qnum::BlockFP<M, E, N>> {
  using T = qnum::BlockFP<M, E, N>;

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
  static constexpr int digits = M;
  static constexpr float min() noexcept { return T::min(); }
  static constexpr float max() noexcept { return T::max(); }
  static constexpr float lowest() noexcept { return T::lowest(); }
  static constexpr float epsilon() noexcept { return T::epsilon(); }
  static constexpr float denorm_min() noexcept { return T::min(); }
};
