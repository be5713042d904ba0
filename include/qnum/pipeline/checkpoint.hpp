// A model from a checkpoint, the one function every command and lab program calls: the
// registered model of the checkpoint's name, its saved model_config (BERT's sizes), its
// structure (quantized layers, masks, adapters, NAS identities) and its values; and the
// example input a model of either kind is traced on (BitOPs, graphs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/data/dataset.hpp"
#include "qnum/models/bert_packed.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/tensor/tensor.hpp"
#include "qnum/train/checkpoint.hpp"

namespace qnum::pipeline {

/// Any registered model with the structure and values of checkpoint `path` (its saved
/// model_config, when it has one, gives BERT's sizes). A packed checkpoint (`qnum export --to
/// packed-int8|packed-mxint8`: metadata "packed") gets its packed Linears from the stored codes.
inline Classifier load_classifier(const std::string& name, const std::string& path,
                                          const nlohmann::json& meta) {
  require_checkpoint_of(name, path, meta);
  BuildOptions bo;
  bo.config = meta.value("model_config", nlohmann::json(nullptr));
  Classifier c = make_classifier(name, bo);
  if (meta.contains("structure")) passes::restore_structure(*c.module, meta["structure"]);
  if (meta.contains("packed")) {
    auto* bert = dynamic_cast<models::BertForSequenceClassification*>(c.module.get());
    qnum::detail::require(bert != nullptr, "checkpoint '", path, "' is packed, which only BERT models are, not '",
                          name, "'");
    models::restore_packed(*bert, meta["packed"], read_safetensors(train::detail::tensor_file(path)).bytes);
  }
  train::load_checkpoint(path, *c.module, nullptr);
  return c;
}

/// The example a model is traced on: a batch of `rows` feature rows, or of `rows` texts of
/// `seq_len` token ids (ids of `tokens`' first row when given, else [PAD]).
inline Tensor trace_example(const Classifier& m, std::int64_t rows, std::int64_t seq_len,
                            const data::TokenDataset* tokens = nullptr) {
  if (m.input == InputKind::features) return Tensor::zeros({rows, models::kJscFeatures});
  Tensor x = Tensor::zeros({rows, seq_len});
  if (tokens && tokens->size() > 0) {
    const std::int64_t n = std::min(seq_len, tokens->length(0));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < n; ++i)
        x.data()[r * seq_len + i] =
            static_cast<float>(tokens->tokens[static_cast<std::size_t>(tokens->offsets[0] + i)]);
  }
  return x;
}

/// A fresh copy of checkpoint `meta`'s model holding `state` (rebuilt by name, model_config and
/// structure as load_classifier does): what a search's trials each quantize.
inline std::function<std::shared_ptr<nn::Module>()> copies_of(const std::string& name, const nlohmann::json& meta,
                                                            std::map<std::string, Tensor> state) {
  return [name, meta, state = std::move(state)] {
    BuildOptions bo;
    bo.config = meta.value("model_config", nlohmann::json(nullptr));
    auto m = make_classifier(name, bo).module;
    if (meta.contains("structure")) passes::restore_structure(*m, meta["structure"]);
    m->load_state_dict(state);
    return m;
  };
}

}  // namespace qnum::pipeline
