// Mixed-precision search spaces (spec/system.md §7.1 lab 3, §7.2 MASE's
// graph/quantize/mixed_precision_ptq): per quantizable layer, categorical choices drawn with
// Trial::suggest_categorical under the names "<layer>/<key>", turned into a quantize-pass
// config keyed by layer NAME (never MASE's by=type no-op). The space is read-only: every
// trial builds a fresh config, so nothing leaks from one trial into the next.
//
// A layer's keys:
//   format      a variant label ("integer:w8f4", "minifloat_ieee:w8e4", "float", ...) from
//               format_variants(): a whole MASE config for data_in, weight and bias;
//   width, frac_width   shorthands for data_in_/weight_/bias_ of the same name;
//   name and any MASE config key (data_in_width, weight_exponent_width, ...) as they are.
// Keys with one choice are still suggested (recorded in the trial, as Optuna does).
#pragma once

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/trial.hpp"

namespace qnum::search {

/// One named quantize config a layer can take in the families space.
struct FormatVariant {
  std::string label;      ///< "integer:w8f4"
  std::string family;     ///< "integer" ("float" = leave the layer alone)
  nlohmann::json config;  ///< MASE config: {"name": "integer", "data_in_width": 8, ...}
};

namespace detail {

/// A MASE config with the same format keys on data_in, weight and bias.
inline nlohmann::json on_operands(const std::string& family, const nlohmann::json& keys,
                                  std::initializer_list<const char*> operands = {"data_in", "weight", "bias"}) {
  nlohmann::json c{{"name", family}};
  for (const char* op : operands)
    for (const auto& [k, v] : keys.items()) c[std::string(op) + "_" + k] = v;
  return c;
}

}  // namespace detail

/// The variants of every family the families space knows, a few widths each (8-bit first).
/// Binary and ternary quantize weights only (inputs and biases stay float32), as MASE's
/// LinearBinary/LinearTernary weight quantizers; binary_scaling and residual_sign are MASE's
/// LinearBinaryScaling and LinearBinaryResidualSign (comments below); every other family
/// covers data_in, weight and bias. Block and MX families use blocks of 16 along the last axis (JSC's narrowest
/// layers are 16 wide).
inline const std::vector<FormatVariant>& format_variants() {
  using detail::on_operands;
  using nlohmann::json;
  static const std::vector<FormatVariant> v{
      {"integer:w8f4", "integer", on_operands("integer", {{"width", 8}, {"frac_width", 4}})},
      {"integer:w6f3", "integer", on_operands("integer", {{"width", 6}, {"frac_width", 3}})},
      {"integer:w4f2", "integer", on_operands("integer", {{"width", 4}, {"frac_width", 2}})},
      {"minifloat_denorm:w8e4", "minifloat_denorm",
       on_operands("minifloat_denorm", {{"width", 8}, {"exponent_width", 4}})},
      {"minifloat_denorm:w6e3", "minifloat_denorm",
       on_operands("minifloat_denorm", {{"width", 6}, {"exponent_width", 3}})},
      {"minifloat_ieee:w8e4", "minifloat_ieee", on_operands("minifloat_ieee", {{"width", 8}, {"exponent_width", 4}})},
      {"minifloat_ieee:w8e5", "minifloat_ieee", on_operands("minifloat_ieee", {{"width", 8}, {"exponent_width", 5}})},
      {"minifloat_ieee:w6e3", "minifloat_ieee", on_operands("minifloat_ieee", {{"width", 6}, {"exponent_width", 3}})},
      {"log:w8", "log", on_operands("log", {{"width", 8}})},
      {"log:w6", "log", on_operands("log", {{"width", 6}})},
      {"block_fp:w8", "block_fp", on_operands("block_fp", {{"width", 8}, {"exponent_width", 8}, {"block_size", "16"}})},
      {"block_fp:w5", "block_fp", on_operands("block_fp", {{"width", 5}, {"exponent_width", 8}, {"block_size", "16"}})},
      {"block_minifloat:w8e4", "block_minifloat",
       on_operands("block_minifloat",
                   {{"width", 8}, {"exponent_width", 4}, {"exponent_bias_width", 8}, {"block_size", "16"}})},
      {"block_minifloat:w6e3", "block_minifloat",
       on_operands("block_minifloat",
                   {{"width", 6}, {"exponent_width", 3}, {"exponent_bias_width", 8}, {"block_size", "16"}})},
      {"block_log:w8", "block_log",
       on_operands("block_log", {{"width", 8}, {"exponent_bias_width", 8}, {"block_size", "16"}})},
      {"block_log:w6", "block_log",
       on_operands("block_log", {{"width", 6}, {"exponent_bias_width", 8}, {"block_size", "16"}})},
      {"mxint:w8", "mxint", on_operands("mxint", {{"width", 8}, {"block_size", 16}})},
      {"mxint:w6", "mxint", on_operands("mxint", {{"width", 6}, {"block_size", 16}})},
      {"mxfp:e4m3", "mxfp", on_operands("mxfp", {{"exponent_width", 4}, {"frac_width", 3}, {"block_size", 16}})},
      {"mxfp:e2m1", "mxfp", on_operands("mxfp", {{"exponent_width", 2}, {"frac_width", 1}, {"block_size", 16}})},
      {"scale_integer:w8", "scale_integer", on_operands("scale_integer", {{"width", 8}})},
      // NVFP4 (E2M1 in blocks of 16, E4M3 block scales, an fp32 tensor scale; no keys): given
      // whole to the input and the weight, the bias kept float32.
      {"nvfp4", "nvfp4", json{{"name", "nvfp4"}, {"data_in", "nvfp4"}, {"weight", "nvfp4"}}},
      {"binary:bipolar", "binary", on_operands("binary", {{"bipolar", true}}, {"weight"})},
      // Binary with scaling: weights {0, alpha} with alpha per output channel (qnum's binary
      // bipolar=false; MASE's needs 4-D tensors, spec/formats.md 2.9), or MASE's
      // LinearBinaryScaling as it runs with binary_training (input, weight and bias to +-1;
      // no scale despite the name, spec/system.md's layer table).
      {"binary_scaling:alpha", "binary_scaling", on_operands("binary", {{"bipolar", false}}, {"weight"})},
      {"binary_scaling:mase", "binary_scaling", on_operands("binary", {{"bipolar", true}})},
      // Residual sign (MASE's LinearBinaryResidualSign at initialisation): the input as the sum
      // of L residual-sign levels, weights binary +-1, bias float32.
      {"residual_sign:l2", "residual_sign", json{{"name", "residual_sign"}, {"data_in_levels", 2}, {"weight", "binary"}}},
      {"residual_sign:l3", "residual_sign", json{{"name", "residual_sign"}, {"data_in_levels", 3}, {"weight", "binary"}}},
      {"ternary:scaled", "ternary", on_operands("ternary", {{"scaling_factor", true}}, {"weight"})},
      {"float", "float", json{{"name", nullptr}}},
  };
  return v;
}

/// The families of MASE lab 3 task 2, one curve each: integer, minifloat denorm, minifloat
/// IEEE, log, block FP, block minifloat, block log, binary, binary with scaling, residual sign.
inline std::vector<std::string> lab3_families() {
  return {"integer",   "minifloat_denorm", "minifloat_ieee", "log",           "block_fp",
          "block_minifloat", "block_log",  "binary",         "binary_scaling", "residual_sign"};
}

/// The families format_variants() covers, in its order ("float" excluded).
inline std::vector<std::string> variant_families() {
  std::vector<std::string> out;
  for (const auto& v : format_variants())
    if (v.family != "float" && std::find(out.begin(), out.end(), v.family) == out.end()) out.push_back(v.family);
  return out;
}

/// The variant labels of `families` (in format_variants() order), plus "float" when asked.
/// An unknown family is an error listing the known ones.
inline std::vector<std::string> variant_labels(const std::vector<std::string>& families, bool include_float = false) {
  const auto known = variant_families();
  std::vector<std::string> out;
  for (const auto& f : families) {
    qnum::detail::require(std::find(known.begin(), known.end(), f) != known.end(), "mixed-precision space: family '", f,
                          "' has no variants (known: ", passes::detail::join(known), ")");
    for (const auto& v : format_variants())
      if (v.family == f && std::find(out.begin(), out.end(), v.label) == out.end()) out.push_back(v.label);
  }
  if (include_float) out.push_back("float");
  return out;
}

/// The variant called `label`; an error listing the labels otherwise.
inline const FormatVariant& format_variant(const std::string& label) {
  std::vector<std::string> labels;
  for (const auto& v : format_variants()) {
    if (v.label == label) return v;
    labels.push_back(v.label);
  }
  qnum::detail::fail("unknown format variant '", label, "' (known: ", passes::detail::join(labels), ")");
}

/// The choices of one layer (or of every layer of one op, MASE's setup.by = "type"): key ->
/// categorical choices, plus fixed keys copied as they are.
struct LayerSpace {
  std::string layer;  ///< module path ("2", "encoder.layer.0.attention.self.query"), or the op
  std::string op;     ///< MASE op ("linear")
  std::map<std::string, std::vector<CategoricalChoice>> choices;
  nlohmann::json fixed = nlohmann::json::object();
  /// The layers the drawn config is given to (empty: `layer` alone); by type, every layer
  /// of the op, each keyed by its name in the quantize config.
  std::vector<std::string> members = {};

  std::vector<std::string> targets() const { return members.empty() ? std::vector<std::string>{layer} : members; }
};

/// MASE's "NA" frac width (its example files: "NA" means data_in_frac_width = data_in_width
/// // 2): every `<operand>_frac_width = "NA"` of `config` whose `<operand>_width` is an integer
/// becomes that width // 2, so trials record the value they ran with.
inline void expand_na_frac_widths(nlohmann::json& config) {
  const std::string suffix = "frac_width";
  for (auto& [key, value] : config.items()) {
    if (!key.ends_with(suffix) || !value.is_string() || value.get<std::string>() != "NA") continue;
    const std::string width_key = key.substr(0, key.size() - suffix.size()) + "width";
    if (config.contains(width_key) && config[width_key].is_number_integer())
      value = config[width_key].get<std::int64_t>() / 2;
  }
}

/// The quantizable layers of `model` whose op is in `ops` and whose path or MASE node name
/// matches `regex` (whole match), in module order. No layer matching is an error listing
/// the candidates.
inline std::vector<std::pair<std::string, std::string>> select_layers(nn::Module& model, const std::string& regex,
                                                                      const std::vector<std::string>& ops) {
  std::regex re;
  try {
    re = std::regex(regex);
  } catch (const std::regex_error& e) {
    qnum::detail::fail("mixed-precision space: bad layers regular expression '", regex, "': ", e.what());
  }
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> candidates;
  for (auto& [path, m] : model.named_modules()) {
    if (!dynamic_cast<nn::Quantizable*>(m) || path.empty()) continue;
    if (std::find(ops.begin(), ops.end(), m->op_name()) == ops.end()) continue;
    candidates.push_back(path);
    if (std::regex_match(path, re) || std::regex_match(passes::node_name(path), re))
      out.emplace_back(path, m->op_name());
  }
  qnum::detail::require(!out.empty(), "mixed-precision space: layers '", regex, "' match no layer with op ",
                        passes::detail::join(ops),
                        " (candidates: ", candidates.empty() ? "none" : passes::detail::join(candidates), ")");
  return out;
}

/// A per-layer mixed-precision space (see the file comment).
class MixedPrecisionSpace {
 public:
  MixedPrecisionSpace() = default;
  explicit MixedPrecisionSpace(std::vector<LayerSpace> layers) : layers_(std::move(layers)) {
    qnum::detail::require(!layers_.empty(), "mixed-precision space: no layers");
    for (const auto& l : layers_)
      for (const auto& [k, c] : l.choices) {
        qnum::detail::require(!c.empty(), "mixed-precision space: layer '", l.layer, "' key '", k, "' has no choices");
        if (k == "format")
          for (const auto& x : c) {
            qnum::detail::require(std::holds_alternative<std::string>(x), "mixed-precision space: layer '", l.layer,
                                  "': format choices must be variant labels (strings)");
            format_variant(std::get<std::string>(x));
          }
      }
  }

  /// Lab 3 task 1: integer on data_in, weight and bias of each selected layer, with per-layer
  /// width and frac_width choices.
  static MixedPrecisionSpace integer_widths(nn::Module& model, const std::string& layers_regex,
                                            const std::vector<std::string>& ops, std::vector<std::int64_t> widths,
                                            std::vector<std::int64_t> frac_widths) {
    qnum::detail::require(!widths.empty() && !frac_widths.empty(),
                          "mixed-precision space: width and frac_width need at least one choice each");
    std::vector<LayerSpace> out;
    for (const auto& [path, op] : select_layers(model, layers_regex, ops)) {
      LayerSpace l{path, op, {}, {{"name", "integer"}}};
      l.choices["width"] = {widths.begin(), widths.end()};
      l.choices["frac_width"] = {frac_widths.begin(), frac_widths.end()};
      out.push_back(std::move(l));
    }
    return MixedPrecisionSpace(std::move(out));
  }

  /// Lab 3 task 2: one "format" choice per selected layer among the variants of `families`
  /// (plus "float" when include_float).
  static MixedPrecisionSpace families(nn::Module& model, const std::string& layers_regex,
                                      const std::vector<std::string>& ops, const std::vector<std::string>& families,
                                      bool include_float = false) {
    qnum::detail::require(!families.empty(), "mixed-precision space: no families given");
    const auto labels = variant_labels(families, include_float);
    std::vector<LayerSpace> out;
    for (const auto& [path, op] : select_layers(model, layers_regex, ops)) {
      LayerSpace l{path, op, {}, nlohmann::json::object()};
      l.choices["format"] = {labels.begin(), labels.end()};
      out.push_back(std::move(l));
    }
    return MixedPrecisionSpace(std::move(out));
  }

  const std::vector<LayerSpace>& layers() const { return layers_; }

  /// The parameter names ("<layer>/<key>") and choices: Optuna's GridSampler search space.
  GridSpace grid() const {
    GridSpace g;
    for (const auto& l : layers_)
      for (const auto& [k, c] : l.choices) g[l.layer + "/" + k] = c;
    return g;
  }

  /// Number of points (the product of every choice list's size, as a double).
  double size() const {
    double n = 1;
    for (const auto& l : layers_)
      for (const auto& [k, c] : l.choices) n *= static_cast<double>(c.size());
    return n;
  }

  /// Draws every parameter of the trial and returns the quantize-pass config it means.
  nlohmann::json sample(Trial& trial) const {
    std::map<std::string, ParamValue> values;
    for (const auto& l : layers_)
      for (const auto& [k, c] : l.choices) values[l.layer + "/" + k] = trial.suggest_categorical(l.layer + "/" + k, c);
    return config(values);
  }

  /// The quantize-pass config of one point: {"by": "name", "default": {"config": {"name":
  /// null}}, "<layer>": {"config": {...}}, ...}, "NA" frac widths expanded. Layers not in
  /// the space stay float32.
  nlohmann::json config(const std::map<std::string, ParamValue>& values) const {
    nlohmann::json q{{"by", "name"}, {"default", {{"config", {{"name", nullptr}}}}}};
    for (const auto& l : layers_) {
      nlohmann::json c = l.fixed;
      for (const auto& [k, choices] : l.choices) {
        const auto it = values.find(l.layer + "/" + k);
        qnum::detail::require(it != values.end(), "mixed-precision space: no value for '", l.layer, "/", k, "'");
        const nlohmann::json v = to_json(it->second);
        if (k == "format") {
          for (const auto& [fk, fv] : format_variant(v.get<std::string>()).config.items()) c[fk] = fv;
        } else if (k == "width" || k == "frac_width") {
          for (const char* op : {"data_in", "weight", "bias"}) c[std::string(op) + "_" + k] = v;
        } else {
          c[k] = v;
        }
      }
      if (!c.contains("name")) c["name"] = nullptr;
      expand_na_frac_widths(c);
      for (const auto& target : l.targets()) q[target] = {{"config", c}};
    }
    return q;
  }

 private:
  std::vector<LayerSpace> layers_;
};

}  // namespace qnum::search
