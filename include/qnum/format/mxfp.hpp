// `mxfp`: MX float, FP8/FP6/FP4 elements sharing one power-of-two scale per block_size
// elements along block_dim.
//
// exact (default) = OCP MX v1.0 (E4M3, E5M2, E3M2, E2M3, E2M1; padded blocks along block_dim;
//   floor(log2 amax) - emax_elem, E8M0; NaN/Inf in a block -> NaN block; RNE, saturating).
// mase = MASE's mxfp_quantizer bit for bit (the `_minifloat_mx` codec, flattened blocks).
// Shared machinery: mx_block.hpp; packed storage: mx_packed.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/mx_block.hpp"
#include "qnum/format/mx_element.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

/// MX float (`mxfp`): E/M minifloat elements sharing an E8M0 scale. exact: OCP E4M3, E5M2,
/// E3M2, E2M3, E2M1; mase_compat additionally E1M2.
struct MXFPSpec {
  static constexpr std::string_view name = "mxfp";
  static constexpr std::string_view help = "MX float: shared E8M0 scale per block (presets mxfp8/6/4_*)";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 3> mase_defaults{
      {{"block_dim", "-1"}, {"scale_exp_bits", "8"}, {"quantile_search", "false"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int exponent_width = 4;  // MASE: element_exp_bits
  int frac_width = 3;      // mantissa bits; MASE: element_frac_bits
  int block_size = 32;
  int block_dim = -1;
  int scale_exp_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXFPSpec&, const MXFPSpec&) = default;

  constexpr int element_bits() const { return 1 + exponent_width + frac_width; }
  constexpr MXElement element() const { return MXElement::fp(exponent_width, frac_width); }

  void validate() const {
    const int e = exponent_width, m = frac_width;
    const bool known = (e == 4 && m == 3) || (e == 5 && m == 2) || (e == 3 && m == 2) || (e == 2 && m == 3) ||
                       (e == 2 && m == 1) || (e == 1 && m == 2);
    detail::require(known, name, ": exponent_width ", e, " with frac_width ", m,
                    " is not an MX element (allowed: E4M3, E5M2, E3M2, E2M3, E2M1; mase_compat also E1M2)");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size, " must be in [1, 4096]");
    detail::require(scale_exp_bits == 8, name, ": scale_exp_bits ", scale_exp_bits,
                    " is not allowed (allowed: 8, the E8M0 scale; MASE: \"Invalid scale exponent bits: ",
                    scale_exp_bits, ". Legal values are: (8,).\")");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"exponent_width", "4", "element exponent bits (MASE: element_exp_bits)"},
            {"frac_width", "3", "element mantissa bits (MASE: element_frac_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_exp_bits", "8", "bits of the shared exponent (must be 8)"},
            {"quantile_search", "false", "per-block clip search over quantiles of |x| (MASE)"}};
  }
  static std::vector<SpecPreset<MXFPSpec>> presets() {
    return {{"mxfp8_e4m3", MXFPSpec{4, 3, 32, -1, 8, false}, "OCP MXFP8 E4M3, block 32"},
            {"mxfp8_e5m2", MXFPSpec{5, 2, 32, -1, 8, false}, "OCP MXFP8 E5M2, block 32"},
            {"mxfp6_e3m2", MXFPSpec{3, 2, 32, -1, 8, false}, "OCP MXFP6 E3M2, block 32"},
            {"mxfp6_e2m3", MXFPSpec{2, 3, 32, -1, 8, false}, "OCP MXFP6 E2M3, block 32"},
            {"mxfp4_e2m1", MXFPSpec{2, 1, 32, -1, 8, false}, "OCP MXFP4 E2M1, block 32"}};
  }
  static MXFPSpec from_keys(KeyValues& kv) {
    MXFPSpec s;
    s.exponent_width = kv.take_int({"exponent_width", "element_exp_bits"}, 4);
    s.frac_width = kv.take_int({"frac_width", "element_frac_bits"}, 3);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_exp_bits = kv.take_int({"scale_exp_bits", "scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("exponent_width", exponent_width).add("frac_width", frac_width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_exp_bits != 8) w.add("scale_exp_bits", scale_exp_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

namespace detail {

/// MASE mxfp's view of an element: float32 subnormals flush to zero (also for the scale).
QNUM_HD inline bool mase_mxfp_flushes(float x) { return (float_bits(x) & 0x7F800000u) == 0; }
QNUM_HD inline float mase_mxfp_abs(float x) { return mase_mxfp_flushes(x) ? 0.0f : std::fabs(x); }

/// MASE mxfp's shared exponent from the block's clip value amax (a quantile of mase_mxfp_abs).
/// int32 arithmetic wraps as in torch (NaN/-inf -> INT32_MIN -> INT32_MIN - emax wraps high).
QNUM_HD inline std::int32_t mase_mxfp_shared_exp(int ebits, float amax) {
  std::int32_t shared = mx_to_int32_x86(std::floor(mx_mase_log2f(amax)));
  shared =
      static_cast<std::int32_t>(static_cast<std::uint32_t>(shared) - static_cast<std::uint32_t>(mase_mx_emax(ebits)));
  return shared < -127 ? -127 : (shared > 128 ? 128 : shared);
}

/// The scale byte: shared + 127, or 0 when every element of the block flushes to zero.
QNUM_HD inline std::uint8_t mase_mxfp_scale_byte(std::int32_t shared, bool all_flushed) {
  return all_flushed ? 0 : static_cast<std::uint8_t>(shared + 127);
}

/// The code of element x in a block of shared exponent `shared` (low 8 bits of MASE's codec).
/// x / 2^shared as x86 divides (NaN payloads reach the codec's mantissa bits).
QNUM_HD inline std::uint16_t mase_mxfp_code(int ebits, int mbits, std::int32_t shared, float x) {
  const float y = mase_mxfp_flushes(x) ? 0.0f : mase_x86_div(x, pow2f(shared));
  return static_cast<std::uint16_t>(mase_mx_minifloat_encode(ebits, mbits, y) & 0xFFu);
}

/// MASE mxfp components of one block for a given quantile: the scale byte and the element codes.
inline std::uint8_t mase_mxfp_extract(const MXFPSpec& s, float q, std::span<const float> xs, std::uint16_t* codes,
                                      std::vector<float>& scratch) {
  const std::size_t n = xs.size();
  scratch.resize(n);
  bool all_flushed = true;
  for (std::size_t i = 0; i < n; ++i) {
    all_flushed &= mase_mxfp_flushes(xs[i]);
    scratch[i] = mase_mxfp_abs(xs[i]);
  }
  const std::int32_t shared = mase_mxfp_shared_exp(s.exponent_width, mx_torch_quantile(scratch, q));
  for (std::size_t i = 0; i < n; ++i) codes[i] = mase_mxfp_code(s.exponent_width, s.frac_width, shared, xs[i]);
  return mase_mxfp_scale_byte(shared, all_flushed);
}

/// MASE mxfp's search term of one element: MASE scores a candidate on q = code / 2^(M-1) *
/// (2^((S - 127) mod 256) mod 256) - x (the raw codes in uint8 arithmetic, not the dequantized
/// values; x from the unpermuted flattened block), reproduced as is; q^2 in float32.
QNUM_HD inline float mase_mxfp_sq_err(int frac_width, std::uint8_t S, std::uint16_t code, float ref) {
  const float div = static_cast<float>(1 << (frac_width - 1));
  const auto d = static_cast<std::uint8_t>(S - 127);
  const float pw = d < 8 ? static_cast<float>(1u << d) : 0.0f;  // uint8 pow wraps
  const float q = static_cast<float>(code) / div * pw - ref;
  return q * q;
}

/// MASE mxfp compose: decode(code) * 2^(S - 127) in float32.
QNUM_HD inline float mase_mxfp_value(const MXFPSpec& s, std::uint8_t S, std::uint16_t code) {
  return mase_mx_minifloat_decode(s.exponent_width, s.frac_width, code) * pow2f(static_cast<int>(S) - 127);
}

/// Scratch buffers of mase_mxfp_block.
struct MaseMXFPScratch {
  std::vector<float> xs, scratch;
  std::vector<std::uint16_t> codes, best_codes;
};

/// MASE mxfp block b (elements order[b*B, (b+1)*B)); blocks are independent.
inline void mase_mxfp_block(const MXFPSpec& s, std::span<const float> in, std::span<float> out,
                            std::span<const std::int64_t> order, std::size_t b, MaseMXFPScratch& w) {
  const auto B = static_cast<std::size_t>(s.block_size);
  auto& [xs, scratch, codes, best_codes] = w;
  xs.resize(B);
  codes.resize(B);
  best_codes.resize(B);
  for (std::size_t j = 0; j < B; ++j) xs[j] = in[static_cast<std::size_t>(order[b * B + j])];
  std::uint8_t S = mase_mxfp_extract(s, 1.0f, xs, best_codes.data(), scratch);
  if (s.quantile_search) {
    float best = kInf;  // scored as mase_mxfp_sq_err says
    for (double qd : mx_clip_quantiles) {
      const std::uint8_t Sq = mase_mxfp_extract(s, static_cast<float>(qd), xs, codes.data(), scratch);
      float err = 0.0f;
      for (std::size_t j = 0; j < B; ++j) err += mase_mxfp_sq_err(s.frac_width, Sq, codes[j], in[b * B + j]);
      if (err < best) best = err, S = Sq, best_codes = codes;
    }
  }
  for (std::size_t j = 0; j < B; ++j)
    out[static_cast<std::size_t>(order[b * B + j])] = mase_mxfp_value(s, S, best_codes[j]);
}

inline void mase_mxfp_quantize(const MXFPSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape) {
  const auto order = mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  MaseMXFPScratch w;
  for (std::size_t b = 0; b * static_cast<std::size_t>(s.block_size) < order.size(); ++b)
    mase_mxfp_block(s, in, out, order, b, w);
}

inline void require_exact_mxfp(const MXFPSpec& s) {
  require(s.element().is_ocp(), s.name, ": E", s.exponent_width, "M", s.frac_width,
          " elements exist only in mode=mase_compat (OCP MX v1.0 defines E4M3, E5M2, E3M2, E2M3, E2M1)");
}

}  // namespace detail

// ---- tensor quantize, info, encode / decode -------------------------------------------

/// Quantizes a C-order tensor: exact = OCP MXFP; mase = MASE's mxfp_quantizer.
inline void quantize(const MXFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::mase_mxfp_quantize(s, in, out, shape);
  detail::require_exact_mxfp(s);
  detail::mx_exact_quantize(s.name, s.element(), s.scale_exp_bits, s.block_size, s.block_dim, s.quantile_search, p, in,
                            out, shape);
}

inline FormatInfo info(const MXFPSpec& s, const Policy& p) {
  s.validate();
  FormatInfo f;
  const MXElement e = s.element();
  const int E = s.exponent_width, M = s.frac_width;
  f.bits_per_value = e.width + static_cast<double>(s.scale_exp_bits) / s.block_size;
  if (p.is_mase()) {
    // MASE's finite codec: every code is a number; reachable magnitudes run from 2^-bias
    // (smallest subnormal it produces) to (2 - 2^-M) * 2^emax; scale exponent in [-127, 127].
    const int bias = detail::mase_mx_bias(E), emax = detail::mase_mx_emax(E);
    f.distinct_values = detail::pow2(e.width) - 1;
    f.min_positive = detail::pow2(-bias - 127);
    f.max = (2.0 - detail::pow2(-M)) * detail::pow2(emax + 127);
    f.value_set = detail::concat("MASE finite E", E, "M", M, " (max ", (2.0 - detail::pow2(-M)) * detail::pow2(emax),
                                 ") * 2^X, X = floor(log2 amax) - ", emax, " in [-127, 128], ", s.block_size,
                                 " flattened elements");
  } else {
    detail::require_exact_mxfp(s);
    f.distinct_values = e.distinct_values();
    f.min_positive = detail::scale2(e.min_positive(), -127);
    f.max = detail::scale2(e.max(), 127);
    f.value_set =
        detail::concat("OCP ", e.name(), " (max ", e.max(), e.is_e4m3() ? ", NaN S.1111.111" : "",
                       e.is_e5m2() ? ", Inf/NaN" : "", ") * 2^X, X = floor(log2 amax) - ", e.emax(),
                       " in [-127, 127] (E8M0, 0xFF = NaN) shared by ", s.block_size, " elements along block_dim");
  }
  return f;
}

/// Encodes one block under OCP semantics (see the mxint overload).
inline MXBlockCodes encode_block(const MXFPSpec& s, std::span<const float> x, const Policy& p = exact,
                                 std::uint64_t first_index = 0) {
  s.validate();
  detail::require_exact_mxfp(s);
  return detail::mx_encode_block(s.name, s.element(), s.scale_exp_bits, s.block_size, s.quantile_search, x, p,
                                 first_index);
}

inline std::vector<float> decode_block(const MXFPSpec& s, const MXBlockCodes& c) {
  std::vector<float> out(c.elements.size());
  detail::mx_decode_block(s.element(), s.scale_exp_bits, c.scale, c.elements, out);
  return out;
}

}  // namespace qnum
