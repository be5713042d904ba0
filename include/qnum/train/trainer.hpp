// The one training loop behind `qnum train MODEL DATASET`, the labs and the searches, for
// every model and both input kinds (feature tables and tokenized text, data/dataset.hpp):
// MASE's Lightning loop for classification (spec/system.md §10.3) and the Hugging Face
// Trainer's per-step recipe (§10.1) as settings of one recipe (recipe.hpp), made
// deterministic and resumable.
//
// Each epoch e (1-based in records and messages; 0-based for the data order and the
// schedule): the shuffled batches data::batches(train, {batch_size, seed = config.seed}, e)
// go through forward, cross-entropy, backward, gradient clipping (max_grad_norm > 0), the
// learning rate of the epoch or step, and an optimizer step; then evaluate on the validation
// set (an epoch that max_steps cuts short is evaluated and saved as it ends; training then
// stops); rewrite <output_dir>/metrics.jsonl atomically with every record so far (and the
// step rows and TensorBoard scalars of run_log.hpp as they come); save `best`
// when the validation loss is the lowest yet (MASE keeps the lowest val_loss) and `last`
// always. The checkpoints' metadata carries the epoch, the best validation loss, the whole
// history, the recipe and what passes made of the model, so fit(..., resume = true) restarts
// from `last` and reproduces an uninterrupted run bit for bit (data order, learning rate,
// optimizer state, BatchNorm statistics and Dropout counters are all restored or functions
// of the epoch and step).
//
// A NaN or infinite loss stops the run with a qnum::Error naming the epoch, the batch and
// the last good checkpoint; nothing is written after the bad step, so `best` and `last`
// stay the last good ones.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/core/heap.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/forward.hpp"
#include "qnum/nn/nn.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/train/evaluate.hpp"
#include "qnum/train/progress.hpp"
#include "qnum/train/recipe.hpp"
#include "qnum/train/run_log.hpp"

namespace qnum::train {

namespace detail {
/// Says once per process, on stderr, when bf16 products run on the emulation (vdpbf16ps's bits, slower).
inline void note_bf16_engine(Precision p) {
  static bool said = false;
  if (p != Precision::bf16 || bf16_gemm_native() || said) return;
  said = true;
  std::fprintf(stderr, "note: precision bf16 runs its products on %s\n", bf16_engine());
}
}  // namespace detail

/// Trains a classifier as the file comment describes.
class Trainer {
 public:
  /// Takes the model to train (shared: the caller keeps its handle), the function mapping a
  /// batch to its logits, and the settings, which are validated here (unknown optimizer or
  /// schedule names are errors listing the known ones). The optimizer is built over the
  /// model's parameters now.
  Trainer(std::shared_ptr<nn::Module> model, models::Forward forward, TrainConfig config)
      : model_(std::move(model)), forward_(std::move(forward)), config_(std::move(config)) {
    qnum::detail::require(model_ != nullptr && forward_ != nullptr, "Trainer: the model is null");
    validate(config_);
    out_dir_ = resolve_output_dir(config_);
    model_->to(Device::parse(config_.device));
    opt_ = make_optimizer(config_.optimizer, model_->parameters(), config_.learning_rate, config_.weight_decay);
  }
  /// A model mapping feature rows [B, F] to logits.
  Trainer(std::shared_ptr<nn::Module> model, TrainConfig config)
      : Trainer(model, model ? models::features_forward(model) : models::Forward{}, std::move(config)) {}

  /// Trains for config.max_epochs epochs (or, with `resume`, continues the run saved as
  /// `last` in the output directory from its next epoch) and returns the records of every
  /// epoch of the run, resumed ones included. `Data` is data::Dataset or data::TokenDataset.
  template <class Data>
  std::vector<EpochRecord> fit(const Data& train, const Data& val, bool resume = false) {
    retain_freed_memory();  // each step reuses the last step's pages (core/heap.hpp)
    qnum::detail::require(train.size() > 0, "train: the training set is empty");
    qnum::detail::require(val.size() > 0, "train: the validation set is empty");
    if (config_.threads > 0) set_num_threads(config_.threads);
    const PrecisionScope precision(parse_precision(config_.precision));
    detail::note_bf16_engine(matmul_precision());
    std::error_code ec;
    std::filesystem::create_directories(out_dir_, ec);
    qnum::detail::require(!ec, "train: cannot create output directory '", out_dir_.string(), "': ", ec.message());

    history_.clear();
    best_val_loss_ = std::numeric_limits<double>::infinity();
    have_last_ = false;
    const int start = resume ? load_last() : 0;
    const data::BatchOptions bo{config_.batch_size, true, false, config_.seed, config_.pad_to_multiple_of};
    const std::int64_t per_epoch = data::batches(train, bo, 0).size();
    log_ = std::make_unique<RunLog>(config_, metrics_file(), resume ? start : -1,
                                    static_cast<std::int64_t>(start) * per_epoch);
    log_->write_metrics(history_);
    total_steps_ = per_epoch * config_.max_epochs;
    if (config_.max_steps > 0) total_steps_ = std::min(total_steps_, config_.max_steps);  // Lightning's estimate
    warmup_ = config_.warmup_steps > 0
                  ? config_.warmup_steps
                  : static_cast<std::int64_t>(std::ceil(config_.warmup_ratio * static_cast<double>(total_steps_)));
    const bool per_step = config_.schedule_unit == "step";
    std::vector<Tensor> params = model_->parameters();
    Progress progress(config_.progress);
    std::int64_t step = static_cast<std::int64_t>(start) * per_epoch;

    const auto steps_left = [&] { return config_.max_steps < 0 || step < config_.max_steps; };
    for (int e = start; e < config_.max_epochs && steps_left(); ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      if (!per_step)
        opt_->set_lr(epoch_learning_rate(config_.schedule, config_.learning_rate, e, config_.max_epochs, config_.t_max,
                                         config_.eta_min));
      model_->train();
      const auto epoch_batches = data::batches(train, bo, static_cast<std::uint64_t>(e));
      double loss_sum = 0.0;
      std::int64_t rows = 0;
      for (std::int64_t i = 0; i < per_epoch && steps_left(); ++i, ++step) {  // max_steps ends an epoch early
        const data::Batch b = epoch_batches[i];
        opt_->zero_grad();
        const Tensor loss = cross_entropy(forward_(b), b.labels);
        // On a device the loss is read after the step: reading it first would make the host wait
        // for the forward before queueing the backward (a non-finite loss still stops the run).
        const bool on_device = loss.is_cuda();
        float lv = on_device ? 0.0f : loss.item();
        auto check_loss = [&] {
          if (std::isfinite(lv)) return;
          progress.abort();
          fail_non_finite(lv, "loss", e + 1, " batch " + std::to_string(i + 1));
        };
        check_loss();
        loss.backward();
        if (config_.max_grad_norm > 0) {
          if (on_device)  // the norm stays on the device until asked for (no wait mid-step)
            clip_device_grad_norm(params, config_.max_grad_norm, last_grad_norm_device_);
          else
            last_grad_norm_ = clip_grad_norm(params, config_.max_grad_norm);
        }
        if (per_step)
          opt_->set_lr(step_learning_rate(config_.schedule, config_.learning_rate, step, warmup_, total_steps_));
        opt_->step();
        if (on_device) {
          lv = loss.item();
          check_loss();
        }
        loss_sum += static_cast<double>(lv) * static_cast<double>(b.batch_size);
        rows += b.batch_size;
        progress.batch(e + 1, config_.max_epochs, i + 1, per_epoch, loss_sum / static_cast<double>(rows));
        if (log_->records_step(step + 1)) {
          StepRecord r{step + 1, e + 1, lv, opt_->lr(), std::nullopt};
          if (config_.max_grad_norm > 0)
            r.grad_norm = last_grad_norm();
          else if (!on_device)  // the norm clipping would have computed (max_norm 0 clips nothing)
            r.grad_norm = clip_grad_norm(params, 0);
          log_->step(r, e + static_cast<double>(i + 1) / static_cast<double>(per_epoch));
        }
        if (on_step_) on_step_(step + 1, lv);
      }
      const Evaluation ev = train::evaluate(*model_, forward_, val, config_.evaluation_batch_size(),
                                            config_.pad_to_multiple_of);
      if (!std::isfinite(ev.loss)) {
        progress.abort();
        fail_non_finite(ev.loss, "validation loss", e + 1, "");
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const EpochRecord rec{e + 1, loss_sum / static_cast<double>(rows), ev.loss, ev.accuracy, seconds};
      history_.push_back(rec);
      log_->write_metrics(history_);
      log_->epoch(rec, step);
      const bool best = rec.val_loss < best_val_loss_;
      if (best) {
        best_val_loss_ = rec.val_loss;
        save_checkpoint(out_dir_, "best", *model_, opt_.get(), checkpoint_meta(rec));
      }
      save_checkpoint(out_dir_, "last", *model_, opt_.get(), checkpoint_meta(rec));
      have_last_ = true;
      progress.epoch(rec.epoch, config_.max_epochs, rec.train_loss, rec.val_loss, rec.val_accuracy, rec.seconds,
                     opt_->lr(), best);
      if (on_epoch_ && !on_epoch_(rec)) break;
    }
    return history_;
  }

  /// Evaluates the current model on `d` (e.g. the test split at the end of a run).
  template <class Data>
  Evaluation evaluate(const Data& d) const {
    const PrecisionScope precision(parse_precision(config_.precision));
    return train::evaluate(*model_, forward_, d, config_.evaluation_batch_size(), config_.pad_to_multiple_of);
  }

  /// Sets a function called after each epoch, once its metrics and checkpoints are written;
  /// returning false stops fit() there (as an interruption would: resume continues it).
  void on_epoch_end(std::function<bool(const EpochRecord&)> f) { on_epoch_ = std::move(f); }
  /// A function called after every optimizer step with the 1-based step and its loss.
  void on_step(std::function<void(std::int64_t, float)> f) { on_step_ = std::move(f); }
  /// Fields added to every checkpoint's metadata (e.g. the model's config and the tokenizer's
  /// fingerprint, which later commands rebuild the model from).
  void set_extra_metadata(nlohmann::json extra) { extra_meta_ = std::move(extra); }

  /// The directory metrics and checkpoints go to (config.output_dir resolved).
  const std::filesystem::path& output_dir() const { return out_dir_; }
  /// The `last` and `best` checkpoints' tensor files.
  std::filesystem::path last_checkpoint() const { return out_dir_ / "last.safetensors"; }
  std::filesystem::path best_checkpoint() const { return out_dir_ / "best.safetensors"; }
  /// The metrics file (one JSON record per line).
  std::filesystem::path metrics_file() const { return out_dir_ / "metrics.jsonl"; }

  nn::Module& model() { return *model_; }
  nn::Optimizer& optimizer() { return *opt_; }
  const TrainConfig& config() const { return config_; }
  /// The records of the last fit() so far.
  const std::vector<EpochRecord>& history() const { return history_; }
  /// The lowest validation loss of the run so far (infinity before the first epoch).
  double best_val_loss() const { return best_val_loss_; }
  /// Optimizer steps of the whole run and of its warm-up (set when fit starts).
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t warmup_steps() const { return warmup_; }
  /// The global gradient norm before the last clipping (max_grad_norm > 0).
  double last_grad_norm() const {
    if (last_grad_norm_device_.empty()) return last_grad_norm_;
    float v = 0.0f;
    last_grad_norm_device_.backend().copy_to_host(&v, last_grad_norm_device_.data(), sizeof(float));
    return v;
  }

 private:
  /// Loads `last` into the model and optimizer, restores history and best loss, and returns
  /// the 0-based epoch to continue with.
  int load_last() {
    const auto path = last_checkpoint();
    qnum::detail::require(std::filesystem::exists(path), "train: cannot resume: no checkpoint '", path.string(),
                          "' (run without resume first)");
    const nlohmann::json meta = load_checkpoint(path, *model_, opt_.get());
    const std::string what = "train: cannot resume from '" + path.string() + "'";
    qnum::detail::require(meta.value("model", std::string()) == config_.model, what, ": it was trained as model '",
                          meta.value("model", std::string()), "', not '", config_.model, "'");
    qnum::detail::require(meta.contains("epoch") && meta["epoch"].is_number_integer() && meta.contains("history") &&
                              meta["history"].is_array(),
                          what, ": its metadata has no epoch/history (not a trainer checkpoint)");
    for (const auto& r : meta["history"]) history_.push_back(epoch_record_from_json(r));
    const auto& b = meta.value("best_val_loss", nlohmann::json(nullptr));
    best_val_loss_ = b.is_number() ? b.get<double>() : std::numeric_limits<double>::infinity();
    have_last_ = true;
    return meta["epoch"].get<int>();
  }

  nlohmann::json checkpoint_meta(const EpochRecord& rec) const {
    nlohmann::json history = nlohmann::json::array();
    for (const auto& r : history_) history.push_back(to_json(r));
    nlohmann::json meta = {
        {"model", config_.model},
        {"dataset", config_.dataset},
        {"epoch", rec.epoch},
        {"metrics", {{"train_loss", rec.train_loss}, {"val_loss", rec.val_loss}, {"val_accuracy", rec.val_accuracy}}},
        {"best_val_loss", best_val_loss_},
        {"history", std::move(history)},
        {"config", to_json(config_)},
        // What passes made of the model (quantized layers, masks, adapters), so that the
        // checkpoint loads into a fresh model again (passes::restore_structure).
        {"structure", passes::describe_structure(*model_)}};
    for (const auto& [k, v] : extra_meta_.items()) meta[k] = v;
    return meta;
  }

  [[noreturn]] void fail_non_finite(double v, const char* what, int epoch, const std::string& where) const {
    qnum::detail::fail(what, " became ", std::isnan(v) ? "NaN" : "Inf", " at epoch ", epoch, where,
                       "; the last good checkpoint is ",
                       have_last_ ? last_checkpoint().string() : std::string("none (no epoch had finished)"));
  }

  std::shared_ptr<nn::Module> model_;
  models::Forward forward_;
  TrainConfig config_;
  std::filesystem::path out_dir_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::vector<EpochRecord> history_;
  double best_val_loss_ = std::numeric_limits<double>::infinity();
  bool have_last_ = false;
  std::int64_t total_steps_ = 0, warmup_ = 0;
  double last_grad_norm_ = 0;
  DeviceArray last_grad_norm_device_;  // a device run's last norm, read on request
  nlohmann::json extra_meta_ = nlohmann::json::object();
  std::function<bool(const EpochRecord&)> on_epoch_;
  std::function<void(std::int64_t, float)> on_step_;
  std::unique_ptr<RunLog> log_;
};

}  // namespace qnum::train
