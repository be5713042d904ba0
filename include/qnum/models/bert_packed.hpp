// Packed BERT classifiers: every Linear (encoder query/key/value/output, intermediate and
// output dense, pooler, classifier) replaced by a packed module — lab 4's nn::MXInt8PackedLinear
// (mase-cuda MXINT8 on the target device) or the W8A8 nn::Int8PackedLinear of a model
// quantized to 8-bit integer; embeddings and LayerNorms stay float32. And the byte accounting
// lab 4 reports: what the model holds, by kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/io/safetensors.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_surgery.hpp"
#include "qnum/nn/packed_embedding.hpp"
#include "qnum/nn/packed_int8_linear.hpp"
#include "qnum/nn/packed_linear.hpp"
#include "qnum/passes/structure.hpp"

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

/// A packed model's packed weights for a checkpoint: `bytes` the safetensors byte tensors,
/// "<path>.weight_codes" (I8 [out, in]: int8 codes, or MXINT8 mantissas) and for MXINT8
/// "<path>.weight_scales" (U8 [out, in/32]); `meta` the metadata's "packed" entry describing
/// each layer: {"kind": "int8" | "mxint8", "in": K, "out": N, "bias": bool, "quant": {...}
/// (int8: the data_in, weight and data_out formats, passes::quant_to_json)}, or for a packed
/// word table {"kind": "mxint8_embedding", "in": embedding_dim, "out": num_embeddings} (codes
/// [num, dim], scales [num, dim/32]). The biases and everything else stay in the float state_dict.
struct PackedState {
  nlohmann::json meta = nlohmann::json::object();
  std::map<std::string, ByteTensor> bytes;
};

inline PackedState packed_state(BertForSequenceClassification& model) {
  PackedState s;
  const auto i8 = [](const std::vector<std::int8_t>& v, Shape shape) {
    return ByteTensor{"I8", std::move(shape), std::vector<std::uint8_t>(v.begin(), v.end())};
  };
  for (auto& [path, m] : model.named_modules()) {
    if (auto* p = dynamic_cast<nn::Int8PackedLinear*>(m)) {
      nn::QuantConfig q = p->quant();
      q.weight = p->weight_format();
      s.meta[path] = {{"kind", "int8"}, {"in", p->in_features}, {"out", p->out_features},
                      {"bias", p->bias.defined()}, {"quant", passes::quant_to_json(q)}};
      s.bytes[path + ".weight_codes"] = i8(p->codes(), {p->out_features, p->in_features});
    } else if (auto* e = dynamic_cast<nn::MXInt8PackedEmbedding*>(m)) {
      qnum::detail::require(e->device().is_cpu(), "packed_state: '", path, "' is packed on ", e->device().str(),
                            "; save a model packed on the cpu");
      s.meta[path] = {{"kind", "mxint8_embedding"}, {"in", e->embedding_dim}, {"out", e->num_embeddings}};
      s.bytes[path + ".weight_codes"] = i8(e->packed().host_mantissa(), {e->num_embeddings, e->embedding_dim});
      s.bytes[path + ".weight_scales"] =
          ByteTensor{"U8", {e->num_embeddings, e->embedding_dim / 32}, e->packed().host_scale()};
    } else if (auto* x = dynamic_cast<nn::MXInt8PackedLinear*>(m)) {
      qnum::detail::require(x->device().is_cpu(), "packed_state: '", path, "' is packed on ", x->device().str(),
                            "; save a model packed on the cpu");
      s.meta[path] = {{"kind", "mxint8"}, {"in", x->in_features}, {"out", x->out_features}, {"bias", x->bias.defined()}};
      s.bytes[path + ".weight_codes"] = i8(x->packed().host_mantissa(), {x->out_features, x->in_features});
      const auto& sc = x->packed().host_scale();
      s.bytes[path + ".weight_scales"] = ByteTensor{"U8", {x->out_features, x->in_features / 32}, sc};
    }
  }
  return s;
}

/// Replaces the Linears `packed` (a PackedState's meta) names by packed modules built from
/// `bytes` (biases zero: the float state_dict fills them). qnum::Error naming the layer for an
/// unknown kind, a missing or misshapen byte tensor, or a layer that is not a Linear of that
/// shape; nothing is replaced unless every layer checks.
inline void restore_packed(BertForSequenceClassification& model, const nlohmann::json& packed,
                           const std::map<std::string, ByteTensor>& bytes) {
  using qnum::detail::require;
  require(packed.is_object(), "packed: must be an object of layers");
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> made;
  for (const auto& [path, layer] : packed.items()) {
    const std::string where = "packed layer '" + path + "'";
    require(layer.is_object() && layer.contains("kind") && layer["kind"].is_string() && layer.contains("in") &&
                layer["in"].is_number_integer() && layer.contains("out") && layer["out"].is_number_integer(),
            where, ": needs kind, in and out");
    const auto kind = layer["kind"].get<std::string>();
    const auto in = layer["in"].get<std::int64_t>(), out = layer["out"].get<std::int64_t>();
    require(in > 0 && out > 0 && in <= (std::int64_t{1} << 20) && out <= (std::int64_t{1} << 20), where, ": sizes ",
            out, " x ", in, " out of range");
    const auto codes = bytes.find(path + ".weight_codes");
    const auto scales = [&] {
      const auto sc = bytes.find(path + ".weight_scales");
      require(in % 32 == 0 && sc != bytes.end() && sc->second.dtype == "U8" && sc->second.shape == Shape{out, in / 32},
              where, ": tensor '", path, ".weight_scales' (U8 [", out, ", ", in / 32,
              "]) is missing or of another dtype or shape");
      return sc->second.data;
    };
    if (kind == "mxint8_embedding") {
      const auto* e = dynamic_cast<const nn::Embedding*>(&model.at(path));
      require(path == "bert.embeddings.word_embeddings" && e && e->num_embeddings == out && e->embedding_dim == in,
              where, ": the model has no ", out, " x ", in, " word table there (only BERT's word table is packed)");
      require(codes != bytes.end() && codes->second.dtype == "I8" && codes->second.shape == Shape{out, in}, where,
              ": tensor '", path, ".weight_codes' (I8 [", out, ", ", in, "]) is missing or of another dtype or shape");
      const auto* c = reinterpret_cast<const std::int8_t*>(codes->second.data.data());
      MXInt8MaseCuda q{std::vector<std::int8_t>(c, c + in * out), scales(), 32};
      made.emplace_back(path, std::make_shared<nn::MXInt8PackedEmbedding>(out, in, std::move(q)));
      continue;
    }
    const auto* lin = dynamic_cast<const nn::Linear*>(&model.at(path));
    require(lin && lin->in_features == in && lin->out_features == out, where, ": the model has no ", out, " x ", in,
            " Linear there");
    require(codes != bytes.end() && codes->second.dtype == "I8" && codes->second.shape == Shape{out, in}, where,
            ": tensor '", path, ".weight_codes' (I8 [", out, ", ", in, "]) is missing or of another dtype or shape");
    const auto* c = reinterpret_cast<const std::int8_t*>(codes->second.data.data());
    const Tensor bias = layer.value("bias", false) ? Tensor::zeros({out}) : Tensor();
    try {
      if (kind == "int8") {
        require(layer.contains("quant"), where, ": an int8 layer needs its formats ('quant')");
        const auto q = passes::quant_from_json(layer["quant"], where);
        made.emplace_back(path, std::make_shared<nn::Int8PackedLinear>(
                                    in, out, q, std::span<const std::int8_t>(c, static_cast<std::size_t>(in * out)), bias));
      } else if (kind == "mxint8") {
        MXInt8MaseCuda q{std::vector<std::int8_t>(c, c + in * out), scales(), 32};
        made.emplace_back(path, std::make_shared<nn::MXInt8PackedLinear>(in, out, std::move(q), bias));
      } else {
        qnum::detail::fail(where, ": unknown kind '", kind, "' (known: int8, mxint8, mxint8_embedding)");
      }
    } catch (const qnum::Error& e) {
      if (std::string(e.what()).rfind(where, 0) == 0) throw;
      qnum::detail::fail(where, ": ", e.what());
    }
  }
  for (auto& [path, m] : made) {
    if (auto e = std::dynamic_pointer_cast<nn::Embedding>(m)) {
      auto& emb = *model.bert->embeddings;
      emb.replace_module("word_embeddings", e);
      emb.word_embeddings = std::move(e);
    } else {
      replace_linear(model, path, std::move(m));
    }
  }
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
