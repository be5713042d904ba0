// Hugging Face BERT weights into a qnum BERT (models/bert.hpp): safetensors or torch.save
// `.bin` checkpoints of BertForSequenceClassification, BertForPreTraining or a bare BertModel,
// names mapped as transformers maps them, shapes checked against the config, all or nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/io/torch_state_dict.hpp"
#include "qnum/models/bert.hpp"

namespace qnum::models {

/// What load_hf_bert did: tensors loaded, and the model's tensors the checkpoint lacked
/// (kept at their initialisation, e.g. a pretraining checkpoint has no classifier).
struct HfLoadReport {
  std::int64_t loaded = 0;
  std::vector<std::string> missing, ignored;
};

/// Loads a Hugging Face BERT checkpoint, safetensors or torch.save `.bin` (BertForSequenceClassification,
/// BertForPreTraining or a bare BertModel) into `model`: old LayerNorm names gamma/beta are
/// mapped, a missing "bert." prefix is added, and tensors BERT-for-classification has no
/// place for (position_ids, cls.* heads) are ignored. Every encoder/embedding tensor must be
/// present; only pooler and classifier may be missing (kept as initialised, as transformers
/// does). A shape that does not match the config is a qnum::Error naming the tensor; nothing
/// is changed unless the whole checkpoint is accepted.
inline HfLoadReport load_hf_bert(BertForSequenceClassification& model, const std::filesystem::path& path) {
  const std::string what = "checkpoint '" + path.string() + "'";
  qnum::detail::require(std::filesystem::exists(path), what, " not found");
  SafetensorsFile st = read_weights_file(path);  // model.safetensors or pytorch_model.bin
  const auto own = model.state_dict();
  bool any_prefixed = false;
  for (const auto& [name, t] : st.tensors) any_prefixed = any_prefixed || name.starts_with("bert.");
  HfLoadReport r;
  std::map<std::string, Tensor> state;
  for (auto& [raw, t] : st.tensors) {
    std::string name = raw;
    if (!any_prefixed && !name.starts_with("classifier.")) name = "bert." + name;
    for (auto [from, to] : {std::pair<std::string_view, std::string_view>{"LayerNorm.gamma", "LayerNorm.weight"},
                            {"LayerNorm.beta", "LayerNorm.bias"}})
      if (name.ends_with(from)) name = name.substr(0, name.size() - from.size()) + std::string(to);
    if (!own.count(name)) {
      r.ignored.push_back(raw);
      continue;
    }
    const Tensor& mine = own.at(name);
    qnum::detail::require(t.shape() == mine.shape(), what, ": tensor '", raw, "' has shape ", to_string(t.shape()),
                          " but the model (hidden_size ", model.config.hidden_size, ", vocab_size ",
                          model.config.vocab_size, ", intermediate_size ", model.config.intermediate_size,
                          ", num_labels ", model.config.num_labels, ") expects ", to_string(mine.shape()), " for '",
                          name, "'");
    state.emplace(name, t);
  }
  for (const auto& [name, t] : own) {
    if (state.count(name)) continue;
    qnum::detail::require(name.starts_with("bert.pooler.") || name.starts_with("classifier."), what, " has no tensor '",
                          name, "' (", model.config.num_hidden_layers,
                          " layers expected; is it a BERT checkpoint of this size?)");
    r.missing.push_back(name);
  }
  model.load_state_dict(state, false);
  r.loaded = static_cast<std::int64_t>(state.size());
  return r;
}

}  // namespace qnum::models
