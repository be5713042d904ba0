// The trainer behind `qnum train bert-tiny imdb`: Hugging Face Trainer's recipe for text
// classification (spec/system.md §10.1) beside the JSC Trainer, sharing its records,
// metrics.jsonl, checkpoints (with the passes' "structure") and progress output.
//
// Per step (HF's order): forward on a dynamic-padding batch, cross-entropy, backward, clip
// the global gradient norm to max_grad_norm, set the learning rate lr·factor(step) of the
// per-step linear (or cosine / constant) schedule with warm-up, AdamW step. Each epoch ends
// with an evaluation on the validation set (best = lowest validation loss, as the JSC
// trainer) and writes metrics.jsonl, `best` and `last`. The model is any nn::Module plus a
// TextForward mapping a TextBatch to logits (bert_forward for BertForSequenceClassification),
// so QAT (quantize pass before training) and LoRA (frozen base, adapters train) work as is:
// parameters without gradients are neither clipped nor updated.
#pragma once

#include <chrono>
#include <cmath>
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
#include "qnum/data/text_dataset.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/nn/nn.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/train/progress.hpp"
#include "qnum/train/recipe.hpp"
#include "qnum/train/trainer.hpp"

namespace qnum::train {

/// Logits [batch, classes] of a model for one text batch.
using TextForward = std::function<Tensor(const data::TextBatch&)>;

/// The TextForward of a BERT classifier (ids, mask and token types of the batch).
inline TextForward bert_forward(std::shared_ptr<models::BertForSequenceClassification> m) {
  return [m](const data::TextBatch& b) {
    return m->forward(models::BertInput{b.batch_size, b.seq_len, b.input_ids, b.attention_mask, b.token_type_ids});
  };
}

/// The settings of a text run (HF TrainingArguments names where they exist).
struct TextTrainConfig {
  std::string model = "bert-tiny";  ///< recorded; the caller builds the model
  std::string dataset = "imdb";     ///< recorded; the caller loads the data
  int max_epochs = 1;               ///< HF num_train_epochs (MASE's get_trainer: 1)
  std::int64_t batch_size = 8;      ///< per step (MASE: 8)
  std::int64_t eval_batch_size = 64;
  double learning_rate = 5e-5;      ///< HF default
  double weight_decay = 0;          ///< AdamW's decoupled decay (HF default 0)
  std::string schedule = "linear";  ///< per step: linear | cosine | constant
  double warmup_ratio = 0;          ///< warm-up steps = ceil(ratio · total) unless warmup_steps > 0
  std::int64_t warmup_steps = 0;
  double max_grad_norm = 1.0;     ///< <= 0: no clipping
  std::int64_t max_length = 512;  ///< recorded (the data were tokenized with it)
  std::int64_t pad_to_multiple_of = 1;
  std::uint64_t seed = 42;  ///< the batch order
  int threads = 0;
  std::string output_dir = "qnum-runs/<model>_<dataset>";
  bool progress = true;
};

/// The config as JSON (the "config" field of checkpoint metadata).
inline nlohmann::json to_json(const TextTrainConfig& c) {
  return {{"model", c.model},
          {"dataset", c.dataset},
          {"max_epochs", c.max_epochs},
          {"batch_size", c.batch_size},
          {"eval_batch_size", c.eval_batch_size},
          {"learning_rate", c.learning_rate},
          {"weight_decay", c.weight_decay},
          {"optimizer", "adamw"},
          {"schedule", c.schedule},
          {"warmup_ratio", c.warmup_ratio},
          {"warmup_steps", c.warmup_steps},
          {"max_grad_norm", c.max_grad_norm},
          {"max_length", c.max_length},
          {"pad_to_multiple_of", c.pad_to_multiple_of},
          {"seed", c.seed},
          {"threads", c.threads},
          {"output_dir", c.output_dir}};
}

/// Checks a text config (positive sizes, finite rates, a known schedule).
inline void validate(const TextTrainConfig& c) {
  using qnum::detail::require;
  require(c.max_epochs >= 1, "train: max_epochs must be >= 1, got ", c.max_epochs);
  require(c.batch_size >= 1, "train: batch_size must be >= 1, got ", c.batch_size);
  require(c.eval_batch_size >= 1, "train: eval_batch_size must be >= 1, got ", c.eval_batch_size);
  require(std::isfinite(c.learning_rate) && c.learning_rate >= 0.0, "train: learning_rate ", c.learning_rate,
          " must be finite and >= 0");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "train: weight_decay ", c.weight_decay,
          " must be finite and >= 0");
  require(c.warmup_ratio >= 0.0 && c.warmup_ratio <= 1.0, "train: warmup_ratio ", c.warmup_ratio, " must be in [0, 1]");
  require(c.warmup_steps >= 0, "train: warmup_steps must be >= 0, got ", c.warmup_steps);
  require(std::isfinite(c.max_grad_norm), "train: max_grad_norm must be finite");
  require(c.pad_to_multiple_of >= 1, "train: pad_to_multiple_of must be >= 1");
  require(c.threads >= 0, "train: threads must be >= 0 (0 = default), got ", c.threads);
  parse_schedule(c.schedule);
}

/// Scales the gradients of `params` so that their global L2 norm is at most max_norm
/// (torch.nn.utils.clip_grad_norm_: factor max_norm / (norm + 1e-6) when it is below 1).
/// Returns the norm before clipping.
inline double clip_grad_norm(std::vector<Tensor>& params, double max_norm) {
  // Eight running sums (element j of a parameter into sum j mod 8, then the sums in order):
  // a fixed order on every machine and thread count, and eight independent FMA chains instead
  // of one 4.4M-long one for bert-tiny.
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  for (auto& p : params) {
    if (!p.has_grad()) continue;
    const auto g = p.grad();
    std::size_t j = 0;
    for (; j + kLanes <= g.size(); j += kLanes)
      for (std::size_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(g[j + l]) * g[j + l];
    for (std::size_t l = 0; j < g.size(); ++j, ++l) lane[l] += static_cast<double>(g[j]) * g[j];
  }
  double sq = 0;
  for (double s : lane) sq += s;
  const double norm = std::sqrt(sq);
  const double factor = max_norm / (norm + 1e-6);
  if (max_norm > 0 && factor < 1.0)
    for (auto& p : params)
      if (p.has_grad())
        for (float& g : p.grad_mut()) g = static_cast<float>(g * factor);
  return norm;
}

/// Mean cross-entropy and accuracy of `forward` over `d` in eval mode without gradients
/// (so BERT's attention takes the fused kernel); `model` is switched back afterwards.
inline Evaluation evaluate_text(nn::Module& model, const TextForward& forward, const data::TokenDataset& d,
                                std::int64_t batch_size, std::int64_t pad_to_multiple_of = 1) {
  qnum::detail::require(batch_size > 0, "evaluate: batch_size must be positive, got ", batch_size);
  Evaluation r;
  if (d.size() == 0) return r;
  const bool was_training = model.is_training();
  model.eval();
  autograd::NoGradGuard no_grad;
  double loss = 0;
  std::int64_t correct = 0;
  for (const data::TextBatch& b : data::text_batches(d, {batch_size, false, false, 0, pad_to_multiple_of})) {
    const Tensor logits = forward(b);
    loss += static_cast<double>(cross_entropy(logits, b.labels).item()) * static_cast<double>(b.batch_size);
    const std::int64_t c = logits.shape()[1];
    for (std::int64_t i = 0; i < b.batch_size; ++i) {
      const float* row = logits.data() + i * c;
      std::int64_t arg = 0;
      for (std::int64_t k = 1; k < c; ++k)
        if (row[k] > row[arg]) arg = k;
      correct += arg == b.labels[static_cast<std::size_t>(i)];
    }
    r.count += b.batch_size;
  }
  model.train(was_training);
  r.loss = loss / static_cast<double>(r.count);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
  return r;
}

/// Trains a text classifier as the file comment describes.
class TextTrainer {
 public:
  TextTrainer(std::shared_ptr<nn::Module> model, TextForward forward, TextTrainConfig config)
      : model_(std::move(model)), forward_(std::move(forward)), config_(std::move(config)) {
    qnum::detail::require(model_ != nullptr && forward_ != nullptr, "TextTrainer: the model is null");
    validate(config_);
    TrainConfig names;
    names.model = config_.model;
    names.dataset = config_.dataset;
    names.output_dir = config_.output_dir;
    out_dir_ = resolve_output_dir(names);
    opt_ = make_optimizer("adamw", model_->parameters(), config_.learning_rate, config_.weight_decay);
  }

  /// Trains for max_epochs epochs over `train`, evaluating on `val` after each; returns the
  /// records. A NaN/Inf loss stops with a qnum::Error naming the epoch, step and last good
  /// checkpoint (nothing is written after the bad step).
  std::vector<EpochRecord> fit(const data::TokenDataset& train, const data::TokenDataset& val) {
    retain_freed_memory();  // each step reuses the last step's pages (core/heap.hpp)
    qnum::detail::require(train.size() > 0, "train: the training set is empty");
    qnum::detail::require(val.size() > 0, "train: the validation set is empty");
    if (config_.threads > 0) set_num_threads(config_.threads);
    std::error_code ec;
    std::filesystem::create_directories(out_dir_, ec);
    qnum::detail::require(!ec, "train: cannot create output directory '", out_dir_.string(), "': ", ec.message());
    history_.clear();
    best_val_loss_ = std::numeric_limits<double>::infinity();
    have_last_ = false;

    const data::TextBatchOptions bo{config_.batch_size, true, false, config_.seed, config_.pad_to_multiple_of};
    const std::int64_t per_epoch = data::text_batches(train, bo, 0).size();
    total_steps_ = per_epoch * config_.max_epochs;
    warmup_ = config_.warmup_steps > 0
                  ? config_.warmup_steps
                  : static_cast<std::int64_t>(std::ceil(config_.warmup_ratio * static_cast<double>(total_steps_)));
    const nn::ScheduleKind kind = parse_schedule(config_.schedule);
    std::vector<Tensor> params = model_->parameters();
    Progress progress(config_.progress);
    std::int64_t step = 0;

    for (int e = 0; e < config_.max_epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      model_->train();
      const auto batches = data::text_batches(train, bo, static_cast<std::uint64_t>(e));
      double loss_sum = 0.0;
      std::int64_t rows = 0;
      for (std::int64_t i = 0; i < per_epoch; ++i, ++step) {
        const data::TextBatch b = batches[i];
        opt_->zero_grad();
        const Tensor loss = cross_entropy(forward_(b), b.labels);
        const float lv = loss.item();
        if (!std::isfinite(lv)) {
          progress.abort();
          fail_non_finite(lv, "loss", e + 1, " step " + std::to_string(step + 1));
        }
        loss.backward();
        if (config_.max_grad_norm > 0) last_grad_norm_ = clip_grad_norm(params, config_.max_grad_norm);
        opt_->set_lr(config_.learning_rate * factor(kind, step));
        opt_->step();
        loss_sum += static_cast<double>(lv) * static_cast<double>(b.batch_size);
        rows += b.batch_size;
        progress.batch(e + 1, config_.max_epochs, i + 1, per_epoch, loss_sum / static_cast<double>(rows));
        if (on_step_) on_step_(step + 1, lv);
      }
      const Evaluation ev = evaluate_text(*model_, forward_, val, config_.eval_batch_size, config_.pad_to_multiple_of);
      if (!std::isfinite(ev.loss)) {
        progress.abort();
        fail_non_finite(ev.loss, "validation loss", e + 1, "");
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const EpochRecord rec{e + 1, loss_sum / static_cast<double>(rows), ev.loss, ev.accuracy, seconds};
      history_.push_back(rec);
      write_metrics();
      const bool best = rec.val_loss < best_val_loss_;
      if (best) {
        best_val_loss_ = rec.val_loss;
        save_checkpoint(out_dir_, "best", *model_, opt_.get(), checkpoint_meta(rec));
      }
      save_checkpoint(out_dir_, "last", *model_, opt_.get(), checkpoint_meta(rec));
      have_last_ = true;
      progress.epoch(rec.epoch, config_.max_epochs, rec.train_loss, rec.val_loss, rec.val_accuracy, rec.seconds,
                     opt_->lr(), best);
    }
    return history_;
  }

  /// Evaluates the current model on `d` (e.g. the test split at the end of a run).
  Evaluation evaluate(const data::TokenDataset& d) {
    return evaluate_text(*model_, forward_, d, config_.eval_batch_size, config_.pad_to_multiple_of);
  }

  /// A function called after every optimizer step with the 1-based step and its loss.
  void on_step(std::function<void(std::int64_t, float)> f) { on_step_ = std::move(f); }

  const std::filesystem::path& output_dir() const { return out_dir_; }
  std::filesystem::path last_checkpoint() const { return out_dir_ / "last.safetensors"; }
  std::filesystem::path best_checkpoint() const { return out_dir_ / "best.safetensors"; }
  std::filesystem::path metrics_file() const { return out_dir_ / "metrics.jsonl"; }
  const std::vector<EpochRecord>& history() const { return history_; }
  double best_val_loss() const { return best_val_loss_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t warmup_steps() const { return warmup_; }
  double last_grad_norm() const { return last_grad_norm_; }
  nn::Optimizer& optimizer() { return *opt_; }

 private:
  double factor(nn::ScheduleKind kind, std::int64_t step) const {
    switch (kind) {
      case nn::ScheduleKind::constant:
        return nn::constant_schedule(step, warmup_);
      case nn::ScheduleKind::cosine:
        return nn::cosine_schedule_with_warmup(step, warmup_, total_steps_);
      case nn::ScheduleKind::linear:
        break;
    }
    return nn::linear_schedule_with_warmup(step, warmup_, total_steps_);
  }

  nlohmann::json checkpoint_meta(const EpochRecord& rec) const {
    nlohmann::json history = nlohmann::json::array();
    for (const auto& r : history_) history.push_back(to_json(r));
    return {
        {"model", config_.model},
        {"dataset", config_.dataset},
        {"epoch", rec.epoch},
        {"metrics", {{"train_loss", rec.train_loss}, {"val_loss", rec.val_loss}, {"val_accuracy", rec.val_accuracy}}},
        {"best_val_loss", best_val_loss_},
        {"history", std::move(history)},
        {"config", to_json(config_)},
        {"structure", passes::describe_structure(*model_)}};
  }

  void write_metrics() const {
    std::string text;
    for (const auto& r : history_) {
      const nlohmann::ordered_json line = {{"epoch", r.epoch},
                                           {"train_loss", r.train_loss},
                                           {"val_loss", r.val_loss},
                                           {"val_accuracy", r.val_accuracy},
                                           {"seconds", r.seconds}};
      text += line.dump() + "\n";
    }
    write_file_atomic(metrics_file(), text);
  }

  [[noreturn]] void fail_non_finite(double v, const char* what, int epoch, const std::string& where) const {
    qnum::detail::fail(what, " became ", std::isnan(v) ? "NaN" : "Inf", " at epoch ", epoch, where,
                       "; the last good checkpoint is ",
                       have_last_ ? last_checkpoint().string() : std::string("none (no epoch had finished)"));
  }

  std::shared_ptr<nn::Module> model_;
  TextForward forward_;
  TextTrainConfig config_;
  std::filesystem::path out_dir_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::vector<EpochRecord> history_;
  double best_val_loss_ = std::numeric_limits<double>::infinity();
  bool have_last_ = false;
  std::int64_t total_steps_ = 0, warmup_ = 0;
  double last_grad_norm_ = 0;
  std::function<void(std::int64_t, float)> on_step_;
};

}  // namespace qnum::train
