// The model registry (the pipeline's first step): a name gives the model, its input kind (feature rows or tokenized
// text), its default training recipe and its metrics, so every command and lab program
// takes any registered model the same way.
//
// Built in: MASE's JSC zoo (jsc-tiny, jsc-s, ..., jsc-mlp:16-64-5; feature rows, MASE's
// recipe), MASE's toy (ToyNet on feature rows, models/toy.hpp), BERT (bert-tiny ...
// bert-base, bert:L-H-A-I, or a folder holding a Hugging Face config.json; tokens, the text
// recipe). A program adds its own models by name with
// register_model (a Module of the program, or an architecture string such as
// "jsc-mlp:16-32-16-5" under a new name); names registered so take precedence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/forward.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/models/toy.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/train/recipe.hpp"

namespace qnum::pipeline {

/// What a model takes: rows of features [B, F], or token ids (data::TokenDataset batches).
enum class InputKind { features, tokens };

inline const char* kind_name(InputKind k) { return k == InputKind::tokens ? "tokenized text" : "feature rows"; }

/// What building a model may depend on besides its name.
struct BuildOptions {
  std::uint64_t seed = 0;  ///< the initialisation
  /// tokens: the tokenizer's vocabulary size (0: the preset's), and a saved model config
  /// (Hugging Face's keys, e.g. a checkpoint's "model_config"; null: the name's preset).
  std::int64_t vocab_size = 0;
  nlohmann::json config = nullptr;
};

/// A built model: the module, the function mapping a batch to logits, and what rebuilds it.
struct Classifier {
  std::shared_ptr<nn::Module> module;
  models::Forward forward;
  InputKind input = InputKind::features;
  nlohmann::json config = nullptr;  ///< tokens: the BERT config (Hugging Face's keys)
};

/// One registered model (or family of names).
struct ModelSpec {
  InputKind input = InputKind::features;
  std::function<Classifier(std::string_view name, const BuildOptions&)> build;
  /// The default recipe (model name filled in by default_recipe()).
  std::function<train::TrainConfig()> recipe = train::table_recipe;
  /// The metrics its commands report (evaluate(): loss and accuracy).
  std::vector<std::string> metrics{"loss", "accuracy"};
  std::string description;
  /// A name registered for an architecture string: that string (else empty).
  std::string architecture;
};

namespace detail {

inline std::map<std::string, ModelSpec, std::less<>>& user_models() {
  static std::map<std::string, ModelSpec, std::less<>> m;
  return m;
}

inline Classifier build_jsc(std::string_view name, const BuildOptions& o) {
  auto m = models::make_jsc_model(name, o.seed);
  return {m, models::features_forward(std::shared_ptr<nn::Module>(m)), InputKind::features, nullptr};
}

inline Classifier build_toy(std::string_view, const BuildOptions& o) {
  std::shared_ptr<nn::Module> m = models::make_toy_model(o.seed);
  return {m, models::features_forward(m), InputKind::features, nullptr};
}

inline const ModelSpec& toy_spec() {
  static const ModelSpec s{InputKind::features, build_toy, train::table_recipe, {"loss", "accuracy"},
                           "MASE's toy (ToyNet: Linear 16-8, ReLU, Linear 8-8, ReLU, Linear 8-5)", ""};
  return s;
}

inline bool is_bert_folder(std::string_view name) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(name) / "config.json", ec);
}

inline Classifier build_bert(std::string_view name, const BuildOptions& o) {
  models::BertConfig c = !o.config.is_null()  ? models::BertConfig::from_json(o.config, "the checkpoint's model_config")
                 : is_bert_folder(name) ? models::BertConfig::from_file(std::filesystem::path(name) / "config.json")
                                        : models::bert_config(name);
  if (o.config.is_null() && o.vocab_size > 0) c.vocab_size = o.vocab_size;
  auto m = std::make_shared<models::BertForSequenceClassification>(c, o.seed);
  return {m, models::bert_forward(m), InputKind::tokens, c.to_json()};
}

inline const ModelSpec& jsc_spec() {
  static const ModelSpec s{InputKind::features, build_jsc, train::table_recipe, {"loss", "accuracy"},
                           "MASE's JSC zoo", ""};
  return s;
}

inline const ModelSpec& bert_spec() {
  static const ModelSpec s{InputKind::tokens, build_bert, train::text_recipe, {"loss", "accuracy"},
                           "BERT for sequence classification", ""};
  return s;
}

}  // namespace detail

/// Every built-in and registered model name, for messages.
inline std::string known_model_names() {
  std::string s;
  for (const auto& [n, spec] : detail::user_models()) s += (s.empty() ? "" : ", ") + n;
  for (const auto& n : models::jsc_model_names()) s += (s.empty() ? "" : ", ") + n;
  s += ", toy; BERT:";
  for (const auto& n : models::bert_model_names()) s += " " + n;
  s += ", or a folder with a Hugging Face config.json";
  return s;
}

/// The spec of `name`, or nullptr when nothing is registered under it.
inline const ModelSpec* find_model(std::string_view name) {
  if (auto it = detail::user_models().find(name); it != detail::user_models().end()) return &it->second;
  if (name == "toy") return &detail::toy_spec();
  if (models::is_bert_model(name) || detail::is_bert_folder(name)) return &detail::bert_spec();
  // Architecture strings of the JSC family: a bad one is models::make_jsc_model's error, not "unknown".
  if (name.starts_with("jsc-mlp:") || name.starts_with("jsc-seq:")) return &detail::jsc_spec();
  try {
    models::make_jsc_model(name, 0);
    return &detail::jsc_spec();
  } catch (const qnum::Error&) {
    return nullptr;
  }
}

/// The spec of `name`; an unknown name is a qnum::Error listing the known ones.
inline const ModelSpec& model_spec(std::string_view name) {
  if (const ModelSpec* s = find_model(name)) return *s;
  qnum::detail::fail("unknown model '", name, "' (known: ", known_model_names(), ")",
                     name == "jsc-m" ? "; MASE has no jsc-m: give the widths, e.g. jsc-mlp:16-64-32-32-5"
                                     : "; a model of your own is registered by name: pipeline::register_model in C++, "
                                       "or a QNUM_MODELS file for the qnum programs (docs/models.md)");
}

/// The architecture `name` stands for: a registered alias followed to its architecture string,
/// any other name as it is.
inline std::string model_architecture(std::string_view name) {
  const ModelSpec* s = find_model(name);
  return s != nullptr && !s->architecture.empty() ? s->architecture : std::string(name);
}

/// The BERT config of a token model's name: a preset or bert:L-H-A-I (also through a
/// registered alias), or the config.json of a Hugging Face folder.
inline models::BertConfig bert_config_of(std::string_view name) {
  const std::string arch = model_architecture(name);
  qnum::detail::require(model_spec(arch).input == InputKind::tokens, "model '", name, "' is not a BERT (it takes ",
                        kind_name(model_spec(arch).input), ")");
  return detail::is_bert_folder(arch) ? models::BertConfig::from_file(std::filesystem::path(arch) / "config.json")
                                      : models::bert_config(arch);
}

/// Builds `name` (see BuildOptions).
inline Classifier make_classifier(std::string_view name, const BuildOptions& o = {}) {
  Classifier c = model_spec(name).build(name, o);
  qnum::detail::require(c.module != nullptr && c.forward != nullptr, "model '", name, "': its factory built nothing");
  return c;
}

/// The default recipe of `name`, its model name set.
inline train::TrainConfig default_recipe(std::string_view name) {
  train::TrainConfig c = model_spec(name).recipe();
  c.model = std::string(name);
  return c;
}

/// Registers a model of feature rows built by `factory(seed)` under `name` (the table
/// recipe unless `recipe` is given). Replaces an earlier registration of the name.
inline void register_model(std::string name, std::function<std::shared_ptr<nn::Module>(std::uint64_t seed)> factory,
                           std::function<train::TrainConfig()> recipe = train::table_recipe,
                           std::string description = "") {
  qnum::detail::require(!name.empty() && factory != nullptr, "register_model: a name and a factory are required");
  ModelSpec s;
  s.input = InputKind::features;
  s.recipe = std::move(recipe);
  s.description = std::move(description);
  s.build = [factory = std::move(factory), name](std::string_view, const BuildOptions& o) {
    std::shared_ptr<nn::Module> m = factory(o.seed);
    qnum::detail::require(m != nullptr, "model '", name, "': its factory returned null");
    return Classifier{m, models::features_forward(m), InputKind::features, nullptr};
  };
  detail::user_models()[std::move(name)] = std::move(s);
}

/// Registers an architecture string of a built-in family (e.g. "jsc-mlp:16-32-16-5",
/// "bert:2-128-2-512") under `name`, with that family's recipe.
inline void register_model(std::string name, std::string architecture) {
  const ModelSpec& base = model_spec(architecture);
  ModelSpec s = base;
  s.description = architecture;
  s.architecture = architecture;
  s.build = [build = base.build, architecture](std::string_view, const BuildOptions& o) {
    return build(architecture, o);
  };
  detail::user_models()[std::move(name)] = std::move(s);
}

}  // namespace qnum::pipeline
