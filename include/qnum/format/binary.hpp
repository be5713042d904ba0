// Binary formats: `binary` ({-1,+1} bipolar, or {0, alpha} scaled per output channel),
// `residual_sign` (multi-level residual binarization, Ghasemzadeh et al.; MASE's
// residual_sign_quantizer) and `binarize` (sign of clamp(x,-1,1) with hard-tanh STE).
//
// Sections: specs, torch-order float32 sums and channel helpers (shared with ternary.hpp),
// binary quantize (elementwise and tensor, optional explicit uniforms), encode/decode,
// residual_sign, binarize, info, value type Binary and numeric_limits.
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
#include "qnum/format/family_traits.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_io.hpp"

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

/// Residual sign: L levels with means mu_l; output stacked [L, ...input shape].
struct ResidualSignSpec {
  static constexpr std::string_view name = "residual_sign";
  static constexpr std::string_view help = "multi-level residual binarization, stacked [L, ...]";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::stacked; }
  int levels = 2;
  std::vector<double> means;  // empty: (L, L-1, ..., 1) / sum

  friend bool operator==(const ResidualSignSpec&, const ResidualSignSpec&) = default;

  std::vector<double> effective_means() const {
    if (!means.empty()) return means;
    std::vector<double> m;
    const double sum = levels * (levels + 1) / 2.0;
    for (int l = levels; l >= 1; --l) m.push_back(l / sum);
    return m;
  }
  void validate() const {
    detail::require(levels >= 1 && levels <= 8, name, ": levels ", levels, " must be in [1, 8]");
    detail::require(means.empty() || static_cast<int>(means.size()) == levels, name, ": means has ", means.size(),
                    " entries, levels is ", levels);
    for (double m : means) detail::require(std::isfinite(m), name, ": means entry ", m, " must be finite");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"levels", "2", "number of residual levels L"},
            {"means", "none", "per-level means (e.g. 0.7x0.3); none = (L..1)/sum"},
            {"x_quantizer", "none", "accepted for MASE compatibility; ignored by MASE"}};
  }
  static ResidualSignSpec from_keys(KeyValues& kv) {
    ResidualSignSpec s;
    s.levels = kv.take_int({"levels"}, 2);
    if (auto m = kv.take_double_list({"means"})) s.means = *m;
    if (auto xq = kv.take({"x_quantizer"}))
      detail::require(KeyValues::is_none(*xq), name, ": x_quantizer must be none (MASE ignores it)");
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("levels", levels);
    if (!means.empty()) w.add("means", means);
  }
};

/// binarize: sign(clamp(x, -1, 1)) in {-1, 0, +1}.
struct BinarizeSpec {
  static constexpr std::string_view name = "binarize";
  static constexpr std::string_view help = "sign(clamp(x,-1,1)) in {-1,0,+1}";
  static constexpr std::array<KeyDefault, 0> mase_defaults{};  // none beyond qnum's own
  static constexpr Grouping grouping() { return Grouping::elementwise; }
  friend bool operator==(const BinarizeSpec&, const BinarizeSpec&) = default;
  void validate() const {}
  static std::vector<KeyDoc> key_docs() { return {}; }
  static BinarizeSpec from_keys(KeyValues&) { return {}; }
  void write_keys(KeyWriter&) const {}
};

// ---- torch-order float32 sums and channel helpers ------------------------------------

namespace detail {

/// SIMD width (floats) torch's CPU reduction used for the MASE reference data (AVX2 = 8).
inline constexpr int kTorchSumLanes = 8;

/// torch's cascade_sum core (aten/src/ATen/native/cpu/SumKernel.cpp, multi_row_sum): 4 rows
/// of accumulators, partial sums promoted through 4 levels every 2^level_power loads.
template <class Acc, class Load>
[[gnu::always_inline]] QNUM_HD inline std::array<Acc, 4> torch_multi_row_sum(Load load, std::int64_t size,
                                                                             const Acc& zero) {
  constexpr int num_levels = 4;
  std::int64_t ceil_log2 = 1;
  if (size > 2) ceil_log2 = 64 - std::countl_zero(static_cast<std::uint64_t>(size - 1));
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2 / num_levels);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  Acc acc[num_levels][4];
  for (auto& level : acc)
    for (auto& a : level) a = zero;
  std::int64_t i = 0;
  while (i + level_step <= size) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < 4; ++k) acc[0][k] += load(i, k);
    for (int j = 1; j < num_levels; ++j) {
      for (int k = 0; k < 4; ++k) {
        acc[j][k] += acc[j - 1][k];
        acc[j - 1][k] = zero;
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i)
    for (int k = 0; k < 4; ++k) acc[0][k] += load(i, k);
  for (int j = 1; j < num_levels; ++j)
    for (int k = 0; k < 4; ++k) acc[0][k] += acc[j][k];
  return {acc[0][0], acc[0][1], acc[0][2], acc[0][3]};
}

/// torch's row_sum: the row viewed as (-1, 4), summed by torch_multi_row_sum, tail added to
/// the first partial, then the four partials folded.
template <class Acc, class Elem>
[[gnu::always_inline]] QNUM_HD inline Acc torch_row_sum(Elem elem, std::int64_t size, const Acc& zero) {
  const std::int64_t size_ilp = size / 4;
  auto partial = torch_multi_row_sum<Acc>([&](std::int64_t i, int k) { return elem(i * 4 + k); }, size_ilp, zero);
  for (std::int64_t i = size_ilp * 4; i < size; ++i) partial[0] += elem(i);
  for (int k = 1; k < 4; ++k) partial[0] += partial[k];
  return partial[0];
}

/// A float32 SIMD register of `n` lanes for emulating torch's vectorized accumulation.
struct FloatLanes {
  std::array<float, 16> v{};
  int n = 8;
  QNUM_HD FloatLanes& operator+=(const FloatLanes& o) {
    for (int l = 0; l < n; ++l) v[static_cast<std::size_t>(l)] += o.v[static_cast<std::size_t>(l)];
    return *this;
  }
};

/// Sum of elem(0..n-1) (float32 values, e.g. |x[k]| computed on the fly) in the order torch's
/// CPU `sum` uses for an inner (contiguous) reduction, so MASE's per-sample means come out bit
/// for bit: vectorized cascade over `lanes`-wide registers, scalar tail, then the lanes added
/// left to right. One thread runs it on the GPU too (cuda/src/binary_kernels.cu).
template <class Elem>
[[gnu::always_inline]] QNUM_HD inline float torch_sum_f32_of(Elem elem, std::int64_t n, int lanes = kTorchSumLanes) {
  if (n < lanes) return 0.0f + torch_row_sum<float>([&](std::int64_t i) { return elem(i); }, n, 0.0f);
  FloatLanes zero;
  zero.n = lanes;
  const std::int64_t vec_size = n / lanes;
  const FloatLanes acc = torch_row_sum<FloatLanes>(
      [&](std::int64_t i) {
        FloatLanes r = zero;
        for (int l = 0; l < lanes; ++l) r.v[static_cast<std::size_t>(l)] = elem(i * lanes + l);
        return r;
      },
      vec_size, zero);
  float total = 0.0f;
  for (std::int64_t k = vec_size * lanes; k < n; ++k) total += elem(k);
  for (int l = 0; l < lanes; ++l) total += acc.v[static_cast<std::size_t>(l)];
  return 0.0f + total;  // the output is zero-filled, then accumulated into
}

/// torch_sum_f32_of over a contiguous float32 run.
QNUM_HD inline float torch_sum_f32(const float* p, std::int64_t n, int lanes = kTorchSumLanes) {
  return torch_sum_f32_of([p](std::int64_t i) { return p[i]; }, n, lanes);
}

/// Per-output-channel grouping used by exact mode: rank >= 2 -> one group per index of dim 0;
/// rank 0 or 1 -> the whole tensor is one group.
struct Groups {
  std::int64_t count = 1, size = 0;
};
inline Groups channel_groups(const Shape& shape) {
  const std::int64_t n = numel(shape);
  if (shape.size() < 2 || shape[0] == 0) return {1, n};
  return {shape[0], n / shape[0]};
}

/// Mean |x| over a group of n: Σ|x| in double in lane_sum's order (8 interleaved lanes, which
/// the SIMD kernels reproduce), divided by the count; NaN propagates.
QNUM_HD inline double mean_abs_double(const float* g, std::int64_t n) {
  const double sum = lane_sum(n, [g](std::int64_t k) { return std::fabs(static_cast<double>(g[k])); });
  return n == 0 ? 0.0 : sum / static_cast<double>(n);
}
inline double mean_abs_double(std::span<const float> g) {
  return mean_abs_double(g.data(), static_cast<std::int64_t>(g.size()));
}

/// MASE's 4-D requirement (its reductions and expands name dims 1, 2, 3 explicitly).
inline void require_mase_4d(std::string_view family, std::string_view what, const Shape& shape) {
  require(shape.size() == 4, family, ": MASE's ", what,
          " works only on 4-D tensors (it reduces and expands over dims 1, 2, 3); got shape ", to_string(shape),
          " (rank ", shape.size(), "). Use exact mode (per output channel, any rank)");
}

/// MASE's hard sigmoid clamp((x + 1) / 2, 0, 1) in float32 (NaN propagates as torch.clamp does).
QNUM_HD inline float mase_hard_sigmoid(float x) {
  const float v = (x + 1.0f) / 2.0f;
  if (v != v) return v;
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

}  // namespace detail

// ---- binary ------------------------------------------------------------------------------

// The per-element and per-group definitions (QNUM_HD: the CPU reference below and the CUDA
// kernels in cuda/src/binary_kernels.cu both call them).
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

// ---- residual_sign ------------------------------------------------------------------------

namespace detail {

/// MASE's binarize (c = clamp(x,-1,1); c + (sign(c) - c)) in float32: sign(clamp(x)) with
/// NaN -> NaN and -0 -> +0 (the float32 sum is exactly sign(c) for every other input).
QNUM_HD inline float binarize_value(float x) {
  if (x != x) return x;
  return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
}

}  // namespace detail

namespace detail {

/// residual_sign's checks (spec, shapes, output size L·n, MASE's level limit); returns the
/// effective means.
inline std::vector<double> residual_sign_prepare(const ResidualSignSpec& s, const Policy& p, std::size_t in_size,
                                                 std::size_t out_size, const Shape& shape) {
  s.validate();
  for (auto d : shape) require(d >= 0, s.name, ": negative dimension in shape ", to_string(shape));
  require(static_cast<std::int64_t>(in_size) == numel(shape), s.name, ": input has ", in_size, " elements but shape ",
          to_string(shape), " needs ", numel(shape));
  const auto L = static_cast<std::size_t>(s.levels);
  require(out_size == in_size * L, s.name, ": output has ", out_size, " elements, needs ", in_size * L, " (levels ",
          s.levels, " x ", in_size, ")");
  if (p.is_mase())
    require(s.levels <= 3, s.name, ": MASE's residual_sign_quantizer handles levels 1..3 (it returns 0 for ", s.levels,
            "); use exact mode");
  return s.effective_means();
}

/// The L outputs of one element x, written to out[0], out[stride], ... (the definition).
/// exact: double residuals, o_l = sign(r) |mu_l| + 0 (no -0 levels), NaN stays NaN.
/// mase: float32, means |float(mu_l)|; L = 1: MASE's `0 + out` turns -0 into +0.
QNUM_HD inline void residual_sign_element(const double* means, std::size_t L, bool mase, float x, float* out,
                                          std::size_t stride) {
  if (mase) {
    float r = x;
    for (std::size_t l = 0; l < L; ++l) {
      const float o = binarize_value(r) * std::fabs(static_cast<float>(means[l]));
      r = r - o;
      out[l * stride] = L == 1 ? 0.0f + o : o;
    }
    return;
  }
  double r = x;
  for (std::size_t l = 0; l < L; ++l) {
    const double b = r != r ? r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0));
    const double o = b * std::fabs(means[l]) + 0.0;
    r -= o;
    out[l * stride] = static_cast<float>(o);
  }
}
inline void residual_sign_element(const std::vector<double>& means, bool mase, float x, float* out,
                                  std::size_t stride) {
  residual_sign_element(means.data(), means.size(), mase, x, out, stride);
}

}  // namespace detail

/// Residual binarization: r_0 = x, o_l = binarize(r_{l-1}) * |mu_l|, r_l = r_{l-1} - o_l;
/// `out` (output_shape elements) holds the o_l stacked [L, ...shape] (their sum is x-hat).
/// MASE mode: float32 arithmetic, float32 means, levels 1..3, L = 1 unstacked.
inline void quantize(const ResidualSignSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role = Role::weight) {
  const auto means = detail::residual_sign_prepare(s, p, in.size(), out.size(), shape);
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) detail::residual_sign_element(means, p.is_mase(), in[i], out.data() + i, n);
}

inline FormatInfo info(const ResidualSignSpec& s, const Policy&) {
  const auto means = s.effective_means();
  // x-hat = sum_l s_l |mu_l|, s_l in {-1, 0, +1} (0 only for an exactly zero residual)
  std::vector<double> sums{0.0};
  for (double m : means) {
    std::vector<double> next;
    for (double v : sums)
      for (double t : {-1.0, 0.0, 1.0}) next.push_back(v + t * std::fabs(m));
    sums.swap(next);
  }
  std::sort(sums.begin(), sums.end());
  sums.erase(std::unique(sums.begin(), sums.end()), sums.end());
  FormatInfo f;
  f.bits_per_value = s.levels;
  f.distinct_values = static_cast<double>(sums.size());
  for (double v : sums)
    if (v > 0 && (f.min_positive == 0 || v < f.min_positive)) f.min_positive = v;
  f.max = sums.back();
  std::string ms;
  for (double m : means) ms += (ms.empty() ? "" : ", ") + detail::format_double(m);
  f.value_set = detail::concat("levels o_l in {-|mu_l|, 0, +|mu_l|} stacked [", s.levels,
                               ", ...]; x-hat = sum o_l; mu = (", ms, ")");
  return f;
}

// ---- binarize -----------------------------------------------------------------------------

/// sign(clamp(x, -1, 1)) in {-1, 0, +1}; NaN stays NaN, -0 gives +0 (same in both modes).
QNUM_HD inline float quantize(const BinarizeSpec&, const Policy&, float x, std::uint64_t = 0) {
  return detail::binarize_value(x);
}

inline FormatInfo info(const BinarizeSpec&, const Policy&) {
  FormatInfo f;
  f.bits_per_value = 2;
  f.min_positive = 1;
  f.max = 1;
  f.distinct_values = 3;
  f.value_set = "{-1, 0, +1} = sign(clamp(x, -1, 1)); backward: hard-tanh STE (gradient 1 for |x| <= 1)";
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

namespace qnum {

/// residual_sign stacks its levels: [L, ...shape] (MASE returns the plain shape for L = 1).
inline Shape output_shape(const ResidualSignSpec& s, const Policy& p, const Shape& in) {
  if (p.is_mase() && s.levels == 1) return in;
  Shape out{s.levels};
  out.insert(out.end(), in.begin(), in.end());
  return out;
}

}  // namespace qnum
