// What a search does to a BERT's structure (MASE's NAS tutorial 5, lab 4's packing): the
// square Linears of a config, a Linear replaced by another module in place, and a square
// Linear replaced by nn::Identity. The parent's typed handle to a replaced Linear becomes
// null, so the parent calls the new child by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/nn/layers.hpp"

namespace qnum::models {

/// Paths of the square Linears (in_features == out_features) of a model of config `c`, in
/// module order, as named_modules() lists them: per layer query, key, value, the attention
/// output dense and, when intermediate_size == hidden_size, the intermediate and output
/// dense; the pooler dense; the classifier when hidden_size == num_labels. These are the
/// Linears MASE's NAS tutorial may turn into Identity.
inline std::vector<std::string> bert_square_linear_paths(const BertConfig& c) {
  std::vector<std::string> out;
  const bool ffn = c.intermediate_size == c.hidden_size;
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "bert.encoder.layer." + std::to_string(i) + ".";
    for (const char* p :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"})
      out.push_back(l + p);
    if (ffn) {
      out.push_back(l + "intermediate.dense");
      out.push_back(l + "output.dense");
    }
  }
  out.push_back("bert.pooler.dense");
  if (c.hidden_size == c.num_labels) out.push_back("classifier");
  return out;
}

/// Puts `replacement` in place of the Linear at `path` (e.g.
/// "bert.encoder.layer.0.attention.self.query", "classifier") and returns the old Linear: the
/// parent's typed handle to it becomes null, so the parent calls the new child by name (the
/// forward pass uses `replacement`). qnum::Error when `path` is not a Linear of the model.
inline std::shared_ptr<nn::Module> replace_linear(BertForSequenceClassification& model, const std::string& path,
                                                  std::shared_ptr<nn::Module> replacement) {
  const auto dot = path.rfind('.');
  const std::string parent_path = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
  nn::Module& parent = model.at(parent_path);
  auto* lin = dynamic_cast<nn::Linear*>(&parent.at(name));
  qnum::detail::require(lin != nullptr, "replace_linear: '", path, "' is a ", parent.at(name).type_name(),
                        ", not a Linear");
  auto old = parent.replace_module(name, std::move(replacement));  // keeps `lin` alive below
  auto clear = [&](std::shared_ptr<nn::Linear>& handle) {
    if (handle.get() == lin) handle.reset();
  };
  if (auto* s = dynamic_cast<BertSelfAttention*>(&parent)) {
    clear(s->query), clear(s->key), clear(s->value);
  } else if (auto* d = dynamic_cast<BertDenseResidual*>(&parent)) {
    clear(d->dense);
  } else if (auto* i = dynamic_cast<BertIntermediate*>(&parent)) {
    clear(i->dense);
  } else if (auto* p = dynamic_cast<BertPooler*>(&parent)) {
    clear(p->dense);
  } else if (auto* m = dynamic_cast<BertForSequenceClassification*>(&parent)) {
    clear(m->classifier);
  }
  return old;
}

/// Replaces the square Linear at `path` (e.g. "bert.encoder.layer.0.attention.self.query")
/// by an nn::Identity in place (MASE's deepsetattr of tutorial 5): its parameters leave the
/// model, the forward pass uses the identity, and the parent's typed handle becomes null.
/// qnum::Error when `path` is not a Linear of the model or not square.
inline void replace_with_identity(BertForSequenceClassification& model, const std::string& path) {
  const auto dot = path.rfind('.');
  nn::Module& parent = model.at(dot == std::string::npos ? "" : path.substr(0, dot));
  const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
  const auto* lin = dynamic_cast<const nn::Linear*>(&parent.at(name));
  qnum::detail::require(lin != nullptr, "replace_with_identity: '", path, "' is a ", parent.at(name).type_name(),
                        ", not a Linear");
  qnum::detail::require(lin->in_features == lin->out_features, "replace_with_identity: Linear '", path, "' is ",
                        lin->in_features, " -> ", lin->out_features, "; only a square Linear can become Identity");
  replace_linear(model, path, std::make_shared<nn::Identity>());
}

}  // namespace qnum::models
