// `qnum train bert-tiny imdb ...` and `qnum test bert-tiny imdb --load CKPT`: BERT on the
// text datasets (imdb through QNUM_DATA_DIR, text-synthetic offline) with the Trainer
// (include/qnum/train/trainer.hpp). TrainCommand / TestCommand hand BERT model names
// here. A run writes <output>/config.json (Hugging Face's keys) beside its checkpoints, so
// the directory loads into transformers and `qnum test` rebuilds the same sizes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/hf_hub.hpp"
#include "qnum/data/text.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_hf.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/trainer.hpp"
#include "qnum/io/config_file.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/pipeline/registry.hpp"

namespace qnum::pipeline {

/// The BERT-specific options of `qnum train` / `qnum test` (unset: the defaults).
struct BertRunOptions {
  std::string model, dataset, load, quantize;
  std::string device = "cpu";
  std::optional<int> threads;
  std::optional<std::int64_t> batch_size, max_length, limit, lora_rank;
  bool json = false;
};

/// The BERT config of a run: config.json beside `load` (an HF checkpoint directory or a qnum
/// run) when present, else `model`'s (a preset, bert:L-H-A-I, an alias of one or a folder); vocab_size follows the tokenizer of a
/// dataset with its own vocabulary (text-synthetic).
inline models::BertConfig bert_run_config(const std::string& model, const std::string& load,
                                          const data::TextSplits& data) {
  if (!load.empty()) {
    const auto beside = std::filesystem::path(load).parent_path() / "config.json";
    if (std::filesystem::exists(beside)) return models::BertConfig::from_file(beside);
  }
  models::BertConfig c = bert_config_of(model);
  if (data.tokenizer && data.tokenizer->vocab_size() != c.vocab_size) c.vocab_size = data.tokenizer->vocab_size();
  return c;
}

/// A quantize config file (TOML or JSON, read as the --config files are; a [passes.quantize]
/// table or the config itself).
inline nlohmann::json read_quantize_config(const std::string& path) {
  const nlohmann::json j = io::toml_file_as_json(path);
  if (j.contains("passes") && j["passes"].contains("quantize")) return j["passes"]["quantize"];
  if (j.contains("quantize")) return j["quantize"];
  return j;
}

/// Loads `load` into `m`: a qnum checkpoint (its structure first) or a Hugging Face file.
inline nlohmann::json load_bert_weights(models::BertForSequenceClassification& m, const std::string& load) {
  if (std::filesystem::path(load).extension() == ".bin") {  // torch.save: a Hugging Face checkpoint
    const auto r = models::load_hf_bert(m, load);
    std::printf("load     %s: %lld Hugging Face tensors\n", load.c_str(), static_cast<long long>(r.loaded));
    return nlohmann::json::object();
  }
  const auto meta = train::read_checkpoint_meta(load);
  if (meta.contains("format")) {
    if (meta.contains("structure")) passes::restore_structure(m, meta["structure"]);
    return train::load_checkpoint(load, m, nullptr);
  }
  const auto r = models::load_hf_bert(m, train::detail::tensor_file(load));
  std::printf("load     %s: %lld Hugging Face tensors", load.c_str(), static_cast<long long>(r.loaded));
  if (!r.missing.empty()) std::printf(", %zu kept at initialisation (e.g. %s)", r.missing.size(), r.missing[0].c_str());
  if (!r.ignored.empty()) std::printf(", %zu ignored", r.ignored.size());
  std::printf("\n");
  return nlohmann::json::object();
}

/// Applies the run's --quantize config and --lora-rank adapters to `m` (before training).
inline void apply_bert_passes(models::BertForSequenceClassification& m, const BertRunOptions& o) {
  if (!o.quantize.empty()) {
    const auto report = passes::quantize(m, read_quantize_config(o.quantize));
    std::printf("quantize %s\n", passes::summary_table(passes::summarize_quantization(report)).c_str());
  }
  if (o.lora_rank) {
    passes::LoraConfig lc;
    lc.rank = *o.lora_rank;
    lc.target = ".*attention\\.self\\.(query|value)";
    lc.trainable = {"classifier", "bert\\.pooler\\.dense"};
    passes::insert_lora(m, lc);
    std::printf("lora     rank %lld on query/value: %lld of %lld parameters trainable\n",
                static_cast<long long>(lc.rank), static_cast<long long>(m.num_parameters(true)),
                static_cast<long long>(m.num_parameters()));
  }
}

/// A tokenizer's fingerprint as checkpoints record it (16 hex digits).
inline std::string tokenizer_fingerprint_hex(const data::WordPieceTokenizer& tok) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tok.fingerprint()));
  return hex;
}

/// What a BERT checkpoint records beyond the trainer's metadata: the model's config
/// (Hugging Face's keys) and the tokenizer's fingerprint (hex), so that later commands
/// rebuild the model and refuse text tokenized another way.
inline nlohmann::json bert_metadata(const models::BertConfig& bc, const data::TextSplits& data) {
  nlohmann::json j{{"model_config", bc.to_json()}};
  if (data.tokenizer) j["tokenizer_fingerprint"] = tokenizer_fingerprint_hex(*data.tokenizer);
  return j;
}

/// The tokenizer the checkpoint `load` (metadata `meta`) was trained with: `vocab` (a
/// vocab.txt) when given, else its dataset's; either must have the fingerprint the checkpoint
/// records. A checkpoint that records none is refused without `vocab` (`command` names the
/// caller in errors; `vocab_option` is how the caller takes a vocab.txt, empty when it takes none).
inline std::shared_ptr<const data::WordPieceTokenizer> checkpoint_tokenizer(const nlohmann::json& meta,
                                                                            const std::string& load,
                                                                            const std::string& command,
                                                                            const std::filesystem::path& vocab = {},
                                                                            const std::string& vocab_option = {}) {
  const bool recorded = meta.contains("tokenizer_fingerprint") && meta["tokenizer_fingerprint"].is_string();
  std::shared_ptr<const data::WordPieceTokenizer> tok;
  std::string source;
  if (!vocab.empty()) {
    tok = std::make_shared<const data::WordPieceTokenizer>(data::WordPieceTokenizer::from_file(vocab));
    source = "vocabulary '" + vocab.string() + "'";
  } else {
    qnum::detail::require(recorded && meta.contains("dataset") && meta["dataset"].is_string(), command,
                          ": checkpoint '", load, "' records no tokenizer fingerprint, so its vocabulary is unknown (",
                          vocab_option.empty() ? std::string("train it with this qnum")
                                               : "pass " + vocab_option + " FILE, the vocab.txt it was trained with",
                          ")");
    const std::string dataset = meta["dataset"].get<std::string>();
    tok = data::text_dataset_tokenizer(dataset);
    source = "the tokenizer of '" + dataset + "'";
  }
  if (recorded) {
    const std::string hex = tokenizer_fingerprint_hex(*tok), want = meta["tokenizer_fingerprint"].get<std::string>();
    qnum::detail::require(hex == want, command, ": ", source, " (fingerprint ", hex,
                          ") is not the one checkpoint '", load, "' was trained with (", want, ")");
  }
  return tok;
}

}  // namespace qnum::pipeline
