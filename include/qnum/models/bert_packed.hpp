// Packed BERT classifiers: every Linear (encoder query/key/value/output, intermediate and
// output dense, pooler, classifier) replaced by a packed module — lab 4's nn::MXInt8PackedLinear
// (mase-cuda MXINT8 on the target device) or the W8A8 nn::Int8PackedLinear of a model
// quantized to 8-bit integer; embeddings and LayerNorms stay float32. And the byte accounting
// lab 4 reports: what the model holds, by kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qnum/models/bert.hpp"
#include "qnum/models/bert_surgery.hpp"
#include "qnum/nn/packed_embedding.hpp"
#include "qnum/nn/packed_int8_linear.hpp"
#include "qnum/nn/packed_linear.hpp"

namespace qnum::models {

/// What a pack_bert_linears_* call replaced.
struct PackReport {
  std::vector<std::string> paths;     ///< the Linears packed, in module order
  std::size_t fp32_weight_bytes = 0;  ///< their weights as float32
  std::size_t packed_bytes = 0;       ///< their packed weights (codes + scales or kernel layout)
};

/// Replaces every Linear of `model` by make(linear), a packed module with packed_bytes().
/// qnum::Error naming the Linear when one cannot be packed (the model is then partly packed:
/// pack a copy when the original must survive).
template <class MakePacked>
PackReport pack_bert_linears(BertForSequenceClassification& model, const char* what, MakePacked&& make) {
  PackReport r;
  for (auto& [path, m] : model.named_modules())
    if (dynamic_cast<nn::Linear*>(m) != nullptr) r.paths.push_back(path);
  for (const auto& path : r.paths) {
    auto& lin = dynamic_cast<nn::Linear&>(model.at(path));
    std::shared_ptr<nn::Module> packed;
    std::size_t bytes = 0;
    try {
      auto p = make(lin);
      bytes = p->packed_bytes();
      packed = std::move(p);
    } catch (const qnum::Error& e) {
      qnum::detail::fail(what, ": '", path, "': ", e.what());
    }
    r.fp32_weight_bytes += static_cast<std::size_t>(lin.weight.numel()) * sizeof(float);
    r.packed_bytes += bytes;
    replace_linear(model, path, packed);
  }
  return r;
}

/// Replaces every Linear of `model` by an MXInt8PackedLinear packed for `device` (see
/// nn/packed_linear.hpp): with the model's weights on the host and `device` a GPU, only the
/// packed bytes (and biases) are copied there. The rest of the model is left where it is
/// (move it with Module::to). qnum::Error when a Linear cannot be packed (names it).
inline PackReport pack_bert_linears_mxint8(BertForSequenceClassification& model, const Device& device) {
  return pack_bert_linears(model, "pack_bert_linears_mxint8",
                           [&](const nn::Linear& lin) { return std::make_shared<nn::MXInt8PackedLinear>(lin, device); });
}

/// Replaces every quantized Linear of `model` (data_in and weight on signed fixed point of <= 8
/// bits, e.g. after passes::quantize with MASE's integer 8-bit config) by an Int8PackedLinear:
/// int8 weight codes in the GEMM's layout, W8A8 products on AMX / VNNI (nn/packed_int8_linear.hpp).
inline PackReport pack_bert_linears_int8(BertForSequenceClassification& model) {
  return pack_bert_linears(model, "pack_bert_linears_int8",
                           [](const nn::Linear& lin) { return std::make_shared<nn::Int8PackedLinear>(lin); });
}

/// Replaces the word-embedding table (vocab × hidden, BERT-base's largest tensor) by an
/// nn::MXInt8PackedEmbedding for `device`; position and token-type tables stay float32.
/// Returns the table's float32 bytes and packed bytes.
inline std::pair<std::size_t, std::size_t> pack_bert_word_embeddings_mxint8(BertForSequenceClassification& model,
                                                                          const Device& device) {
  auto& emb = *model.bert->embeddings;
  const nn::Embedding& word = *emb.word_embeddings;
  const std::size_t fp32 = static_cast<std::size_t>(word.weight.numel()) * sizeof(float);
  auto packed = std::make_shared<nn::MXInt8PackedEmbedding>(word, device);
  const std::size_t bytes = packed->packed_bytes();
  emb.replace_module("word_embeddings", packed);
  emb.word_embeddings = packed;
  return {fp32, bytes};
}

/// The bytes a BERT classifier holds, by kind (float32 tensors at 4 bytes a value).
struct WeightBytes {
  std::size_t linear_weights = 0;  ///< fp32 Linear weights
  std::size_t packed = 0;          ///< packed Linear weights (MXINT8 mantissas + scales, or int8 codes)
  std::size_t linear_biases = 0;   ///< Linear biases (fp32 in both variants)
  std::size_t embeddings = 0;      ///< word, position and token-type tables (float32 ones)
  std::size_t packed_embeddings = 0;  ///< a packed MXINT8 word table (mantissas + scales)
  std::size_t layer_norms = 0;     ///< LayerNorm weights and biases
  std::size_t other = 0;           ///< anything else (none in BERT)
  std::size_t total() const {
    return linear_weights + packed + linear_biases + embeddings + packed_embeddings + layer_norms + other;
  }
};

inline WeightBytes bert_weight_bytes(BertForSequenceClassification& model) {
  WeightBytes b;
  for (auto& [path, m] : model.named_modules()) {
    if (auto* e = dynamic_cast<nn::MXInt8PackedEmbedding*>(m)) {
      b.packed_embeddings += e->packed_bytes();
      continue;
    }
    if (auto* p = dynamic_cast<nn::MXInt8PackedLinear*>(m)) {
      b.packed += p->packed_bytes();
      b.linear_biases += p->bias_bytes();
      continue;
    }
    if (auto* p = dynamic_cast<nn::Int8PackedLinear*>(m)) {
      b.packed += p->packed_bytes();
      b.linear_biases += p->bias_bytes();
      continue;
    }
    const bool linear = dynamic_cast<nn::Linear*>(m) != nullptr;
    const bool embedding = dynamic_cast<nn::Embedding*>(m) != nullptr;
    const bool layer_norm = dynamic_cast<nn::LayerNorm*>(m) != nullptr;
    auto add = [&](const std::string& name, const Tensor& t) {
      const auto bytes = static_cast<std::size_t>(t.numel()) * sizeof(float);
      if (linear)
        (name == "weight" ? b.linear_weights : name == "bias" ? b.linear_biases : b.other) += bytes;
      else if (embedding)
        b.embeddings += bytes;
      else if (layer_norm)
        b.layer_norms += bytes;
      else
        b.other += bytes;
    };
    // The module's own tensors only (children are visited on their own).
    for (auto& [name, t] : m->named_parameters())
      if (name.find('.') == std::string::npos) add(name, t);
    for (auto& [name, t] : m->named_buffers())
      if (name.find('.') == std::string::npos) add(name, t);
  }
  return b;
}

}  // namespace qnum::models
