// `mxint`: MX integer, k-bit two's-complement elements sharing one power-of-two scale per
// block_size elements along block_dim.
//
// exact (default) = OCP MX v1.0 (blocks never cross the other axes, last block padded; shared
//   exponent floor(log2 amax) - emax_elem from the bits, E8M0; NaN/Inf in a block -> NaN block).
// mase = MASE's mxint_quantizer bit for bit (flattened unpadded blocks, ceil scale,
//   torch.quantile clip search). Shared machinery: mx_block.hpp; packed storage: mx_packed.hpp.
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

/// MX integer: `width`-bit two's-complement elements (OCP: k * 2^-(width-2)) sharing a
/// `scale_bits` exponent per `block_size` elements along `block_dim`.
struct MXIntSpec {
  static constexpr std::string_view name = "mxint";
  static constexpr std::string_view help = "MX integer: shared E8M0 scale per block (preset mxint8)";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 3> mase_defaults{
      {{"block_dim", "-1"}, {"scale_bits", "8"}, {"quantile_search", "false"}}};
  static constexpr Grouping grouping() { return Grouping::blocked; }
  int width = 8;  // element bits k (MASE: element_bits)
  int block_size = 32;
  int block_dim = -1;
  int scale_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXIntSpec&, const MXIntSpec&) = default;

  void validate() const {
    detail::require(width >= 2 && width <= 16, name, ": width ", width, " must be in [2, 16]");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size, " must be in [1, 4096]");
    detail::require(scale_bits >= 1 && scale_bits <= 8, name, ": scale_bits ", scale_bits, " must be in [1, 8]");
  }
  constexpr MXElement element() const { return MXElement::integer(width); }

  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "element bits k incl. sign (MASE: element_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_bits", "8", "bits of the shared exponent (OCP: 8, E8M0)"},
            {"quantile_search", "false", "per-block clip search over quantiles of |x| (MASE)"}};
  }
  static std::vector<SpecPreset<MXIntSpec>> presets() {
    return {{"mxint8", MXIntSpec{8, 32, -1, 8, false}, "OCP MXINT8: 32 int8 elements (2^-6 units), E8M0 scale"}};
  }
  static MXIntSpec from_keys(KeyValues& kv) {
    MXIntSpec s;
    s.width = kv.take_int({"width", "element_bits"}, 8);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_bits = kv.take_int({"scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_bits != 8) w.add("scale_bits", scale_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

namespace detail {

/// MASE mxint's per-block constants (extract_mxint_components) for a clip value: the divisor
/// 2^ceil(log2 clip), the element range and the output scale 2^(clamped S - bias).
struct MaseMXIntParams {
  float p2, mul, lo, hi, outscale;
};

/// The same from the block's exponent sc = ceil(log2(max(clip, tiny))).
QNUM_HD inline MaseMXIntParams mase_mxint_params_at(const MXIntSpec& s, float sc) {
  const float mul = pow2f(s.width - 1);
  const int bias = mx_scale_bias(s.scale_bits);
  float S = sc + static_cast<float>(bias);
  const float smax = static_cast<float>((1 << s.scale_bits) - 1);
  if (S < 0.0f) S = 0.0f;
  if (S > smax) S = smax;
  return {mx_mase_exp2f(sc), mul, -mul, mul - 1.0f, mx_mase_exp2f(S - static_cast<float>(bias))};
}

QNUM_HD inline MaseMXIntParams mase_mxint_params(const MXIntSpec& s, float clip) {
  const float tiny = std::numeric_limits<float>::min();
  if (clip < tiny) clip = tiny;  // clamp(min=tiny); NaN stays NaN
  return mase_mxint_params_at(s, std::ceil(mx_mase_log2f(clip)));
}

/// One element of a MASE mxint block (compose(extract(x))) in float32.
QNUM_HD inline float mase_mxint_element(const MaseMXIntParams& q, float x) {
  const float y = x / q.p2;
  float m = std::nearbyint(y * q.mul);  // torch.round: half to even, keeps -0
  if (m < q.lo) m = q.lo;
  if (m > q.hi) m = q.hi;
  return m / q.mul * q.outscale;
}

/// MASE mxint's search term of one element: the float32 difference to the *unpermuted*
/// flattened block's element, squared in double (summed in element order).
QNUM_HD inline double mase_mxint_sq_err(float cand, float ref) {
  const double d = static_cast<double>(cand - ref);
  return d * d;
}

/// torch.argmin over the candidates' norms in order: NaN counts as the minimum, the first wins.
QNUM_HD inline bool mase_argmin_takes(bool have, float best, float err) {
  return !have || (!is_nan(best) && (is_nan(err) || err < best));
}

/// MASE mxint candidate for one block (extract_mxint_components + compose) given the clip value.
inline void mase_mxint_block(const MXIntSpec& s, float clip, std::span<const float> xs, float* out) {
  const MaseMXIntParams q = mase_mxint_params(s, clip);
  for (std::size_t i = 0; i < xs.size(); ++i) out[i] = mase_mxint_element(q, xs[i]);
}

inline void mase_mxint_quantize(const MXIntSpec& s, std::span<const float> in, std::span<float> out,
                                const Shape& shape) {
  const auto order = mase_mx_order(s.name, s.block_dim, s.block_size, shape);
  const auto B = static_cast<std::size_t>(s.block_size);
  std::vector<float> xs(B), absx(B), cand(B), best_vals(B);
  for (std::size_t b = 0; b * B < order.size(); ++b) {
    for (std::size_t j = 0; j < B; ++j) xs[j] = in[static_cast<std::size_t>(order[b * B + j])];
    auto clip_at = [&](float q) {
      for (std::size_t j = 0; j < B; ++j) absx[j] = std::fabs(xs[j]);
      return mx_torch_quantile(absx, q);
    };
    if (!s.quantile_search) {
      mase_mxint_block(s, clip_at(1.0f), xs, best_vals.data());
    } else {
      // torch.argmin over the L2 norms against the *unpermuted* flattened block (MASE compares
      // with tensor.flatten().reshape(-1, B)); NaN counts as the minimum, first index wins.
      float best = 0;
      bool have = false;
      for (double qd : mx_clip_quantiles) {
        mase_mxint_block(s, clip_at(static_cast<float>(qd)), xs, cand.data());
        double acc = 0;
        for (std::size_t j = 0; j < B; ++j) acc += mase_mxint_sq_err(cand[j], in[b * B + j]);
        const float err = std::sqrt(static_cast<float>(acc));
        if (mase_argmin_takes(have, best, err)) best = err, have = true, best_vals = cand;
      }
    }
    for (std::size_t j = 0; j < B; ++j) out[static_cast<std::size_t>(order[b * B + j])] = best_vals[j];
  }
}

}  // namespace detail

// ---- tensor quantize, info, encode / decode -------------------------------------------

/// Quantizes a C-order tensor: exact = OCP MXINT (blocks along block_dim, padded); mase =
/// MASE's mxint_quantizer (the role is not used by either).
inline void quantize(const MXIntSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  s.validate();
  if (p.is_mase()) return detail::mase_mxint_quantize(s, in, out, shape);
  detail::mx_exact_quantize(s.name, s.element(), s.scale_bits, s.block_size, s.block_dim, s.quantile_search, p, in, out,
                            shape);
}

inline FormatInfo info(const MXIntSpec& s, const Policy& p) {
  s.validate();
  FormatInfo f;
  const MXElement e = s.element();
  f.bits_per_value = s.width + static_cast<double>(s.scale_bits) / s.block_size;
  f.distinct_values = detail::pow2(s.width);
  const int bias = detail::mx_scale_bias(s.scale_bits);
  if (p.is_mase()) {
    // m * 2^(S - bias - (k-1)); with float32 inputs S - bias is in [max(-126, -bias), 127]
    // (ceil(log2 amax) = 128 makes the block NaN).
    const int lo = std::max(-126, -bias), hi = std::min(127, (1 << s.scale_bits) - 1 - bias);
    f.min_positive = detail::pow2(lo - (s.width - 1));
    f.max = detail::scale2(static_cast<double>(e.kmax()), hi - (s.width - 1));
    f.value_set =
        detail::concat("m * 2^(s - ", s.width - 1, "), m in [", e.kmin(), ", ", e.kmax(), "], s = ceil(log2 amax) in [",
                       lo, ", ", hi, "] shared by ", s.block_size, " flattened elements (MASE)");
  } else {
    f.min_positive = detail::scale2(e.min_positive(), -bias);
    f.max = detail::scale2(e.max(), bias);
    f.value_set = detail::concat("k * 2^(X - ", s.width - 2, "), k in [", e.kmin(), ", ", e.kmax(),
                                 "], X = floor(log2 amax) in [", -bias, ", ", bias, "] (", s.scale_bits,
                                 "-bit, all ones = NaN) shared by ", s.block_size, " elements along block_dim");
  }
  return f;
}

/// Encodes one block (at most block_size elements; a short block is the padded last one)
/// under OCP semantics: the scale code and each element's code. `first_index` keys stochastic
/// rounding (element i uses first_index + i). Always exact semantics.
inline MXBlockCodes encode_block(const MXIntSpec& s, std::span<const float> x, const Policy& p = exact,
                                 std::uint64_t first_index = 0) {
  s.validate();
  return detail::mx_encode_block(s.name, s.element(), s.scale_bits, s.block_size, s.quantile_search, x, p, first_index);
}

/// Values of an encoded block: decode(element) * 2^(scale - 127); scale 0xFF -> all NaN.
inline std::vector<float> decode_block(const MXIntSpec& s, const MXBlockCodes& c) {
  std::vector<float> out(c.elements.size());
  detail::mx_decode_block(s.element(), s.scale_bits, c.scale, c.elements, out);
  return out;
}

}  // namespace qnum
