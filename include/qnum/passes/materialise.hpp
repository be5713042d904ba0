// The values a model's forward computes with, as a plain state dict that any float runtime
// (transformers, ONNX Runtime) can load without qnum: for every Linear the weight and bias
// the forward multiplies by (weight ⊙ mask, fake-quantized by the layer's formats) with its
// LoRA adapter folded in, W' = Wq + scaling · Bq · Aq; masks and adapters dropped. What a
// float runtime cannot compute is reported, not dropped in silence: activation formats
// (data_in / data_out of any quantized layer) are listed for the caller to record or refuse,
// and activation pruning, which changes a layer's input by rule, is an error naming the layer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/prune.hpp"
#include "qnum/passes/structure.hpp"

namespace qnum::passes {

/// What materialised_state folded into the values, per layer path.
struct MaterialiseReport {
  std::vector<std::string> quantized_weights;  ///< Linears whose weight or bias carries a format
  std::vector<std::string> pruned;             ///< Linears whose mask was applied
  std::vector<std::string> lora_fused;         ///< Linears whose adapter was folded in
  std::vector<std::string> identities;         ///< Linears replaced by Identity (no tensors)
  /// Layers that quantize activations (data_in, data_out; a matmul's right operand), with
  /// their formats as describe_structure writes them: a float runtime computes them in float.
  nlohmann::json activation_formats = nlohmann::json::object();
  /// Every quantized layer's formats (describe_structure's "quant"), weights included.
  nlohmann::json formats = nlohmann::json::object();
};

/// The state dict of `model` as its forward uses it (see the file comment), and what was folded.
inline std::map<std::string, Tensor> materialised_state(nn::Module& model, MaterialiseReport* report = nullptr) {
  MaterialiseReport r;
  std::map<std::string, Tensor> state = model.state_dict();
  const auto drop_under = [&](const std::string& prefix) {
    for (auto it = state.lower_bound(prefix); it != state.end() && it->first.starts_with(prefix);) it = state.erase(it);
  };
  const auto activation_operands = [](const nn::QuantConfig& q, bool matmul) {
    nlohmann::json j = nlohmann::json::object();
    if (q.data_in) j["data_in"] = q.data_in->to_string();
    if (q.data_out) j["data_out"] = q.data_out->to_string();
    if (matmul && q.weight) j["weight"] = q.weight->to_string();  // a matmul's "weight" is an activation
    return j;
  };
  std::vector<std::string> adapters;  // folded into their parents: not layers of the result
  const auto in_adapter = [&](const std::string& path) {
    for (const auto& a : adapters)
      if (path == a || path.starts_with(a + ".")) return true;
    return false;
  };
  for (auto& [path, m] : model.named_modules()) {
    if (in_adapter(path)) continue;
    const std::string prefix = path.empty() ? "" : path + ".";
    if (!path.empty() && dynamic_cast<nn::Identity*>(m)) r.identities.push_back(path);
    auto* q = dynamic_cast<nn::Quantizable*>(m);
    if (q && q->is_quantized()) {
      r.formats[path] = quant_to_json(q->quant());
      const nlohmann::json act = activation_operands(q->quant(), dynamic_cast<nn::Matmul*>(m) != nullptr);
      if (!act.empty()) r.activation_formats[path] = act;
    }
    auto* lin = dynamic_cast<nn::Linear*>(m);
    if (!lin) continue;
    qnum::detail::require(!lin->input_transform, "layer '", path,
                          "' prunes its activations (an input rule that a float runtime cannot express): ",
                          "export the model before activation pruning");
    if (lin->lora_A) {
      for (const auto* adapter : {lin->lora_A.get(), lin->lora_B.get()})
        qnum::detail::require(!adapter->quant().data_in && !adapter->quant().data_out, "layer '", path,
                              "': its LoRA adapter quantizes activations, which the fused weight cannot carry");
    }
    const Tensor w = lin->forward_weight();
    Tensor out = lin->lora_A ? w.clone() : w;
    if (lin->lora_A) {
      add_lora_update(out.values(), lin->lora_A->forward_weight().values(), lin->lora_B->forward_weight().values(),
                      *lin);
      r.lora_fused.push_back(path);
      for (const char* child : {"lora_A", "lora_B", "lora_dropout"}) {
        adapters.push_back(prefix + child);
        drop_under(prefix + child + ".");
      }
    }
    if (lin->weight_mask.defined()) {
      r.pruned.push_back(path);
      state.erase(prefix + "weight_mask");
    }
    if (lin->quant().weight || lin->quant().bias) r.quantized_weights.push_back(path);
    state[prefix + "weight"] = out;
    if (lin->bias.defined()) state[prefix + "bias"] = lin->forward_bias();
  }
  if (report) *report = std::move(r);
  return state;
}

}  // namespace qnum::passes
