// `qnum train MODEL DATASET [options]`: MASE's `ch train jsc-tiny jsc` (spec/system.md §11)
// on qnum's trainer. Settings: TrainConfig defaults < `--config run.toml` < command-line
// options; with --resume, the defaults are the settings saved in the run's `last`
// checkpoint instead, so `qnum train M D --output-dir DIR --resume --max-epochs 30` extends
// a run without repeating its options. Prints the run (stdout), the trainer's per-epoch
// progress (stderr), then the test-set evaluation of the best checkpoint and where the
// checkpoints and metrics are.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "bert_commands.hpp"
#include "datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/train/train.hpp"
#include "run_config.hpp"

namespace qnum::cli {

/// The TrainConfig saved in a checkpoint's metadata ("config", as train::to_json writes it).
inline train::TrainConfig config_from_checkpoint(const nlohmann::json& meta, const std::string& what) {
  train::TrainConfig c;
  const auto& j = meta.value("config", nlohmann::json::object());
  qnum::detail::require(j.is_object(), what, ": metadata 'config' is not an object");
  auto get = [&](const char* key, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if (!j.contains(key) || j[key].is_null()) return;
    try {
      field = j[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      qnum::detail::fail(what, ": metadata config '", key, "' = ", j[key].dump(), " has the wrong type");
    }
  };
  get("model", c.model);
  get("dataset", c.dataset);
  get("max_epochs", c.max_epochs);
  get("batch_size", c.batch_size);
  get("learning_rate", c.learning_rate);
  get("optimizer", c.optimizer);
  get("schedule", c.schedule);
  get("weight_decay", c.weight_decay);
  get("seed", c.seed);
  get("threads", c.threads);
  get("output_dir", c.output_dir);
  return c;
}

/// The `train` subcommand: its options (registered on construction) and its run.
class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("train",
                              "Train a JSC model (MASE's `ch train`) or a BERT on a text dataset; MODEL/DATASET may "
                              "come from --config");
    cmd_->add_option("MODEL", model_,
                     "model: " + join(models::jsc_model_names()) + "; BERT: " + join(models::bert_model_names()));
    cmd_->add_option("DATASET", dataset_,
                     "dataset: " + join(dataset_names()) + "; for BERT: " + std::string(data::kTextDatasetNames));
    cmd_->add_option("--config", config_path_, "TOML run config (keys: " + std::string(kRunConfigKeys) + ")");
    cmd_->add_option("--max-epochs", max_epochs_, "epochs to train (default 20)");
    cmd_->add_option("--batch-size", batch_size_, "rows per batch (default 256)");
    cmd_->add_option("--learning-rate", learning_rate_, "initial learning rate (default 1e-3)");
    cmd_->add_option("--optimizer,--training-optimizer", optimizer_, "adam (default), adamw or sgd");
    cmd_->add_option("--schedule", schedule_, "per-epoch learning rate: cosine (default), linear or constant");
    cmd_->add_option("--weight-decay", weight_decay_, "weight decay (default 0; sgd then uses MASE's 5e-4)");
    cmd_->add_option(
        "--seed", seed_,
        "seed of the model initialisation and the batch order (default 0; a BERT run shuffles with 42 unless given)");
    cmd_->add_option("--threads", threads_, "threads (default: all)");
    cmd_->add_option("--output-dir,--project-dir", output_dir_,
                     "where metrics.jsonl and the best/last checkpoints go (default qnum-runs/MODEL_DATASET)");
    cmd_->add_flag("--resume", resume_, "continue the run saved as `last` in the output directory");
    cmd_->add_flag("--no-progress", no_progress_, "print no per-epoch progress");
    // BERT / text datasets only.
    cmd_->add_option("--max-length", bert_.max_length, "BERT: tokens per text incl. [CLS]/[SEP] (default 512)");
    cmd_->add_option("--limit", bert_.limit, "BERT: keep at most N rows per split (quick runs)");
    cmd_->add_option("--warmup-ratio", bert_.warmup_ratio, "BERT: linear warm-up over this share of steps (default 0)");
    cmd_->add_option("--max-grad-norm", bert_.max_grad_norm, "BERT: gradient clipping norm (default 1; 0: none)");
    cmd_->add_option("--load", bert_.load,
                     "BERT: start from a checkpoint: qnum's or Hugging Face's model.safetensors (config.json beside "
                     "it gives the sizes)");
    cmd_->add_option("--quantize", bert_.quantize, "BERT: quantize config (TOML/JSON) applied before training (QAT)");
    cmd_->add_option("--lora-rank", bert_.lora_rank, "BERT: train LoRA adapters of this rank on query/value");
  }

  TrainCommand(const TrainCommand&) = delete;  // CLI11 holds pointers to the members
  TrainCommand& operator=(const TrainCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  /// Trains as configured; qnum::Error for bad settings, names, data or checkpoints.
  void run() const {
    RunOverrides o;
    if (!config_path_.empty()) o = read_run_config(config_path_);
    o.merge(command_line());
    qnum::detail::require(o.model.has_value(),
                          "train: no MODEL (give it as the first argument or `model` in --config; ",
                          "known: ", known_models_text(), ")");
    qnum::detail::require(o.dataset.has_value(), "train: no DATASET (give it as the second argument or `dataset` in ",
                          "--config; known: ", join(dataset_names()), ")");
    require_known_model(*o.model);
    if (models::is_bert_model(*o.model)) return run_bert(o);
    train::TrainConfig c;
    o.apply(c);
    if (resume_) {
      // The saved run's settings are the defaults; the file and the command line still win.
      const auto dir = train::resolve_output_dir(c);
      qnum::detail::require(std::filesystem::exists(dir / "last.safetensors"), "train: cannot resume: no checkpoint '",
                            (dir / "last.safetensors").string(), "' (run without --resume first)");
      const auto meta_file = dir / "last.json";
      if (std::filesystem::exists(meta_file)) {
        const auto meta = nlohmann::json::parse(read_file(meta_file), nullptr, false);
        qnum::detail::require(meta.is_object(), "train: cannot resume: '", meta_file.string(), "' is not JSON");
        c = config_from_checkpoint(meta, meta_file.string());
        o.apply(c);
      }
    }
    c.progress = !no_progress_;
    train::validate(c);

    auto model = models::make_jsc_model(c.model, c.seed);
    const data::JscSplits data = load_dataset(c.dataset);
    train::Trainer trainer(model, c);
    std::printf("train    %s (%lld parameters) on %s\n", c.model.c_str(),
                static_cast<long long>(model->num_parameters()), c.dataset.c_str());
    std::printf("data     %s\n", data.summary().c_str());
    std::printf(
        "settings max_epochs %d, batch_size %lld, learning_rate %g, optimizer %s, schedule %s, "
        "weight_decay %g, seed %llu%s\n",
        c.max_epochs, static_cast<long long>(c.batch_size), c.learning_rate, c.optimizer.c_str(), c.schedule.c_str(),
        c.weight_decay, static_cast<unsigned long long>(c.seed), resume_ ? " (resuming)" : "");
    std::printf("output   %s\n", trainer.output_dir().string().c_str());
    std::fflush(stdout);

    const auto records = trainer.fit(data.train, data.val, resume_);

    // The test set, on the best checkpoint (MASE's lab 1 tests best.ckpt).
    auto best = models::make_jsc_model(c.model, c.seed);
    const auto meta = train::load_checkpoint(trainer.best_checkpoint(), *best, nullptr);
    const auto ev = train::evaluate(*best, data.test, c.batch_size);
    const int best_epoch = meta.value("epoch", 0);
    std::printf("test     loss %.6f accuracy %.4f (%lld rows; best checkpoint, epoch %d)\n", ev.loss, ev.accuracy,
                static_cast<long long>(ev.count), best_epoch);
    std::printf("best     %s (epoch %d, val_loss %.6f)\n", trainer.best_checkpoint().string().c_str(), best_epoch,
                trainer.best_val_loss());
    std::printf("last     %s (epoch %d)\n", trainer.last_checkpoint().string().c_str(),
                records.empty() ? 0 : records.back().epoch);
    std::printf("metrics  %s\n", trainer.metrics_file().string().c_str());
  }

 private:
  template <class Names>
  static std::string join(const Names& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }

  /// BERT runs (bert_commands.hpp): the shared options plus the BERT ones; defaults are the
  /// TextTrainConfig's (HF's: 1 epoch, batch 8, lr 5e-5), not the JSC ones.
  void run_bert(const RunOverrides& o) const {
    qnum::detail::require(!resume_, "train: --resume is not supported for BERT runs yet");
    qnum::detail::require(!o.optimizer || *o.optimizer == "adamw", "train: BERT runs use AdamW (got --optimizer ",
                          o.optimizer.value_or(""), ")");
    BertRunOptions b = bert_;
    b.model = *o.model;
    b.dataset = *o.dataset;
    b.max_epochs = o.max_epochs;
    b.batch_size = o.batch_size;
    b.learning_rate = o.learning_rate;
    b.weight_decay = o.weight_decay;
    b.seed = o.seed;
    b.threads = o.threads;
    b.output_dir = o.output_dir.value_or("");
    b.progress = !no_progress_;
    run_bert_train(b);
  }

  /// The options given on the command line (positionals included).
  RunOverrides command_line() const {
    RunOverrides o;
    auto given = [&](const char* name) { return cmd_->get_option(name)->count() > 0; };
    if (given("MODEL")) o.model = model_;
    if (given("DATASET")) o.dataset = dataset_;
    if (given("--max-epochs")) o.max_epochs = max_epochs_;
    if (given("--batch-size")) o.batch_size = batch_size_;
    if (given("--learning-rate")) o.learning_rate = learning_rate_;
    if (given("--optimizer")) o.optimizer = optimizer_;
    if (given("--schedule")) o.schedule = schedule_;
    if (given("--weight-decay")) o.weight_decay = weight_decay_;
    if (given("--seed")) o.seed = seed_;
    if (given("--threads")) o.threads = threads_;
    if (given("--output-dir")) o.output_dir = output_dir_;
    return o;
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, dataset_, config_path_, optimizer_, schedule_, output_dir_;
  int max_epochs_ = 0, threads_ = 0;
  std::int64_t batch_size_ = 0;
  double learning_rate_ = 0, weight_decay_ = 0;
  std::uint64_t seed_ = 0;
  bool resume_ = false, no_progress_ = false;
  BertRunOptions bert_;
};

}  // namespace qnum::cli
