// `binary`: {-1,+1} bipolar, or {0, alpha} scaled per output channel (MASE's binary_quantizer).
//
// Sections: spec, binary quantize (elementwise and tensor, optional explicit uniforms),
// encode/decode, info, value type Binary and numeric_limits.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/lane_sum.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/core/round.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/channel_reduce.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_quantize.hpp"

namespace qnum {

struct BinarySpec {
  static constexpr std::string_view name = "binary";
  static constexpr std::string_view help = "{-1,+1} or {0,alpha}";
  /// MASE's quantizer signature defaults (spec/formats.md; --mode mase takes them).
  static constexpr std::array<KeyDefault, 2> mase_defaults{{{"stochastic", "false"}, {"bipolar", "false"}}};
  bool stochastic = false;
  bool bipolar = true;

  friend bool operator==(const BinarySpec&, const BinarySpec&) = default;
  constexpr Grouping grouping() const {
    return !bipolar ? Grouping::per_channel : stochastic ? Grouping::indexed : Grouping::elementwise;
  }
  void validate() const {}

  static std::vector<KeyDoc> key_docs() {
    return {{"stochastic", "false", "stochastic binarization with p = hard_sigmoid(x)"},
            {"bipolar", "true", "{-1,+1} (true) or {0, alpha} scaled (false)"},
            {"width", "1", "informational; must be 1"}};
  }
  static BinarySpec from_keys(KeyValues& kv) {
    BinarySpec s;
    s.stochastic = kv.take_bool({"stochastic"}, false);
    s.bipolar = kv.take_bool({"bipolar"}, true);
    const int w = kv.take_int({"width"}, 1);
    detail::require(w == 1, name, ": width ", w, " must be 1");
    return s;
  }
  void write_keys(KeyWriter& w) const { w.add("stochastic", stochastic).add("bipolar", bipolar); }
};

// ---- binary ------------------------------------------------------------------------------

// The per-element and per-group definitions (QNUM_HD: the CPU reference below and the CUDA
// kernels in cuda/src/quantize/binary.cu both call them).
namespace detail {

/// One bipolar element. Deterministic: +1 for x >= 0 (-0 and +0 included), -1 below; NaN:
/// exact keeps NaN, MASE gives -1 (torch.where(x >= 0, 1, -1)). Stochastic with draw u: MASE
/// +1 where hard_sigmoid(x) >= u (NaN -> -1); exact +1 where u < clamp((x+1)/2, 0, 1) in
/// double, NaN stays NaN. `u` is unused when deterministic.
QNUM_HD inline float binary_bipolar_element(bool stochastic, bool mase, float x, float u) {
  if (!stochastic) {
    if (x != x) return mase ? -1.0f : x;
    return x >= 0.0f ? 1.0f : -1.0f;
  }
  if (mase) return mase_hard_sigmoid(x) >= u ? 1.0f : -1.0f;
  if (x != x) return x;
  const double prob = std::clamp((static_cast<double>(x) + 1.0) / 2.0, 0.0, 1.0);
  return static_cast<double>(u) < prob ? 1.0f : -1.0f;
}

/// exact scaled binary, one element of a channel with scale alpha: alpha where x > 0 (or,
/// stochastic, where u < clamp((x+1)/2, 0, 1)), else 0; NaN in x or alpha gives NaN.
QNUM_HD inline float binary_scaled_element_exact(bool stochastic, float x, float alpha, float u) {
  bool on = x > 0.0f;
  if (stochastic) on = static_cast<double>(u) < std::clamp((static_cast<double>(x) + 1.0) / 2.0, 0.0, 1.0);
  return alpha != alpha || x != x ? kNaN : (on ? alpha : 0.0f);
}

/// exact scaled binary's channel scale: float(mean |x|) over the channel's n elements.
QNUM_HD inline float binary_alpha_exact(const float* x, std::int64_t n) {
  return static_cast<float>(mean_abs_double(x, n));
}

/// What MASE's BinaryZeroScaled op sees: x, or hard_sigmoid(x) in the stochastic mode (MASE
/// feeds the hard sigmoid to the zero-scaled op, which ignores the uniforms).
QNUM_HD inline float binary_zero_scaled_input_mase(bool stochastic, float x) {
  return stochastic ? mase_hard_sigmoid(x) : x;
}

/// MASE's alpha_i = mean|v_i| of one sample of n (torch-order float32 sum, then / n in float32).
QNUM_HD inline float binary_alpha_mase(bool stochastic, const float* x, std::int64_t n) {
  const auto abs_v = [=](std::int64_t j) { return std::fabs(binary_zero_scaled_input_mase(stochastic, x[j])); };
  return torch_sum_f32_of(abs_v, n) / static_cast<float>(n);
}

/// MASE's [v > 0] * alpha_i (so NaN/inf in a sample make 0 * alpha NaN there).
QNUM_HD inline float binary_zero_scaled_element_mase(bool stochastic, float x, float alpha) {
  return (binary_zero_scaled_input_mase(stochastic, x) > 0.0f ? 1.0f : 0.0f) * alpha;
}

}  // namespace detail

/// Deterministic bipolar binarization of one element: +1 for x >= 0 (-0 and +0 included),
/// -1 below. NaN: exact keeps NaN, MASE gives -1 (torch.where(x >= 0, 1, -1)).
inline float binarize_bipolar(float x, const Policy& p = exact) {
  return detail::binary_bipolar_element(false, p.is_mase(), x, 0.0f);
}

/// Elementwise quantize for bipolar binary (deterministic, or stochastic with the counter
/// draw for `index`). Scaled (bipolar=false) needs the whole tensor: use the tensor quantize.
inline float quantize(const BinarySpec& s, const Policy& p, float x, std::uint64_t index = 0) {
  detail::require(s.bipolar, s.name, ": bipolar=false scales by a per-channel mean; quantize the whole tensor");
  const float u = s.stochastic ? CounterRng(p.seed).uniform(index) : 0.0f;
  return detail::binary_bipolar_element(s.stochastic, p.is_mase(), x, u);
}

namespace detail {

/// MASE's BinaryZeroScaled on a 4-D tensor: per sample alpha_i, then each element (a sample
/// is read fully before it is written: in place stays correct).
inline void binary_zero_scaled_mase(bool stochastic, std::span<const float> in, std::span<float> out,
                                    const Shape& shape) {
  const std::int64_t count = shape[0];
  if (count == 0) return;
  const std::int64_t n = numel(shape) / count;
  for (std::int64_t g = 0; g < count; ++g) {
    const float* x = in.data() + g * n;
    const float alpha = binary_alpha_mase(stochastic, x, n);
    for (std::int64_t j = 0; j < n; ++j)
      out[static_cast<std::size_t>(g * n + j)] = binary_zero_scaled_element_mase(stochastic, x[j], alpha);
  }
}

inline void binary_quantize_impl(const BinarySpec& s, const Policy& p, std::span<const float> in,
                                 std::span<const float> u, std::span<float> out, const Shape& shape) {
  check_tensor_io(s.name, in, out, shape);
  const bool explicit_u = !u.empty();
  if (explicit_u)
    require(u.size() == in.size(), s.name, ": uniforms have ", u.size(), " elements, input has ", in.size());
  const CounterRng rng(p.seed);
  // mase: without explicit draws, replay torch.manual_seed(seed); torch.rand_like(x).
  const std::vector<float> torch_u = p.is_mase() && s.stochastic && s.bipolar && !explicit_u
                                         ? torch_cpu_rand(p.seed, in.size())
                                         : std::vector<float>{};
  auto draw = [&](std::size_t i) {
    if (explicit_u) return u[i];
    if (!torch_u.empty()) return torch_u[i];
    return rng.uniform(static_cast<std::uint64_t>(i));
  };

  if (s.bipolar) {
    for (std::size_t i = 0; i < in.size(); ++i)
      out[i] = binary_bipolar_element(s.stochastic, p.is_mase(), in[i], s.stochastic ? draw(i) : 0.0f);
    return;
  }

  if (p.is_mase()) {
    require_mase_4d(s.name, "binary_quantizer(bipolar=False) (MASE issue 261)", shape);
    return binary_zero_scaled_mase(s.stochastic, in, out, shape);
  }

  // exact: alpha per output channel (any rank); stochastic draws [u < p] with p = hard sigmoid.
  const auto groups = channel_groups(shape);
  for (std::int64_t g = 0; g < groups.count; ++g) {
    const auto off = static_cast<std::size_t>(g * groups.size);
    const float alpha = binary_alpha_exact(in.data() + off, groups.size);
    for (std::size_t j = off; j < off + static_cast<std::size_t>(groups.size); ++j)
      out[j] = binary_scaled_element_exact(s.stochastic, in[j], alpha, s.stochastic ? draw(j) : 0.0f);
  }
}

}  // namespace detail

/// Quantizes a C-order tensor. mase stochastic bipolar replays torch's CPU rand_like stream
/// for torch.manual_seed(policy.seed) (torch_cpu_rand). Exact stochastic modes draw
/// CounterRng(policy.seed).uniform(flat index), so results are seeded and independent of threading.
inline void quantize(const BinarySpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  detail::binary_quantize_impl(s, p, in, {}, out, shape);
}

/// As above with explicit uniforms u in [0, 1), one per element (e.g. the torch.rand_like
/// draws saved with a MASE reference case). Ignored where the mode is not stochastic.
inline void quantize(const BinarySpec& s, const Policy& p, std::span<const float> in, std::span<const float> u,
                     std::span<float> out, const Shape& shape) {
  detail::require(!u.empty() || in.empty(), s.name, ": explicit uniforms must not be empty");
  detail::binary_quantize_impl(s, p, in, u, out, shape);
}

/// The per-channel scales alpha of scaled binary (bipolar=false), one per group (index of
/// dim 0; one for rank <= 1 in exact mode): what decode needs to reproduce quantize's output.
inline std::vector<float> binary_alphas(const BinarySpec& s, const Policy& p, std::span<const float> in,
                                        const Shape& shape) {
  detail::require(!s.bipolar, s.name, ": bipolar binary has no scale");
  detail::require(static_cast<std::int64_t>(in.size()) == numel(shape), s.name, ": input has ", in.size(),
                  " elements but shape ", to_string(shape), " needs ", numel(shape));
  if (p.is_mase()) detail::require_mase_4d(s.name, "binary_quantizer(bipolar=False) (MASE issue 261)", shape);
  const auto groups = p.is_mase() ? detail::Groups{shape[0], numel(shape) / std::max<std::int64_t>(shape[0], 1)}
                                  : detail::channel_groups(shape);
  std::vector<float> alphas;
  for (std::int64_t g = 0; g < groups.count; ++g) {
    const auto grp = std::span<const float>(in).subspan(static_cast<std::size_t>(g * groups.size),
                                                        static_cast<std::size_t>(groups.size));
    if (p.is_mase()) {  // MASE's stochastic path scales by the mean hard sigmoid
      std::vector<float> a(grp.size());
      for (std::size_t j = 0; j < grp.size(); ++j)
        a[j] = s.stochastic ? detail::mase_hard_sigmoid(grp[j]) : std::fabs(grp[j]);
      alphas.push_back(detail::torch_sum_f32(a.data(), static_cast<std::int64_t>(a.size())) /
                       static_cast<float>(grp.size()));
    } else {
      alphas.push_back(static_cast<float>(detail::mean_abs_double(grp)));
    }
  }
  return alphas;
}

// ---- encode / decode ----------------------------------------------------------------------

/// 1-bit code of a deterministically binarized element: 1 = upper value (+1, or alpha when
/// scaled: x > 0), 0 = lower value (-1, or 0). NaN has no code: throws.
inline std::uint32_t encode(const BinarySpec& s, float x) {
  detail::require(x == x, s.name, ": NaN has no binary code");
  return s.bipolar ? (x >= 0.0f ? 1u : 0u) : (x > 0.0f ? 1u : 0u);
}

/// The value of a 1-bit code; `alpha` is the channel scale for bipolar=false.
inline float decode(const BinarySpec& s, std::uint32_t code, float alpha = 1.0f) {
  if (s.bipolar) return (code & 1u) ? 1.0f : -1.0f;
  return (code & 1u) ? alpha : 0.0f;
}

/// Bits per code.
inline int code_bits(const BinarySpec&) { return 1; }

inline FormatInfo info(const BinarySpec& s, const Policy& p) {
  FormatInfo f;
  f.bits_per_value = 1;
  f.min_positive = 1;
  f.max = 1;
  f.distinct_values = 2;
  if (s.bipolar)
    f.value_set = s.stochastic ? "{-1, +1}, +1 with probability clamp((x+1)/2, 0, 1)" : "{-1, +1} (x >= 0 -> +1)";
  else
    f.value_set = p.is_mase()
                      ? "{0, alpha_i}, alpha_i = mean|x| of sample i over dims 1..3 (4-D only); shown for alpha = 1"
                      : "{0, alpha_c}, alpha_c = mean|x| of output channel c (index of dim 0); shown for alpha = 1";
  return f;
}

// ---- value type ---------------------------------------------------------------------------

/// A 1-bit bipolar value in {-1, +1}: code 1 = +1, code 0 = -1. Converting from float uses
/// MASE's rule (x >= 0 -> +1); NaN throws. Products stay binary (XNOR).
class Binary {
 public:
  constexpr Binary() = default;
  Binary(float x) : code_(encode(BinarySpec{}, x)) {}  // NOLINT: implicit like a number
  static constexpr Binary from_code(std::uint32_t c) {
    Binary b;
    b.code_ = c & 1u;
    return b;
  }
  constexpr std::uint32_t code() const { return code_; }
  constexpr float value() const { return code_ ? 1.0f : -1.0f; }
  explicit constexpr operator float() const { return value(); }
  explicit constexpr operator double() const { return value(); }
  explicit constexpr operator int() const { return code_ ? 1 : -1; }

  friend constexpr Binary operator*(Binary a, Binary b) { return from_code(a.code_ == b.code_ ? 1u : 0u); }
  constexpr Binary operator-() const { return from_code(code_ ^ 1u); }
  friend constexpr bool operator==(Binary a, Binary b) { return a.code_ == b.code_; }
  friend constexpr auto operator<=>(Binary a, Binary b) { return a.code_ <=> b.code_; }

 private:
  std::uint32_t code_ = 1;
};

/// The code bit: Binary(+1) -> "0b1".
inline std::string to_binary(Binary v) { return "0b" + detail::bit_string(v.code(), 1); }

}  // namespace qnum

template <>
class std::numeric_limits<qnum::Binary> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;  // no zero
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr int digits = 1;
  static constexpr std::float_round_style round_style = std::round_indeterminate;  // sign, not nearest
  static constexpr qnum::Binary min() noexcept { return qnum::Binary::from_code(1); }
  static constexpr qnum::Binary max() noexcept { return qnum::Binary::from_code(1); }
  static constexpr qnum::Binary lowest() noexcept { return qnum::Binary::from_code(0); }
  /// There is no value above 1; by convention the gap to the other value's magnitude (none).
  static constexpr qnum::Binary epsilon() noexcept { return qnum::Binary::from_code(1); }
  static constexpr qnum::Binary round_error() noexcept { return qnum::Binary::from_code(1); }
  static constexpr qnum::Binary denorm_min() noexcept { return qnum::Binary::from_code(1); }
};
