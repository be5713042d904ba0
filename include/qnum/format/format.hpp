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
#include "qnum/format/binary.hpp"
#include "qnum/format/block_fp.hpp"
#include "qnum/format/block_log.hpp"
#include "qnum/format/block_minifloat.hpp"
#include "qnum/format/fixed.hpp"
#include "qnum/format/log.hpp"
#include "qnum/format/minifloat.hpp"
#include "qnum/format/minifloat_denorm.hpp"
#include "qnum/format/mx.hpp"
#include "qnum/format/mxint_hardware.hpp"
#include "qnum/format/scale_integer.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/ternary.hpp"

namespace qnum {

/// Every family's spec.
using AnySpec = std::variant<FixedSpec, MinifloatDenormSpec, MinifloatSpec, LogSpec, BlockFPSpec, BlockMinifloatSpec,
                             BlockLogSpec, BinarySpec, ResidualSignSpec, BinarizeSpec, TernarySpec, ScaleIntegerSpec,
                             MXIntSpec, MXFPSpec, MXIntHardwareSpec>;

/// A named preset: a name that stands for a fixed spec (e.g. fp8_e4m3, mxint8).
struct FormatPreset {
  std::string_view name;
  AnySpec spec;
  std::string_view help;
};

inline const std::vector<FormatPreset>& format_presets() {
  static const std::vector<FormatPreset> presets{
      {"fp8_e4m3", MinifloatSpec::fp8_e4m3(), "OCP FP8 E4M3: max 448, NaN at S.1111.111, no Inf"},
      {"fp8_e5m2", MinifloatSpec::fp8_e5m2(), "OCP FP8 E5M2: max 57344, IEEE Inf and NaN"},
      {"mxint8", MXIntSpec{8, 32, -1, 8, false}, "OCP MXINT8: 32 int8 elements (2^-6 units), E8M0 scale"},
      {"mxfp8_e4m3", MXFPSpec{4, 3, 32, -1, 8, false}, "OCP MXFP8 E4M3, block 32"},
      {"mxfp8_e5m2", MXFPSpec{5, 2, 32, -1, 8, false}, "OCP MXFP8 E5M2, block 32"},
      {"mxfp6_e3m2", MXFPSpec{3, 2, 32, -1, 8, false}, "OCP MXFP6 E3M2, block 32"},
      {"mxfp6_e2m3", MXFPSpec{2, 3, 32, -1, 8, false}, "OCP MXFP6 E2M3, block 32"},
      {"mxfp4_e2m1", MXFPSpec{2, 1, 32, -1, 8, false}, "OCP MXFP4 E2M1, block 32"},
  };
  return presets;
}

/// One family for `qnum formats`.
struct FamilyDoc {
  std::string_view name;
  std::vector<KeyDoc> keys;
  std::string_view help;
};

inline std::vector<KeyDoc> policy_key_docs() {
  return {{"mode", "exact", "semantics: exact or mase_compat (the CLI's --mode)"},
          {"rounding", "nearest_even", "nearest_even, nearest_away, toward_zero, floor, ceil, stochastic"},
          {"overflow", "saturate", "saturate, wrap (fixed point), infinity (formats with Inf)"},
          {"subnormals", "keep", "keep or flush results below the smallest normal"},
          {"ste", "identity", "straight-through gradient: identity or clipped"},
          {"seed", "0", "stochastic rounding seed"}};
}

inline std::vector<FamilyDoc> format_families() {
  return {
      {"integer", FixedSpec::key_docs(), "fixed point k*2^-F (alias fixed; integer_floor = rounding=floor)"},
      {"minifloat_denorm", MinifloatDenormSpec::key_docs(), "minifloat without implicit bit"},
      {"minifloat_ieee", MinifloatSpec::key_docs(), "IEEE-like minifloat with subnormals (presets fp8_e4m3, fp8_e5m2)"},
      {"log", LogSpec::key_docs(), "sign + power of two"},
      {"block_fp", BlockFPSpec::key_docs(), "shared exponent per block, sign-magnitude mantissas"},
      {"block_minifloat", BlockMinifloatSpec::key_docs(), "minifloat elements, shared bias per block"},
      {"block_log", BlockLogSpec::key_docs(), "log elements, shared bias per block"},
      {"binary", BinarySpec::key_docs(), "{-1,+1} or {0,alpha}"},
      {"residual_sign", ResidualSignSpec::key_docs(), "multi-level residual binarization, stacked [L, ...]"},
      {"binarize", BinarizeSpec::key_docs(), "sign(clamp(x,-1,1)) in {-1,0,+1}"},
      {"ternary", TernarySpec::key_docs(), "{-1,0,+1} or {-alpha,0,+alpha} per channel"},
      {"scale_integer", ScaleIntegerSpec::key_docs(), "integer with per-row dynamic scale"},
      {"mxint", MXIntSpec::key_docs(), "MX integer: shared E8M0 scale per block (preset mxint8)"},
      {"mxfp", MXFPSpec::key_docs(), "MX float: shared E8M0 scale per block (presets mxfp8/6/4_*)"},
      {"mxint_hardware", MXIntHardwareSpec::key_docs(), "MASE's hardware MX integer (mase mode only)"},
  };
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

    std::vector<KeyDoc> allowed;
    auto load = [&]<class S>(std::type_identity<S>) {
      f.spec = S::from_keys(kv);
      allowed = S::key_docs();
    };
    if (name == "integer" || name == "fixed" || name == "integer_floor") {
      bool floor_key = false;
      f.spec = FixedSpec::from_keys(kv, &floor_key);
      allowed = FixedSpec::key_docs();
      if (floor_key || name == "integer_floor") f.policy.rounding = Rounding::floor;
    } else if (name == "minifloat_denorm")
      load(std::type_identity<MinifloatDenormSpec>{});
    else if (name == "minifloat_ieee" || name == "minifloat")
      load(std::type_identity<MinifloatSpec>{});
    else if (name == "log")
      load(std::type_identity<LogSpec>{});
    else if (name == "block_fp")
      load(std::type_identity<BlockFPSpec>{});
    else if (name == "block_minifloat")
      load(std::type_identity<BlockMinifloatSpec>{});
    else if (name == "block_log")
      load(std::type_identity<BlockLogSpec>{});
    else if (name == "binary")
      load(std::type_identity<BinarySpec>{});
    else if (name == "residual_sign")
      load(std::type_identity<ResidualSignSpec>{});
    else if (name == "binarize")
      load(std::type_identity<BinarizeSpec>{});
    else if (name == "ternary")
      load(std::type_identity<TernarySpec>{});
    else if (name == "scale_integer")
      load(std::type_identity<ScaleIntegerSpec>{});
    else if (name == "mxint")
      load(std::type_identity<MXIntSpec>{});
    else if (name == "mxfp")
      load(std::type_identity<MXFPSpec>{});
    else if (name == "mxint_hardware")
      load(std::type_identity<MXIntHardwareSpec>{});
    else {
      bool found = false;
      for (const auto& preset : format_presets())
        if (preset.name == name) {
          f.spec = preset.spec;
          found = true;
        }
      if (!found) {
        std::string names;
        for (const auto& fam : format_families()) names += (names.empty() ? "" : ", ") + std::string(fam.name);
        for (const auto& preset : format_presets()) names += ", " + std::string(preset.name);
        detail::fail("unknown format '", name, "' (known: ", names, ", integer_floor, fixed)");
      }
    }
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
  void validate() const {
    std::visit(
        [&](const auto& s) {
          if constexpr (requires { s.validate(policy); })
            s.validate(policy);  // mode-dependent limits
          else
            s.validate();
        },
        spec);
    const auto fam = family();
    const bool is_fixed = std::holds_alternative<FixedSpec>(spec);
    if (policy.overflow == Overflow::wrap)
      detail::require(is_fixed, fam, ": overflow=wrap is only defined for fixed point (integer)");
    if (policy.overflow == Overflow::infinity) {
      const auto* m = std::get_if<MinifloatSpec>(&spec);
      detail::require(m && m->specials == Specials::ieee, fam,
                      ": overflow=infinity needs a format with an Inf code (minifloat_ieee with specials=ieee)");
    }
    if (policy.is_mase()) {
      detail::require(policy.rounding == Rounding::nearest_even || (is_fixed && policy.rounding == Rounding::floor),
                      fam, ": mase_compat rounds to nearest even (integer also floor); rounding=",
                      qnum::to_string(policy.rounding), " is exact-mode only");
      detail::require(policy.overflow == Overflow::saturate, fam,
                      ": mase_compat saturates; overflow=", qnum::to_string(policy.overflow), " is exact-mode only");
      if (const auto* m = std::get_if<MinifloatSpec>(&spec))
        detail::require(m->specials == Specials::none, fam,
                        ": MASE's minifloat_ieee has no special values; specials=", qnum::to_string(m->specials),
                        " is exact-mode only");
    } else {
      detail::require(!std::holds_alternative<MXIntHardwareSpec>(spec), fam,
                      ": mxint_hardware is MASE's format and exists only in mase_compat mode (--mode mase)");
    }
  }

  FormatInfo info() const {
    return std::visit([&](const auto& s) { return qnum::info(s, policy); }, spec);
  }
  double bits_per_value() const { return info().bits_per_value; }

  /// Shape of quantize's output for an input of `shape` (differs only for residual_sign).
  Shape output_shape(const Shape& shape) const {
    if (const auto* r = std::get_if<ResidualSignSpec>(&spec)) return qnum::output_shape(*r, policy, shape);
    return shape;
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
