// What the passes changed in a model, as JSON, so that a transformed checkpoint can be
// loaded again: describe_structure(model) lists, per layer, the installed QuantConfig, the
// weight mask's presence, the activation-pruning rule and the LoRA adapter's shape;
// restore_structure(fresh_model, that JSON) rebuilds the same structure (masks all ones,
// adapters at their initial values) so that load_state_dict then fills in the values.
// Checkpoints written by `qnum transform` carry it in their metadata under "structure".
// A square Linear replaced by an Identity (NAS-BERT's identity choice,
// models::replace_with_identity) is recorded as {"identity": true} and replaced again.
//
//   {"2": {"quant": {"data_in": "integer:width=8,frac_width=4", "weight": "...", ...},
//          "weight_mask": true,
//          "activation_pruning": {"sparsity": 0.5, "method": "l1-norm", "scope": "local",
//                                 "seed": 7, "threshold": 0},
//          "lora": {"rank": 4, "scaling": 2, "dropout": 0.1},
//          "frozen": ["weight", "bias"]}}     // own parameters that do not train (LoRA's base)
//
// Random activation masks restart their call counter on reload.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/nn/layers.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/prune.hpp"

namespace qnum::passes {

inline nlohmann::json quant_to_json(const nn::QuantConfig& q) {
  nlohmann::json j = nlohmann::json::object();
  if (q.data_in) j["data_in"] = q.data_in->to_string();
  if (q.weight) j["weight"] = q.weight->to_string();
  if (q.bias) j["bias"] = q.bias->to_string();
  if (q.data_out) j["data_out"] = q.data_out->to_string();
  if (q.data_in_role != Role::activation) j["data_in_role"] = "weight";
  return j;
}

inline nn::QuantConfig quant_from_json(const nlohmann::json& j, const std::string& where) {
  qnum::detail::require(j.is_object(), where, ": quant must be an object");
  nn::QuantConfig q;
  for (const auto& [key, v] : j.items()) {
    if (key == "data_in_role") {
      qnum::detail::require(v == "weight" || v == "activation", where, ": data_in_role must be weight or activation");
      q.data_in_role = v == "weight" ? Role::weight : Role::activation;
      continue;
    }
    qnum::detail::require(v.is_string(), where, ": quant.", key, " must be a format text");
    Format f = Format::parse(v.get<std::string>());
    if (key == "data_in")
      q.data_in = f;
    else if (key == "weight")
      q.weight = f;
    else if (key == "bias")
      q.bias = f;
    else if (key == "data_out")
      q.data_out = f;
    else
      qnum::detail::fail(where, ": unknown quant operand '", key, "'");
  }
  return q;
}

/// The pass-made structure of `model` (see the header); an empty object for a plain model.
inline nlohmann::json describe_structure(nn::Module& model) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& [path, m] : model.named_modules()) {
    nlohmann::json layer = nlohmann::json::object();
    if (!path.empty() && dynamic_cast<nn::Identity*>(m)) layer["identity"] = true;
    if (auto* q = dynamic_cast<nn::Quantizable*>(m); q && q->is_quantized()) layer["quant"] = quant_to_json(q->quant());
    if (auto* lin = dynamic_cast<nn::Linear*>(m)) {
      if (lin->weight_mask.defined()) layer["weight_mask"] = true;
      if (auto* ap = dynamic_cast<ActivationPruner*>(lin->input_transform.get())) {
        const auto& s = ap->spec();
        layer["activation_pruning"] = {{"sparsity", s.sparsity},
                                       {"method", s.method == PruneMethod::random ? "random" : "l1-norm"},
                                       {"scope", s.scope == PruneScope::local ? "local" : "global"},
                                       {"seed", ap->seed()},
                                       {"threshold", ap->threshold()}};
      }
      if (lin->lora_A) {
        const auto* d = dynamic_cast<nn::Dropout*>(lin->lora_dropout.get());
        layer["lora"] = {
            {"rank", lin->lora_A->out_features}, {"scaling", lin->lora_scaling}, {"dropout", d ? d->p : 0.0f}};
      }
    }
    // Frozen own parameters (LoRA freezes the base model): a resumed run trains the same ones.
    nlohmann::json frozen = nlohmann::json::array();
    for (auto& [name, t] : m->named_parameters())
      if (name.find('.') == std::string::npos && !t.requires_grad()) frozen.push_back(name);
    if (!frozen.empty()) layer["frozen"] = frozen;
    if (!layer.empty()) out[path] = layer;
  }
  return out;
}

/// Rebuilds `structure` (from describe_structure) on a model of the same architecture.
/// Unknown layers or keys are errors naming them; nothing is half-applied on error.
inline void restore_structure(nn::Module& model, const nlohmann::json& structure) {
  qnum::detail::require(structure.is_object(), "structure must be a JSON object");
  // Validate everything first.
  for (const auto& [path, layer] : structure.items()) {
    nn::Module& m = model.at(path);
    const std::string where = "structure of layer '" + path + "'";
    qnum::detail::require(layer.is_object(), where, " must be an object");
    for (const auto& [key, v] : layer.items()) {
      if (key == "quant") {
        auto* q = dynamic_cast<nn::Quantizable*>(&m);
        qnum::detail::require(q != nullptr, where, ": ", m.type_name(), " cannot be quantized");
        (void)quant_from_json(v, where);
      } else if (key == "frozen") {
        qnum::detail::require(v.is_array(), where, ": 'frozen' must be a list of parameter names");
        for (const auto& name : v) {
          qnum::detail::require(name.is_string(), where, ": 'frozen' must be a list of parameter names");
          bool found = false;
          for (auto& [own, t] : m.named_parameters()) found |= own == name.get<std::string>();
          qnum::detail::require(found, where, ": no parameter '", name.get<std::string>(), "' to freeze");
        }
      } else if (key == "identity") {
        const auto* lin = dynamic_cast<nn::Linear*>(&m);
        qnum::detail::require(v == true && layer.size() == 1, where, ": identity must be true and alone");
        qnum::detail::require(
            !path.empty() && (dynamic_cast<nn::Identity*>(&m) || (lin && lin->in_features == lin->out_features)),
            where, ": only a square Linear can become Identity, not ", m.type_name());
      } else if (key == "weight_mask" || key == "activation_pruning" || key == "lora") {
        qnum::detail::require(dynamic_cast<nn::Linear*>(&m) != nullptr, where, ": '", key, "' needs a Linear, not ",
                              m.type_name());
      } else {
        qnum::detail::fail(where, ": unknown key '", key, "'");
      }
    }
  }
  for (const auto& [path, layer] : structure.items()) {
    nn::Module& m = model.at(path);
    const std::string where = "structure of layer '" + path + "'";
    if (layer.contains("identity")) {
      if (!dynamic_cast<nn::Identity*>(&m)) {
        const auto dot = path.rfind('.');
        model.at(dot == std::string::npos ? "" : path.substr(0, dot))
            .replace_module(dot == std::string::npos ? path : path.substr(dot + 1), std::make_shared<nn::Identity>());
      }
      continue;
    }
    if (layer.contains("quant")) dynamic_cast<nn::Quantizable&>(m).set_quant(quant_from_json(layer["quant"], where));
    if (layer.contains("frozen"))
      for (auto& [name, t] : m.named_parameters())
        for (const auto& f : layer["frozen"])
          if (name == f.get<std::string>()) t.set_requires_grad(false);
    auto* lin = dynamic_cast<nn::Linear*>(&m);
    if (!lin) continue;
    if (layer.value("weight_mask", false))
      lin->set_weight_mask(std::vector<float>(static_cast<std::size_t>(lin->weight.numel()), 1.0f));
    if (layer.contains("activation_pruning")) {
      const auto& a = layer["activation_pruning"];
      const PruneSpec spec = detail::parse_prune_side(
          {{"sparsity", a.at("sparsity")}, {"method", a.at("method")}, {"scope", a.at("scope")}}, "activation");
      lin->input_transform =
          std::make_shared<ActivationPruner>(spec, a.at("seed").get<std::uint64_t>(), a.at("threshold").get<float>());
    }
    if (layer.contains("lora")) {
      const auto& l = layer["lora"];
      attach_lora(*lin, l.at("rank").get<std::int64_t>(), l.at("scaling").get<float>(), l.at("dropout").get<double>(),
                  0);
    }
  }
}

}  // namespace qnum::passes
