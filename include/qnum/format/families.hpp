// The one list of format families. A family is a Spec type in its own header that carries
// its name, help, aliases, key docs, presets, MASE defaults and grouping; everything that
// enumerates families derives from `AnySpec` below: Format::parse, format_families(),
// format_presets() and the grouping the layers above ask for (Format::elementwise()).
// Adding a family: docs/architecture.md, "How to add a format".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "qnum/core/policy.hpp"
#include "qnum/format/binarize.hpp"
#include "qnum/format/binary.hpp"
#include "qnum/format/block_fp.hpp"
#include "qnum/format/block_log.hpp"
#include "qnum/format/block_minifloat.hpp"
#include "qnum/format/family_traits.hpp"
#include "qnum/format/fixed.hpp"
#include "qnum/format/log.hpp"
#include "qnum/format/minifloat.hpp"
#include "qnum/format/minifloat_denorm.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"
#include "qnum/format/mxint_hardware.hpp"
#include "qnum/format/nvfp4.hpp"
#include "qnum/format/residual_sign.hpp"
#include "qnum/format/scale_integer.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/ternary.hpp"

namespace qnum {

/// Every family's spec, in the order `qnum formats` lists them.
using AnySpec = std::variant<FixedSpec, MinifloatDenormSpec, MinifloatSpec, LogSpec, BlockFPSpec, BlockMinifloatSpec,
                             BlockLogSpec, BinarySpec, ResidualSignSpec, BinarizeSpec, TernarySpec, ScaleIntegerSpec,
                             MXIntSpec, MXFPSpec, MXIntHardwareSpec, NVFP4Spec>;

/// Calls f(std::type_identity<S>{}) for every family S, in list order.
template <class F>
constexpr void for_each_family(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<std::variant_alternative_t<I, AnySpec>>{}), ...);
  }
  (std::make_index_sequence<std::variant_size_v<AnySpec>>{});
}

/// A named preset: a name that stands for a fixed spec (e.g. fp8_e4m3, mxint8).
struct FormatPreset {
  std::string_view name;
  AnySpec spec;
  std::string_view help;
};

/// Every family's presets, in list order.
inline const std::vector<FormatPreset>& format_presets() {
  static const std::vector<FormatPreset> presets = [] {
    std::vector<FormatPreset> out;
    for_each_family([&]<class S>(std::type_identity<S>) {
      if constexpr (requires { S::presets(); })
        for (const auto& p : S::presets()) out.push_back({p.name, p.spec, p.help});
    });
    return out;
  }();
  return presets;
}

/// One family for `qnum formats`.
struct FamilyDoc {
  std::string_view name;
  std::vector<KeyDoc> keys;
  std::string_view help;
};

namespace detail {

/// S's key docs, each key whose MASE default differs from qnum's saying so.
template <class S>
std::vector<KeyDoc> family_key_docs() {
  auto keys = S::key_docs();
  for (auto& k : keys)
    for (const auto& d : S::mase_defaults)
      if (d.key == k.key && d.value != k.default_value) k.help += " (--mode mase: " + std::string(d.value) + ")";
  return keys;
}

template <class S>
bool family_called(std::string_view name) {
  if (name == S::name) return true;
  if constexpr (requires { S::aliases; })
    for (auto alias : S::aliases)
      if (name == alias) return true;
  return false;
}

}  // namespace detail

inline std::vector<FamilyDoc> format_families() {
  std::vector<FamilyDoc> out;
  for_each_family([&]<class S>(std::type_identity<S>) {
    out.push_back({S::name, detail::family_key_docs<S>(), S::help});
  });
  return out;
}

/// Builds the spec of the family called `name` (or one of its aliases) from `kv`, which must
/// hold its keys: a preset's name gives the preset's spec. In mase mode the keys left out take
/// MASE's defaults. A family may adjust the policy (integer_floor: floor rounding). Returns the
/// family's keys, for the unknown-key message. Unknown names throw, listing the known ones.
inline std::vector<KeyDoc> spec_from_keys(std::string_view name, KeyValues& kv, Policy& policy, AnySpec& spec) {
  std::vector<KeyDoc> allowed;
  bool found = false;
  for_each_family([&]<class S>(std::type_identity<S>) {
    if (found || !detail::family_called<S>(name)) return;
    found = true;
    if (policy.is_mase()) kv.use_defaults(S::mase_defaults);
    if constexpr (requires { S::from_keys(kv, name, policy); })
      spec = S::from_keys(kv, name, policy);
    else
      spec = S::from_keys(kv);
    allowed = S::key_docs();
  });
  for (const auto& preset : format_presets())
    if (!found && preset.name == name) {
      spec = preset.spec;
      found = true;
    }
  if (!found) {
    std::string names;
    for_each_family(
        [&]<class S>(std::type_identity<S>) { names += (names.empty() ? "" : ", ") + std::string(S::name); });
    for (const auto& preset : format_presets()) names += ", " + std::string(preset.name);
    for_each_family([&]<class S>(std::type_identity<S>) {
      if constexpr (requires { S::aliases; })
        for (auto alias : S::aliases) names += ", " + std::string(alias);
    });
    detail::fail("unknown format '", name, "' (known: ", names, ")");
  }
  return allowed;
}

/// Which inputs each output element of `spec` depends on.
inline Grouping grouping(const AnySpec& spec) {
  return std::visit([](const auto& s) { return s.grouping(); }, spec);
}

}  // namespace qnum
