// MASE's per-op quantize configs (spec/system.md §3.1, spec/formats.md §0.5) turned into
// QuantConfigs: `{"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
// "weight_width": 8, ...}` gives data_in = integer:width=8,frac_width=4, and so on.
//
// Rules (MASE's, without its pitfalls):
// - `name` is the format family (MASE's names: integer, fixed, minifloat_denorm,
//   minifloat_ieee, log, block_fp, block_minifloat, block_log, binary, ternary, mxint, mxfp,
//   mxint_hardware, scale_integer, or a qnum preset such as fp8_e4m3 / mxint8). null, "none",
//   "None" and MASE's old "NA" mean "leave this op alone"; so does `bypass = true`.
// - Operand keys are `<operand>_<format key>` with operand data_in, weight, bias, data_out;
//   the format keys are the family's (Format::parse checks them and names the allowed ones).
//   An operand with no keys stays float32 — except that a format whose keys all have
//   defaults may be given whole: `weight = "fp8_e4m3"` (qnum's text form).
// - Keys for operands the op does not have are ignored, as MASE's per-op filter does (so one
//   `default` config serves linear and relu alike); keys that are neither operand keys nor
//   the shared ones (name, bypass, floor, mode, rounding, overflow, subnormals, ste, seed)
//   are errors naming the key.
// - A value of null / "none" / "NA" means "the family's default" for that key; lists are
//   written 1x16 as in the text form; `data_in_skip_first_dim = false` makes the input
//   blocked like a weight (MASE's LinearBlockFP option; default true).
// - `mode = "mase"` (or "mase_compat") selects MASE's bit-exact semantics for every operand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/format/format.hpp"
#include "qnum/nn/quant.hpp"

namespace qnum::passes {

/// Whether a MASE config `name` value means "do not quantize".
inline bool is_skip_name(const nlohmann::json& name) {
  if (name.is_null()) return true;
  if (!name.is_string()) return false;
  const auto s = name.get<std::string>();
  return s == "none" || s == "None" || s == "NA" || s.empty();
}

namespace detail {

/// A config value in the text form of Format::parse; nullopt for "use the default".
inline std::optional<std::string> value_text(const std::string& key, const nlohmann::json& v) {
  if (v.is_null()) return std::nullopt;
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return qnum::detail::format_double(v.get<double>());
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "NA" || s == "none" || s == "None") return std::nullopt;
    return s;
  }
  if (v.is_array()) {
    std::string out;
    for (const auto& e : v) {
      auto t = value_text(key, e);
      qnum::detail::require(t.has_value(), "quantize config: '", key, "' has a null list element");
      out += (out.empty() ? "" : "x") + *t;
    }
    qnum::detail::require(!out.empty(), "quantize config: '", key, "' is an empty list");
    return out;
  }
  qnum::detail::fail("quantize config: '", key, "' has a value of unsupported type: ", v.dump());
}

inline const std::vector<std::string>& operand_names() {
  static const std::vector<std::string> names{"data_in", "weight", "bias", "data_out"};
  return names;
}

inline const std::vector<std::string>& shared_keys() {
  static const std::vector<std::string> keys{"name",     "bypass",     "floor", "mode", "rounding",
                                             "overflow", "subnormals", "ste",   "seed"};
  return keys;
}

}  // namespace detail

/// The QuantConfig that MASE config `cfg` gives an op with `operands` (e.g. {"data_in",
/// "weight", "bias", "data_out"} for linear), or nullopt when the config says "leave it
/// alone". `where` names the config in error messages.
inline std::optional<nn::QuantConfig> resolve_quant_config(const nlohmann::json& cfg,
                                                           const std::vector<std::string>& operands,
                                                           const std::string& where) {
  qnum::detail::require(cfg.is_object(), where, ": a quantize config must be a table/object, got ", cfg.dump());
  qnum::detail::require(cfg.contains("name"), where, ": the config has no 'name' (the format; \"none\" to skip)");
  const auto& name_v = cfg.at("name");
  if (is_skip_name(name_v)) return std::nullopt;
  qnum::detail::require(name_v.is_string(), where, ": 'name' must be a string, got ", name_v.dump());
  if (cfg.contains("bypass")) {
    qnum::detail::require(cfg.at("bypass").is_boolean(), where, ": 'bypass' must be true or false");
    if (cfg.at("bypass").get<bool>()) return std::nullopt;
  }
  const std::string family = name_v.get<std::string>();

  // Keys shared by every operand (policy keys; integer's floor).
  std::string shared;
  for (const auto& [key, value] : cfg.items()) {
    if (key == "name" || key == "bypass") continue;
    bool is_shared = false;
    for (const auto& k : detail::shared_keys()) is_shared |= key == k;
    if (!is_shared) continue;
    std::string k = key;
    if (k == "mode" && value.is_string() && value.get<std::string>() == "mase") {
      shared += ",mode=mase_compat";
      continue;
    }
    if (auto t = detail::value_text(key, value)) shared += "," + k + "=" + *t;
  }

  nn::QuantConfig out;
  bool data_in_as_weight = false;
  for (const auto& operand : detail::operand_names()) {
    const bool has = std::find(operands.begin(), operands.end(), operand) != operands.end();
    std::string keys;
    std::optional<std::string> whole;  // `weight = "fp8_e4m3"`
    for (const auto& [key, value] : cfg.items()) {
      if (key == operand) {
        qnum::detail::require(value.is_string(), where, ": '", key, "' must be a format text such as \"fp8_e4m3\"");
        whole = value.get<std::string>();
        continue;
      }
      if (!key.starts_with(operand + "_")) continue;
      const std::string sub = key.substr(operand.size() + 1);
      if (operand == "data_in" && sub == "skip_first_dim") {
        qnum::detail::require(value.is_boolean(), where, ": 'data_in_skip_first_dim' must be true or false");
        data_in_as_weight = !value.get<bool>();
        continue;
      }
      if (auto t = detail::value_text(key, value)) keys += "," + sub + "=" + *t;
    }
    if (!has || (keys.empty() && !whole)) continue;
    qnum::detail::require(!(whole && !keys.empty()), where, ": '", operand, "' is given both whole and as '", operand,
                          "_*' keys");
    std::string text = whole ? *whole : family;
    std::string extra = (whole ? "" : keys) + shared;
    if (!extra.empty()) text += (text.find(':') == std::string::npos ? ":" : ",") + extra.substr(1);
    try {
      Format f = Format::parse(text);
      if (operand == "data_in") out.data_in = f;
      if (operand == "weight") out.weight = f;
      if (operand == "bias") out.bias = f;
      if (operand == "data_out") out.data_out = f;
    } catch (const Error& e) {
      qnum::detail::fail(where, ", operand ", operand, ": ", e.what());
    }
  }
  // Every key must be an operand key, an operand, or shared.
  for (const auto& [key, value] : cfg.items()) {
    bool known = false;
    for (const auto& k : detail::shared_keys()) known |= key == k;
    for (const auto& o : detail::operand_names()) known |= key == o || key.starts_with(o + "_");
    qnum::detail::require(known, where, ": unknown key '", key,
                          "' (allowed: name, bypass, data_in_*, weight_*, bias_*, data_out_*, data_in, weight, "
                          "bias, data_out, floor, mode, rounding, overflow, subnormals, ste, seed)");
  }
  out.data_in_role = data_in_as_weight ? Role::weight : Role::activation;
  if (!out.any()) return std::nullopt;
  return out;
}

}  // namespace qnum::passes
