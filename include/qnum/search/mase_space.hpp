// MASE's mixed-precision space `graph/quantize/mixed_precision_ptq` (spec/system.md §7.2) as
// its files state it, without its quirks. The [seed] table maps `default`, a MASE op
// (`linear`, `relu`, ...) or a layer's name (`seq_blocks_2`) to a config table whose keys
// hold lists of choices (a scalar is one fixed value):
//   setup.by = "name"  every quantizable layer searches its own seed.<name> (else
//                      seed.default) under parameters "<layer>/<key>";
//   setup.by = "type"  every op searches one seed.<op> (else seed.default) under parameters
//                      "<op>/<key>", the drawn config given to all layers of that op.
// Either way the quantize config a trial applies is keyed by layer name, so by = "type"
// quantizes what it says (MASE keys its choices by op but looks them up by name, and
// evaluates the unquantized model). A name of "NA" leaves the layer unquantized (nothing to
// search); a frac width of "NA" is its width // 2 (MixedPrecisionSpace::config). Keys for an
// operand the op lacks (weight_* on a ReLU) are dropped rather than drawn for nothing.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/search/spaces.hpp"

namespace qnum::search {

/// How MASE's seed tables are keyed (setup.by).
enum class SeedBy { name, type };

/// "name" or "type"; anything else is a qnum::Error.
inline SeedBy parse_seed_by(const std::string& by) {
  qnum::detail::require(by == "name" || by == "type",
                        "mixed_precision_ptq: setup.by must be \"name\" or \"type\", got '", by, "'");
  return by == "name" ? SeedBy::name : SeedBy::type;
}

namespace detail {

inline std::vector<CategoricalChoice> seed_choices(const nlohmann::json& v, const std::string& where) {
  std::vector<CategoricalChoice> out;
  for (const auto& c : v) {
    qnum::detail::require(c.is_primitive(), where, ": choices must be numbers, strings or booleans, got ", c.dump());
    out.push_back(param_value_from_json(c));
  }
  return out;
}

/// Whether config key `key` is for an operand the op does not have (weight_width on a ReLU):
/// such keys are not searched (MASE draws them, and they change nothing).
inline bool is_foreign_operand_key(const std::string& key, const std::vector<std::string>& operands) {
  for (const std::string op : {"data_in", "weight", "bias", "data_out"})
    if (key == op || key.starts_with(op + "_"))
      return std::find(operands.begin(), operands.end(), op) == operands.end();
  return false;
}

/// The LayerSpace of one seed entry for `layer`, an op with `operands` (nullopt: its name is
/// "NA", nothing to search).
inline std::optional<LayerSpace> seed_layer(const nlohmann::json& entry, const std::string& seed_key,
                                            const std::string& layer, const std::string& op,
                                            const std::vector<std::string>& operands) {
  const std::string where = "mixed_precision_ptq: seed." + seed_key;
  const nlohmann::json& cfg = entry.is_object() && entry.contains("config") ? entry["config"] : entry;
  qnum::detail::require(cfg.is_object(), where, " must be a table ([seed.", seed_key, ".config])");
  LayerSpace l{layer, op, {}, nlohmann::json::object()};
  for (const auto& [k, v] : cfg.items()) {
    qnum::detail::require(!v.is_array() || !v.empty(), where, ": '", k, "' is an empty list of choices");
    if (is_foreign_operand_key(k, operands)) continue;
    if (v.is_array() && v.size() > 1)
      l.choices[k] = seed_choices(v, where + " key '" + k + "'");
    else
      l.fixed[k] = v.is_array() ? v[0] : v;
  }
  if (!l.choices.count("name") && (!l.fixed.contains("name") || passes::is_skip_name(l.fixed["name"])))
    return std::nullopt;
  return l;
}

/// The seed key naming `path` (its module path, MASE node name or seq_blocks alias), or "".
inline std::string seed_key_of_layer(const nlohmann::json& seed, const std::string& path) {
  for (const auto& [k, e] : seed.items())
    if (k != "default" && passes::detail::name_matches(k, path)) return k;
  return "";
}

}  // namespace detail

/// MASE's seed space over the quantizable layers of `model` whose op is in `ops` and whose
/// path matches `layers_regex` (see the file comment). Seed keys that the chosen `by` does
/// not use are reported in `notes` (a seed.<op> under by = "name", a layer's seed under
/// by = "type", a key naming nothing). No layer left to search is a qnum::Error.
inline MixedPrecisionSpace mase_seed_space(nn::Module& model, const nlohmann::json& seed, SeedBy by,
                                           const std::string& layers_regex, const std::vector<std::string>& ops,
                                           std::vector<std::string>* notes = nullptr) {
  qnum::detail::require(seed.is_object() && !seed.empty(), "mixed_precision_ptq: the [seed] table is empty");
  const auto selected = select_layers(model, layers_regex, ops);
  std::map<std::string, std::vector<std::string>> operands;  // layer path -> its quantizable operands
  for (const auto& [path, m] : model.named_modules())
    if (auto* q = dynamic_cast<nn::Quantizable*>(m)) operands[path] = q->quant_operands();
  const auto& mase_ops = passes::mase_quantizable_ops();
  std::vector<std::string> layer_names;
  for (const auto& [path, m] : model.named_modules())
    if (!path.empty() && dynamic_cast<nn::Quantizable*>(m)) layer_names.push_back(passes::node_name(path));
  for (const auto& [k, e] : seed.items()) {
    if (k == "default" || !notes) continue;
    const bool is_op = std::find(mase_ops.begin(), mase_ops.end(), k) != mase_ops.end();
    bool names_layer = false;
    for (const auto& [path, m] : model.named_modules())
      names_layer |= !path.empty() && passes::detail::name_matches(k, path);
    if (!is_op && !names_layer)
      notes->push_back("seed." + k + " names no layer of the model (layers: " + passes::detail::join(layer_names) +
                       ") and no MASE op");
    else if (is_op && by == SeedBy::name)
      notes->push_back("seed." + k + " is an op: it applies when setup.by = \"type\" (setup.by is \"name\")");
    else if (!is_op && by == SeedBy::type)
      notes->push_back("seed." + k + " is a layer name: it applies when setup.by = \"name\" (setup.by is \"type\")");
  }
  std::vector<LayerSpace> out;
  if (by == SeedBy::name) {
    for (const auto& [path, op] : selected) {
      std::string key = detail::seed_key_of_layer(seed, path);
      if (key.empty()) key = "default";
      if (!seed.contains(key)) continue;
      if (auto l = detail::seed_layer(seed[key], key, path, op, operands[path])) out.push_back(std::move(*l));
    }
  } else {
    std::map<std::string, std::vector<std::string>> layers_of_op;
    std::vector<std::string> op_order;
    for (const auto& [path, op] : selected) {
      if (!layers_of_op.count(op)) op_order.push_back(op);
      layers_of_op[op].push_back(path);
    }
    for (const auto& op : op_order) {
      const std::string key = seed.contains(op) ? op : "default";
      if (!seed.contains(key)) continue;
      if (auto l = detail::seed_layer(seed[key], key, op, op, operands[layers_of_op[op].front()])) {
        l->members = layers_of_op[op];
        out.push_back(std::move(*l));
      }
    }
  }
  qnum::detail::require(!out.empty(), "mixed_precision_ptq: the seed tables leave no layer to search (by = \"",
                        by == SeedBy::name ? "name" : "type", "\": every layer's name is NA, or no seed applies)");
  return MixedPrecisionSpace(std::move(out));
}

}  // namespace qnum::search
