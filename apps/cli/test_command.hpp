// `qnum test MODEL DATASET --load CKPT`: MASE's `ch test jsc-tiny jsc --load best.ckpt`
// (spec/system.md §11). Loads a checkpoint written by `qnum train` (the .safetensors file,
// its .json or the stem) into MODEL and prints the mean cross-entropy and the accuracy on
// DATASET's test split (one JSON object with --json). A checkpoint of another model is a
// qnum::Error naming the first tensor that does not fit.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "qnum/pipeline/bert_run.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "transform_command.hpp"
#include "qnum/core/error.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/train.hpp"

namespace qnum::cli {

/// The `test` subcommand: its options (registered on construction) and its run.
class TestCommand {
 public:
  explicit TestCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("test", "Evaluate a checkpoint on a dataset's test split (MASE's `ch test`)");
    cmd_->add_option("MODEL", model_, "model the checkpoint was trained as")->required();
    cmd_->add_option("DATASET", dataset_, "dataset (its test split)")->required();
    cmd_->add_option("--load", load_, "checkpoint: best.safetensors, best.json or the stem .../best")->required();
    cmd_->add_option("--batch-size", batch_size_, "rows per batch (default: the model's evaluation batch: JSC 256, BERT 64)");
    cmd_->add_option("--threads", threads_, "threads (default: all)");
    cmd_->add_option("--device", device_, "where to evaluate: cpu (default) or cuda (BERT models)")->capture_default_str();
    cmd_->add_flag("--json", json_, "print one JSON object");
    cmd_->add_option("--precision", precision_,
                     "the products' precision: fp32 or bf16 (default: the run's, as its checkpoint records)");
    cmd_->add_option("--max-length", max_length_, "BERT: tokens per text (default: the run's)");
    cmd_->add_option("--limit", limit_, "BERT: at most N test rows");
  }
  TestCommand(const TestCommand&) = delete;  // CLI11 holds pointers to the members
  TestCommand& operator=(const TestCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(cmd_->get_option("--batch-size")->count() == 0 || batch_size_ >= 1,
                          "test: --batch-size must be >= 1, got ", batch_size_);
    qnum::detail::require(threads_ >= 0, "test: --threads must be >= 0, got ", threads_);
    if (threads_ > 0) set_num_threads(threads_);
    pipeline::require_matching_data(model_, dataset_);
    const pipeline::InputKind input = pipeline::model_spec(model_).input;
    const bool text = input == pipeline::InputKind::tokens;
    if (!text)  // as train: the options of text data are refused for feature rows, not ignored
      for (const char* name : {"--max-length", "--limit"})
        qnum::detail::require(cmd_->get_option(name)->count() == 0, "test: ", name,
                              " applies to BERT models only, not to ", model_);
    const std::int64_t batch_size =
        cmd_->get_option("--batch-size")->count() > 0 ? batch_size_
                                                      : pipeline::default_recipe(model_).evaluation_batch_size();
    // A BERT name may be a pretrained download (data::resolve_pretrained); a .bin is torch's.
    const std::string load = text ? data::resolve_pretrained(load_).string() : load_;
    const auto meta = std::filesystem::path(load).extension() == ".bin" ? nlohmann::json::object()
                                                                        : train::read_checkpoint_meta(load);
    pipeline::require_checkpoint_of(model_, load_, meta);
    nlohmann::json out{{"model", model_}, {"dataset", dataset_}, {"checkpoint", load_}, {"split", "test"}};
    if (meta.contains("epoch")) out["epoch"] = meta["epoch"];
    const std::int64_t max_length = pipeline::run_max_length(meta, max_length_);
    const PrecisionScope precision(parse_precision(cmd_->get_option("--precision")->count() > 0 ? precision_ : train::checkpoint_precision(meta)));
    if (matmul_precision() != Precision::fp32) out["precision"] = to_string(matmul_precision());
    const auto ev = pipeline::with_splits(input, dataset_, max_length, limit_, load, [&](const auto& data) {
      if constexpr (std::is_same_v<std::decay_t<decltype(data)>, data::TextSplits>)
        require_training_tokenizer(meta, load, data);
      const auto m = model_for(load, meta, data);
      m.module->to(Device::parse(device_));
      return train::evaluate(*m.module, m.forward, data.test, batch_size);
    });
    if (text) out["max_length"] = max_length;
    out["count"] = ev.count;
    out["loss"] = ev.loss;
    out["accuracy"] = ev.accuracy;
    if (json_) {
      std::cout << out.dump() << "\n";
      return;
    }
    std::printf("test %s on %s (test split, %lld rows%s), checkpoint %s\n", model_.c_str(), dataset_.c_str(),
                static_cast<long long>(ev.count),
                text ? (", max_length " + out["max_length"].dump()).c_str() : "", load_.c_str());
    std::printf("loss      %.6f\naccuracy  %.4f\n", ev.loss, ev.accuracy);
  }

 private:
  /// A checkpoint recording its tokenizer's fingerprint is evaluated only on text tokenized
  /// with that tokenizer (as predict and the labs check): another vocabulary's ids would
  /// index other embeddings and give a meaningless accuracy.
  static void require_training_tokenizer(const nlohmann::json& meta, const std::string& load,
                                         const data::TextSplits& data) {
    if (!meta.contains("tokenizer_fingerprint") || !meta["tokenizer_fingerprint"].is_string() || !data.tokenizer)
      return;
    const std::string here = pipeline::tokenizer_fingerprint_hex(*data.tokenizer);
    const std::string want = meta["tokenizer_fingerprint"].get<std::string>();
    qnum::detail::require(here == want, "test: the dataset's tokenizer (fingerprint ", here,
                          ") is not the one checkpoint '", load, "' was trained with (", want, ")");
  }

  /// The model of checkpoint `load` (model_config, structure, weights); for a text model,
  /// Hugging Face weights too (config.json beside them, or the name's preset).
  template <class Splits>
  pipeline::Classifier model_for(const std::string& load, const nlohmann::json& meta, const Splits& data) const {
    if constexpr (std::is_same_v<Splits, data::TextSplits>) {
      if (!meta.contains("format")) {
        auto bert =
            std::make_shared<models::BertForSequenceClassification>(pipeline::bert_run_config(model_, load, data), 0);
        pipeline::load_bert_weights(*bert, load);
        return {bert, models::bert_forward(bert), pipeline::InputKind::tokens, bert->config.to_json()};
      }
    }
    return pipeline::load_classifier(model_, load, meta);
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, dataset_, load_, device_ = "cpu", precision_;
  std::int64_t batch_size_ = 0, max_length_ = 0, limit_ = 0;
  int threads_ = 0;
  bool json_ = false;
};

}  // namespace qnum::cli
