// BERT's configuration (Hugging Face's BertConfig under its config.json names): the sizes,
// dropout, vocabulary and label count, validation, JSON in and out (a config.json file or
// text), and the presets by name — bert-tiny (2 layers, hidden 128, 2 heads, intermediate 512:
// 4,386,178 parameters with 2 labels), bert-mini, bert-small, bert-medium, bert-base, or
// bert:L-H-A-I (layers-hidden-heads-intermediate, any sizes). The modules are models/bert.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"

namespace qnum::models {

/// BERT's sizes and settings under Hugging Face's config.json names.
struct BertConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 128;
  std::int64_t num_hidden_layers = 2;
  std::int64_t num_attention_heads = 2;
  std::int64_t intermediate_size = 512;
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double classifier_dropout = -1;  ///< < 0: HF's null (use hidden_dropout_prob)
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  std::int64_t num_labels = 2;

  /// Checks sizes (positive, hidden divisible by heads), probabilities and the activation.
  void validate() const {
    using qnum::detail::require;
    for (auto [v, name] : {std::pair{vocab_size, "vocab_size"},
                           {hidden_size, "hidden_size"},
                           {num_hidden_layers, "num_hidden_layers"},
                           {num_attention_heads, "num_attention_heads"},
                           {intermediate_size, "intermediate_size"},
                           {max_position_embeddings, "max_position_embeddings"},
                           {type_vocab_size, "type_vocab_size"},
                           {num_labels, "num_labels"}})
      require(v > 0, "BertConfig: ", name, " must be > 0, got ", v);
    require(hidden_size % num_attention_heads == 0, "BertConfig: hidden_size ", hidden_size,
            " is not a multiple of num_attention_heads ", num_attention_heads);
    require(hidden_act == "gelu", "BertConfig: hidden_act '", hidden_act,
            "' is not supported (qnum's BERT has the exact erf GELU, \"gelu\")");
    for (auto [p, name] : {std::pair{hidden_dropout_prob, "hidden_dropout_prob"},
                           {attention_probs_dropout_prob, "attention_probs_dropout_prob"}})
      require(p >= 0.0 && p < 1.0, "BertConfig: ", name, " ", p, " must be in [0, 1)");
    require(classifier_dropout < 1.0, "BertConfig: classifier_dropout ", classifier_dropout, " must be < 1");
    require(layer_norm_eps > 0.0 && std::isfinite(layer_norm_eps), "BertConfig: layer_norm_eps must be > 0");
    require(initializer_range >= 0.0 && std::isfinite(initializer_range), "BertConfig: initializer_range must be >= 0");
  }

  /// HF config.json fields (model_type "bert", id2label/label2id for num_labels).
  nlohmann::json to_json() const {
    nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
    for (std::int64_t i = 0; i < num_labels; ++i) {
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
      label2id["LABEL_" + std::to_string(i)] = i;
    }
    return {
        {"architectures", {"BertForSequenceClassification"}},
        {"model_type", "bert"},
        {"vocab_size", vocab_size},
        {"hidden_size", hidden_size},
        {"num_hidden_layers", num_hidden_layers},
        {"num_attention_heads", num_attention_heads},
        {"intermediate_size", intermediate_size},
        {"hidden_act", hidden_act},
        {"hidden_dropout_prob", hidden_dropout_prob},
        {"attention_probs_dropout_prob", attention_probs_dropout_prob},
        {"classifier_dropout", classifier_dropout < 0 ? nlohmann::json(nullptr) : nlohmann::json(classifier_dropout)},
        {"max_position_embeddings", max_position_embeddings},
        {"type_vocab_size", type_vocab_size},
        {"layer_norm_eps", layer_norm_eps},
        {"initializer_range", initializer_range},
        {"position_embedding_type", "absolute"},
        {"id2label", id2label},
        {"label2id", label2id}};
  }

  /// Reads HF config.json content: known keys must have the right JSON type (else a
  /// qnum::Error naming the key), unknown keys are ignored as transformers does. num_labels
  /// comes from "num_labels" or the size of "id2label". The result is validated.
  static BertConfig from_json(const nlohmann::json& j, const std::string& what = "config.json") {
    qnum::detail::require(j.is_object(), what, ": expected a JSON object");
    BertConfig c;
    auto integer = [&](const char* key, std::int64_t& field) {
      if (!j.contains(key)) return;
      qnum::detail::require(j[key].is_number_integer(), what, ": '", key, "' must be an integer, got ", j[key].dump());
      field = j[key].get<std::int64_t>();
    };
    auto number = [&](const char* key, double& field, bool nullable = false) {
      if (!j.contains(key)) return;
      if (nullable && j[key].is_null()) return;
      qnum::detail::require(j[key].is_number(), what, ": '", key, "' must be a number, got ", j[key].dump());
      field = j[key].get<double>();
    };
    if (j.contains("model_type"))
      qnum::detail::require(j["model_type"].is_string() && j["model_type"].get<std::string>() == "bert", what,
                            ": model_type ", j["model_type"].dump(), " is not \"bert\"");
    if (j.contains("position_embedding_type"))
      qnum::detail::require(
          j["position_embedding_type"].is_string() && j["position_embedding_type"].get<std::string>() == "absolute",
          what, ": position_embedding_type ", j["position_embedding_type"].dump(),
          " is not supported (only \"absolute\")");
    integer("vocab_size", c.vocab_size);
    integer("hidden_size", c.hidden_size);
    integer("num_hidden_layers", c.num_hidden_layers);
    integer("num_attention_heads", c.num_attention_heads);
    integer("intermediate_size", c.intermediate_size);
    integer("max_position_embeddings", c.max_position_embeddings);
    integer("type_vocab_size", c.type_vocab_size);
    number("hidden_dropout_prob", c.hidden_dropout_prob);
    number("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
    number("classifier_dropout", c.classifier_dropout, true);
    number("layer_norm_eps", c.layer_norm_eps);
    number("initializer_range", c.initializer_range);
    if (j.contains("hidden_act")) {
      qnum::detail::require(j["hidden_act"].is_string(), what, ": 'hidden_act' must be a string, got ",
                            j["hidden_act"].dump());
      c.hidden_act = j["hidden_act"].get<std::string>();
    }
    if (j.contains("id2label")) {
      qnum::detail::require(j["id2label"].is_object(), what, ": 'id2label' must be an object, got ",
                            j["id2label"].dump());
      if (!j["id2label"].empty()) c.num_labels = static_cast<std::int64_t>(j["id2label"].size());
    }
    integer("num_labels", c.num_labels);
    try {
      c.validate();
    } catch (const Error& e) {
      qnum::detail::fail(what, ": ", e.what());
    }
    return c;
  }

  /// Reads a config.json file (errors name the file; malformed JSON is an error).
  static BertConfig from_file(const std::filesystem::path& path) {
    const std::string what = "BERT config '" + path.string() + "'";
    qnum::detail::require(std::filesystem::exists(path), what, " not found");
    return from_json_text(read_file(path), what);
  }

  /// A config.json's text already in memory (as from_file reads it); `what` names it in errors.
  static BertConfig from_json_text(std::string_view text, const std::string& what = "config.json") {
    const auto j = io::parse_json(text, what, false);
    qnum::detail::require(!j.is_discarded(), what, " is not valid JSON");
    return from_json(j, what);
  }
};

/// The BERT model names bert_config knows (bert:L-H-A-I takes any sizes).
inline std::vector<std::string> bert_model_names() {
  return {"bert-tiny", "bert-mini", "bert-small", "bert-medium", "bert-base", "bert:L-H-A-I"};
}

/// True when `name` is a BERT model name (a preset or bert:...).
inline bool is_bert_model(std::string_view name) { return name.starts_with("bert-") || name.starts_with("bert:"); }

/// The config of a preset (Google's BERT miniatures, as prajjwal1/bert-*, and bert-base) or of
/// bert:L-H-A-I = layers-hidden-heads-intermediate (I defaults to 4·H); vocab 30,522, 512
/// positions, 2 labels unless `num_labels` says otherwise.
inline BertConfig bert_config(std::string_view name, std::int64_t num_labels = 2) {
  BertConfig c;
  c.num_labels = num_labels;
  auto set = [&](std::int64_t l, std::int64_t h, std::int64_t a) {
    c.num_hidden_layers = l;
    c.hidden_size = h;
    c.num_attention_heads = a;
    c.intermediate_size = 4 * h;
  };
  if (name == "bert-tiny") {
    set(2, 128, 2);
  } else if (name == "bert-mini") {
    set(4, 256, 4);
  } else if (name == "bert-small") {
    set(4, 512, 8);
  } else if (name == "bert-medium") {
    set(8, 512, 8);
  } else if (name == "bert-base") {
    set(12, 768, 12);
  } else if (name.starts_with("bert:")) {
    std::vector<std::int64_t> v;
    std::string_view rest = name.substr(5);
    while (true) {
      const auto dash = rest.find('-');
      const std::string part(rest.substr(0, dash));
      std::size_t used = 0;
      long long x = 0;
      try {
        x = std::stoll(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      qnum::detail::require(!part.empty() && used == part.size() && x > 0, "BERT model '", name, "': '", part,
                            "' is not a positive integer (expected bert:LAYERS-HIDDEN-HEADS[-INTERMEDIATE])");
      v.push_back(x);
      if (dash == std::string_view::npos) break;
      rest = rest.substr(dash + 1);
    }
    qnum::detail::require(v.size() == 3 || v.size() == 4, "BERT model '", name,
                          "': expected bert:LAYERS-HIDDEN-HEADS[-INTERMEDIATE], got ", v.size(), " numbers");
    set(v[0], v[1], v[2]);
    if (v.size() == 4) c.intermediate_size = v[3];
  } else {
    std::string known;
    for (const auto& n : bert_model_names()) known += (known.empty() ? "" : ", ") + n;
    qnum::detail::fail("unknown BERT model '", name, "' (known: ", known, ")");
  }
  c.validate();
  return c;
}

}  // namespace qnum::models
