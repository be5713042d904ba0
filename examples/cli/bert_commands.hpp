// `qnum train bert-tiny imdb ...` and `qnum test bert-tiny imdb --load CKPT`: BERT on the
// text datasets (imdb through QNUM_DATA_DIR, text-synthetic offline) with the TextTrainer
// (include/qnum/train/text_trainer.hpp). TrainCommand / TestCommand hand BERT model names
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
#include "qnum/passes/lora.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/text_trainer.hpp"
#include "transform_command.hpp"

namespace qnum::cli {

/// The BERT-specific options of `qnum train` / `qnum test` (unset: the defaults).
struct BertRunOptions {
  std::string model, dataset, output_dir, load, quantize;
  std::optional<int> max_epochs, threads;
  std::optional<std::int64_t> batch_size, max_length, limit, lora_rank;
  std::optional<double> learning_rate, weight_decay, warmup_ratio, max_grad_norm;
  std::optional<std::uint64_t> seed;
  bool progress = true, json = false;
};

namespace detail {

/// The text splits of `name` tokenized to max_length (limit > 0: rows per split).
inline data::TextSplits load_text_splits(const std::string& name, std::int64_t max_length, std::int64_t limit,
                                         const std::filesystem::path& vocab = {}) {
  data::ImdbOptions io;
  io.max_length = max_length;
  io.limit = limit;
  io.vocab = vocab;
  data::TextSyntheticOptions so;
  if (limit > 0) {
    so.train = std::min(so.train, limit);
    so.val = std::min(so.val, limit);
    so.test = std::min(so.test, limit);
  }
  return data::load_text_dataset(name, io, so);
}

/// The vocab.txt beside a pretrained checkpoint (a downloaded HF folder), if there is one.
inline std::filesystem::path vocab_beside(const std::string& load) {
  if (load.empty()) return {};
  const auto v = std::filesystem::path(load).parent_path() / "vocab.txt";
  return std::filesystem::is_regular_file(v) ? v : std::filesystem::path();
}

/// The BERT config of a run: config.json beside `load` (an HF checkpoint directory or a qnum
/// run) when present, else the preset of `model`; vocab_size follows the tokenizer of a
/// dataset with its own vocabulary (text-synthetic).
inline models::BertConfig bert_run_config(const std::string& model, const std::string& load,
                                          const data::TextSplits& data) {
  if (!load.empty()) {
    const auto beside = std::filesystem::path(load).parent_path() / "config.json";
    if (std::filesystem::exists(beside)) return models::BertConfig::from_file(beside);
  }
  models::BertConfig c = models::bert_config(model);
  if (data.tokenizer && data.tokenizer->vocab_size() != c.vocab_size) c.vocab_size = data.tokenizer->vocab_size();
  return c;
}

/// A quantize config file (TOML or JSON; a [passes.quantize] table or the config itself).
inline nlohmann::json read_quantize_config(const std::string& path) {
  nlohmann::json j;
  if (std::filesystem::path(path).extension() == ".json") {
    j = nlohmann::json::parse(read_file(path), nullptr, false);
    qnum::detail::require(!j.is_discarded(), "--quantize: '", path, "' is not valid JSON");
  } else {
    j = toml_file_as_json(path);
  }
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

}  // namespace detail

/// `qnum train <bert> <text dataset>`.
inline void run_bert_train(const BertRunOptions& o) {
  train::TextTrainConfig c;
  c.model = o.model;
  c.dataset = o.dataset;
  if (o.max_epochs) c.max_epochs = *o.max_epochs;
  if (o.batch_size) c.batch_size = *o.batch_size;
  if (o.learning_rate) c.learning_rate = *o.learning_rate;
  if (o.weight_decay) c.weight_decay = *o.weight_decay;
  if (o.warmup_ratio) c.warmup_ratio = *o.warmup_ratio;
  if (o.max_grad_norm) c.max_grad_norm = *o.max_grad_norm;
  if (o.max_length) c.max_length = *o.max_length;
  if (o.seed) c.seed = *o.seed;
  if (o.threads) c.threads = *o.threads;
  if (!o.output_dir.empty()) c.output_dir = o.output_dir;
  c.progress = o.progress;
  train::validate(c);
  qnum::detail::require(c.max_length >= 2, "train: --max-length must be >= 2 ([CLS] and [SEP]), got ", c.max_length);
  if (c.threads > 0) set_num_threads(c.threads);

  // --load: a qnum checkpoint, an HF file or folder, or a hub name (downloaded once into the cache).
  const std::string load = o.load.empty() ? "" : data::resolve_pretrained(o.load).string();
  const data::TextSplits data =
      detail::load_text_splits(c.dataset, c.max_length, o.limit.value_or(0), detail::vocab_beside(load));
  const models::BertConfig bc = detail::bert_run_config(c.model, load, data);
  qnum::detail::require(c.max_length <= bc.max_position_embeddings, "train: --max-length ", c.max_length,
                        " exceeds the model's max_position_embeddings ", bc.max_position_embeddings);
  auto model = std::make_shared<models::BertForSequenceClassification>(bc, o.seed.value_or(0));
  if (!load.empty()) detail::load_bert_weights(*model, load);
  if (!o.quantize.empty()) {
    const auto report = passes::quantize(*model, detail::read_quantize_config(o.quantize));
    std::printf("quantize %s\n", passes::summary_table(passes::summarize_quantization(report)).c_str());
  }
  if (o.lora_rank) {
    passes::LoraConfig lc;
    lc.rank = *o.lora_rank;
    lc.target = ".*attention\\.self\\.(query|value)";
    lc.trainable = {"classifier", "bert\\.pooler\\.dense"};
    const auto r = passes::insert_lora(*model, lc);
    std::printf("lora     rank %lld on query/value: %lld of %lld parameters trainable\n",
                static_cast<long long>(lc.rank), static_cast<long long>(model->num_parameters(true)),
                static_cast<long long>(model->num_parameters()));
    (void)r;
  }

  train::TextTrainer trainer(model, train::bert_forward(model), c);
  std::printf("train    %s (%lld parameters; %lld layers, hidden %lld, heads %lld, intermediate %lld) on %s\n",
              c.model.c_str(), static_cast<long long>(model->num_parameters()),
              static_cast<long long>(bc.num_hidden_layers), static_cast<long long>(bc.hidden_size),
              static_cast<long long>(bc.num_attention_heads), static_cast<long long>(bc.intermediate_size),
              c.dataset.c_str());
  std::printf("data     %s\n", data.summary().c_str());
  std::printf(
      "settings max_epochs %d, batch_size %lld, learning_rate %g (AdamW, %s per step, warmup_ratio %g), "
      "weight_decay %g, max_grad_norm %g, max_length %lld, seed %llu\n",
      c.max_epochs, static_cast<long long>(c.batch_size), c.learning_rate, c.schedule.c_str(), c.warmup_ratio,
      c.weight_decay, c.max_grad_norm, static_cast<long long>(c.max_length), static_cast<unsigned long long>(c.seed));
  std::printf("output   %s\n", trainer.output_dir().string().c_str());
  std::fflush(stdout);
  std::filesystem::create_directories(trainer.output_dir());
  write_file_atomic(trainer.output_dir() / "config.json", bc.to_json().dump(2) + "\n");

  const auto records = trainer.fit(data.train, data.val);

  // The test set on the best checkpoint.
  auto best = std::make_shared<models::BertForSequenceClassification>(bc, 0);
  const auto meta = detail::load_bert_weights(*best, trainer.best_checkpoint().string());
  const auto ev = train::evaluate_text(*best, train::bert_forward(best), data.test, c.eval_batch_size);
  const int best_epoch = meta.value("epoch", 0);
  std::printf("test     loss %.6f accuracy %.4f (%lld rows; best checkpoint, epoch %d)\n", ev.loss, ev.accuracy,
              static_cast<long long>(ev.count), best_epoch);
  std::printf("best     %s (epoch %d, val_loss %.6f)\n", trainer.best_checkpoint().string().c_str(), best_epoch,
              trainer.best_val_loss());
  std::printf("last     %s (epoch %d)\n", trainer.last_checkpoint().string().c_str(),
              records.empty() ? 0 : records.back().epoch);
  std::printf("metrics  %s\n", trainer.metrics_file().string().c_str());
}

/// `qnum test <bert> <text dataset> --load CKPT`: loss and accuracy on the test split.
inline void run_bert_test(const BertRunOptions& o) {
  qnum::detail::require(!o.load.empty(), "test: --load is required");
  const std::string load = data::resolve_pretrained(o.load).string();
  const auto meta = std::filesystem::path(load).extension() == ".bin" ? nlohmann::json::object()
                                                                      : train::read_checkpoint_meta(load);
  std::int64_t max_length = 512;
  if (meta.contains("config") && meta["config"].contains("max_length") && meta["config"]["max_length"].is_number())
    max_length = meta["config"]["max_length"].get<std::int64_t>();
  if (o.max_length) max_length = *o.max_length;
  if (o.threads && *o.threads > 0) set_num_threads(*o.threads);
  const data::TextSplits data =
      detail::load_text_splits(o.dataset, max_length, o.limit.value_or(0), detail::vocab_beside(load));
  auto model = std::make_shared<models::BertForSequenceClassification>(detail::bert_run_config(o.model, load, data), 0);
  detail::load_bert_weights(*model, load);
  const auto ev = train::evaluate_text(*model, train::bert_forward(model), data.test, o.batch_size.value_or(64));
  if (o.json) {
    const nlohmann::json j{{"model", o.model},        {"dataset", o.dataset},    {"checkpoint", o.load},
                           {"split", "test"},         {"count", ev.count},       {"loss", ev.loss},
                           {"accuracy", ev.accuracy}, {"max_length", max_length}};
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("test %s on %s (test split, %lld rows, max_length %lld), checkpoint %s\n", o.model.c_str(),
              o.dataset.c_str(), static_cast<long long>(ev.count), static_cast<long long>(max_length), o.load.c_str());
  std::printf("loss      %.6f\naccuracy  %.4f\n", ev.loss, ev.accuracy);
}

}  // namespace qnum::cli
