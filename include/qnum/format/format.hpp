// The runtime Format: any family's spec plus a Policy, with the text form
// `name:key=value,...` (MASE's names and keys), parse/to_string round trip, facts about the
// value set, and tensor quantization. This is what configs, the CLI and search use.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/families.hpp"
#include "qnum/format/spec_text.hpp"

namespace qnum {

inline std::vector<KeyDoc> policy_key_docs() {
  return {{"mode", "exact", "semantics: exact or mase_compat (the CLI's --mode)"},
          {"rounding", "nearest_even", "nearest_even, nearest_away, toward_zero, floor, ceil, stochastic"},
          {"overflow", "saturate", "saturate, wrap (fixed point), infinity (formats with Inf)"},
          {"subnormals", "keep", "keep or flush results below the smallest normal"},
          {"ste", "identity", "straight-through gradient: identity or clipped"},
          {"seed", "0", "stochastic rounding seed"}};
}

/// A number format: a family's spec and the policy it is applied with.
class Format {
 public:
  AnySpec spec = FixedSpec{};
  Policy policy = exact;

  Format() = default;
  Format(AnySpec s, Policy p = exact) : spec(std::move(s)), policy(p) {}  // NOLINT

  friend bool operator==(const Format&, const Format&) = default;

  /// Parses `name:key=value,...`. `base` supplies the policy (e.g. the CLI's --mode);
  /// policy keys in the text override it. Validates; throws qnum::Error naming the problem.
  static Format parse(std::string_view text, Policy base = exact) {
    // Not a structured binding: clang < 16 cannot capture one in the lambda below.
    auto parsed = KeyValues::parse(text);
    const std::string& name = parsed.first;
    KeyValues& kv = parsed.second;
    if (kv.take({"skip_first_dim"}))
      detail::fail(name,
                   ": skip_first_dim is not a format key; pass the operand role instead "
                   "(--role activation means skip_first_dim=true)");
    Format f;
    f.policy = base;
    if (auto v = kv.take({"mode"})) f.policy.semantics = parse_semantics(*v);
    if (auto v = kv.take({"rounding"})) f.policy.rounding = parse_rounding(*v);
    if (auto v = kv.take({"overflow"})) f.policy.overflow = parse_overflow(*v);
    if (auto v = kv.take({"subnormals"})) f.policy.subnormals = parse_subnormals(*v);
    if (auto v = kv.take({"ste"})) f.policy.ste = parse_ste(*v);
    if (auto v = kv.take_opt_int({"seed"})) f.policy.seed = static_cast<std::uint64_t>(*v);

    const auto allowed = spec_from_keys(name, kv, f.policy, f.spec);
    kv.set_family(name);
    kv.finish(allowed);
    f.validate();
    return f;
  }

  /// Canonical text form; `parse(to_string())` gives back an equal Format.
  std::string to_string() const {
    std::string text;
    for (const auto& preset : format_presets())
      if (preset.spec == spec) text = std::string(preset.name);
    if (text.empty()) {
      KeyWriter w(family());
      std::visit([&](const auto& s) { s.write_keys(w); }, spec);
      text = w.str();
    }
    KeyWriter pw("");
    if (policy.semantics != exact.semantics) pw.add("mode", qnum::to_string(policy.semantics));
    if (policy.rounding != exact.rounding) pw.add("rounding", qnum::to_string(policy.rounding));
    if (policy.overflow != exact.overflow) pw.add("overflow", qnum::to_string(policy.overflow));
    if (policy.subnormals != exact.subnormals) pw.add("subnormals", qnum::to_string(policy.subnormals));
    if (policy.ste != exact.ste) pw.add("ste", qnum::to_string(policy.ste));
    if (policy.seed != exact.seed) pw.add("seed", std::to_string(policy.seed));
    if (!pw.str().empty()) text += (text.find(':') == std::string::npos ? ":" : ",") + pw.str().substr(1);
    return text;
  }

  std::string_view family() const {
    return std::visit([](const auto& s) -> std::string_view { return s.name; }, spec);
  }

  /// Rejects invalid parameters and policies the family cannot honour.
  /// The rules every family shares, each exception declared by the family's spec
  /// (format/family_traits.hpp): `overflow_wrap`, `has_inf_code()`, `mase_floor` and the
  /// family's own `check_policy` last.
  void validate() const {
    std::visit(
        [&]<class S>(const S& s) {
          if constexpr (requires { s.validate(policy); })
            s.validate(policy);  // mode-dependent limits
          else
            s.validate();
          const std::string_view fam = S::name;
          bool wraps = false, mase_floor = false;
          if constexpr (requires { S::overflow_wrap; }) wraps = S::overflow_wrap;
          if constexpr (requires { S::mase_floor; }) mase_floor = S::mase_floor;
          if (policy.overflow == Overflow::wrap)
            detail::require(wraps, fam, ": overflow=wrap is only defined for fixed point (integer)");
          if (policy.overflow == Overflow::infinity) {
            bool inf_code = false;
            if constexpr (requires { s.has_inf_code(); }) inf_code = s.has_inf_code();
            detail::require(inf_code, fam,
                            ": overflow=infinity needs a format with an Inf code (minifloat_ieee with specials=ieee)");
          }
          if (policy.is_mase()) {
            detail::require(
                policy.rounding == Rounding::nearest_even || (mase_floor && policy.rounding == Rounding::floor), fam,
                ": mase_compat rounds to nearest even (integer also floor); rounding=",
                qnum::to_string(policy.rounding), " is exact-mode only");
            detail::require(policy.overflow == Overflow::saturate, fam,
                            ": mase_compat saturates; overflow=", qnum::to_string(policy.overflow),
                            " is exact-mode only");
          }
          if constexpr (requires { s.check_policy(policy); }) s.check_policy(policy);
        },
        spec);
  }

  /// Which inputs each output element depends on (format/family_traits.hpp).
  Grouping grouping() const { return qnum::grouping(spec); }
  /// Whether each element is quantized on its own, so any slice of a tensor gets the same bits.
  bool elementwise() const { return grouping() == Grouping::elementwise; }
  /// Whether values beyond the format's range are clamped (scale_integer scales every row to
  /// its own maximum, so nothing is ever out of range).
  bool saturates() const {
    return std::visit(
        []<class S>(const S&) {
          if constexpr (requires { S::saturates; })
            return S::saturates;
          else
            return true;
        },
        spec);
  }

  FormatInfo info() const {
    return std::visit([&](const auto& s) { return qnum::info(s, policy); }, spec);
  }
  double bits_per_value() const { return info().bits_per_value; }

  /// Shape of quantize's output for an input of `shape` (differs only for residual_sign).
  Shape output_shape(const Shape& shape) const {
    return std::visit(
        [&](const auto& s) -> Shape {
          if constexpr (requires { qnum::output_shape(s, policy, shape); })
            return qnum::output_shape(s, policy, shape);
          else
            return shape;
        },
        spec);
  }

  /// Quantizes a C-order tensor of `shape`; `out` has output_shape(shape) elements.
  void quantize(std::span<const float> in, std::span<float> out, const Shape& shape, Role role = Role::weight) const {
    std::visit([&](const auto& s) { qnum::quantize(s, policy, in, out, shape, role); }, spec);
  }

  std::vector<float> quantize(std::span<const float> in, const Shape& shape, Role role = Role::weight) const {
    std::vector<float> out(static_cast<std::size_t>(numel(output_shape(shape))));
    quantize(in, out, shape, role);
    return out;
  }
};

}  // namespace qnum
