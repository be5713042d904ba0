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

#include <nlohmann/json.hpp>

#include "bert_commands.hpp"
#include "datasets.hpp"
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
    cmd_->add_option("--batch-size", batch_size_, "rows per batch")->capture_default_str();
    cmd_->add_option("--threads", threads_, "threads (default: all)");
    cmd_->add_option("--device", device_, "where to evaluate: cpu (default) or cuda (BERT models)")->capture_default_str();
    cmd_->add_flag("--json", json_, "print one JSON object");
    cmd_->add_option("--max-length", max_length_, "BERT: tokens per text (default: the run's)");
    cmd_->add_option("--limit", limit_, "BERT: at most N test rows");
  }
  TestCommand(const TestCommand&) = delete;  // CLI11 holds pointers to the members
  TestCommand& operator=(const TestCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(batch_size_ >= 1, "test: --batch-size must be >= 1, got ", batch_size_);
    qnum::detail::require(threads_ >= 0, "test: --threads must be >= 0, got ", threads_);
    if (threads_ > 0) set_num_threads(threads_);
    require_matching_data(model_, dataset_);
    require_checkpoint_of(model_, load_, train::read_checkpoint_meta(load_));
    if (models::is_bert_model(model_)) {
      BertRunOptions b;
      b.model = model_;
      b.dataset = dataset_;
      b.load = load_;
      b.json = json_;
      b.threads = threads_;
      b.device = device_;
      if (cmd_->get_option("--batch-size")->count() > 0) b.batch_size = batch_size_;
      if (max_length_ > 0) b.max_length = max_length_;
      if (limit_ > 0) b.limit = limit_;
      return run_bert_test(b);
    }
    auto model = models::make_jsc_model(model_, 0);
    // A checkpoint of a transformed model (qnum transform, or training after it) carries
    // the passes' structure: quantized layers, masks and adapters are rebuilt first.
    if (const auto pre = train::read_checkpoint_meta(load_); pre.contains("structure"))
      passes::restore_structure(*model, pre["structure"]);
    const data::JscSplits data = load_dataset(dataset_);
    const auto meta = train::load_checkpoint(load_, *model, nullptr);
    model->to(Device::parse(device_));
    const auto ev = train::evaluate(*model, data.test, batch_size_);
    if (json_) {
      const nlohmann::json j{{"model", model_},     {"dataset", dataset_},
                             {"checkpoint", load_}, {"epoch", meta.value("epoch", nlohmann::json(nullptr))},
                             {"split", "test"},     {"count", ev.count},
                             {"loss", ev.loss},     {"accuracy", ev.accuracy}};
      std::cout << j.dump() << "\n";
      return;
    }
    std::printf("test %s on %s (test split, %lld rows), checkpoint %s\n", model_.c_str(), dataset_.c_str(),
                static_cast<long long>(ev.count), load_.c_str());
    std::printf("loss      %.6f\naccuracy  %.4f\n", ev.loss, ev.accuracy);
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string model_, dataset_, load_, device_ = "cpu";
  std::int64_t batch_size_ = 256, max_length_ = 0, limit_ = 0;
  int threads_ = 0;
  bool json_ = false;
};

}  // namespace qnum::cli
