// The trainer behind `qnum train MODEL DATASET`: MASE's Lightning loop for classification
// (spec/system.md §10.3) made deterministic and resumable.
//
// Each epoch e (1-based in records and messages; 0-based for the data order and the
// schedule): set the epoch's learning rate (schedules are per epoch, see recipe.hpp), run
// the shuffled batches data::batches(train, {batch_size, seed = config.seed}, e - 1)
// through forward, cross_entropy, backward and an optimizer step; evaluate on the
// validation set; rewrite <output_dir>/metrics.jsonl atomically with every record so far;
// save `best` when the validation loss is the lowest yet (MASE keeps the lowest val_loss)
// and `last` always. The checkpoints' metadata carries the epoch, the best validation loss
// and the whole history, so fit(..., resume = true) restarts from `last` and reproduces an
// uninterrupted run bit for bit (data order, learning rate, optimizer state, BatchNorm
// statistics and Dropout counters are all restored or functions of the epoch).
//
// A NaN or infinite loss stops the run with a qnum::Error naming the epoch, the batch and
// the last good checkpoint; nothing is written after the bad step, so `best` and `last`
// stay the last good ones.
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
#include "qnum/data/dataset.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/nn/nn.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/train/evaluate.hpp"
#include "qnum/train/progress.hpp"
#include "qnum/train/recipe.hpp"

namespace qnum::train {

/// The settings of a training run (MASE's CLI/TOML keys and defaults where it has them).
struct TrainConfig {
  std::string model = "jsc-tiny";  ///< recorded in checkpoints; the caller builds the model
  std::string dataset = "jsc";     ///< recorded in checkpoints; the caller loads the data
  int max_epochs = 20;
  std::int64_t batch_size = 256;
  double learning_rate = 1e-3;
  std::string optimizer = "adam";   ///< adam | adamw | sgd (see recipe.hpp)
  std::string schedule = "cosine";  ///< cosine | linear | constant, per epoch (see recipe.hpp)
  double weight_decay = 0;
  std::uint64_t seed = 0;  ///< the batch order; the model's initialisation is the caller's
  int threads = 0;         ///< > 0: qnum::set_num_threads(threads) when fit starts; 0: leave as is
  /// Where metrics and checkpoints go; "<model>" and "<dataset>" are replaced by the names.
  std::string output_dir = "qnum-runs/<model>_<dataset>";
  bool progress = true;  ///< progress on stderr (a live line on a terminal, else a line per epoch)
};

/// The config as JSON (the "config" field of checkpoint metadata).
inline nlohmann::json to_json(const TrainConfig& c) {
  return {{"model", c.model},
          {"dataset", c.dataset},
          {"max_epochs", c.max_epochs},
          {"batch_size", c.batch_size},
          {"learning_rate", c.learning_rate},
          {"optimizer", c.optimizer},
          {"schedule", c.schedule},
          {"weight_decay", c.weight_decay},
          {"seed", c.seed},
          {"threads", c.threads},
          {"output_dir", c.output_dir}};
}

/// c.output_dir with "<model>" and "<dataset>" replaced (an empty one means the default).
inline std::filesystem::path resolve_output_dir(const TrainConfig& c) {
  std::string s = c.output_dir.empty() ? TrainConfig{}.output_dir : c.output_dir;
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"<model>", c.model}, {"<dataset>", c.dataset}})
    for (std::size_t pos; (pos = s.find(key)) != std::string::npos;) s.replace(pos, key.size(), value);
  return s;
}

/// Checks a config: positive sizes, a finite learning rate, known optimizer and schedule.
inline void validate(const TrainConfig& c) {
  using qnum::detail::require;
  require(c.max_epochs >= 1, "train: max_epochs must be >= 1, got ", c.max_epochs);
  require(c.batch_size >= 1, "train: batch_size must be >= 1, got ", c.batch_size);
  require(std::isfinite(c.learning_rate) && c.learning_rate >= 0.0, "train: learning_rate ", c.learning_rate,
          " must be finite and >= 0");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "train: weight_decay ", c.weight_decay,
          " must be finite and >= 0");
  require(c.threads >= 0, "train: threads must be >= 0 (0 = default), got ", c.threads);
  parse_schedule(c.schedule);
  bool known = false;
  for (const auto& n : optimizer_names()) known = known || n == c.optimizer;
  require(known, "optimizer: unknown name '", c.optimizer, "' (known: adam, adamw, sgd)");
}

/// One line of metrics.jsonl. `epoch` is 1-based; losses are means over rows.
struct EpochRecord {
  int epoch = 0;
  double train_loss = 0, val_loss = 0, val_accuracy = 0, seconds = 0;
};

/// The record as a JSON object with keys epoch, train_loss, val_loss, val_accuracy, seconds.
inline nlohmann::json to_json(const EpochRecord& r) {
  return {{"epoch", r.epoch},
          {"train_loss", r.train_loss},
          {"val_loss", r.val_loss},
          {"val_accuracy", r.val_accuracy},
          {"seconds", r.seconds}};
}

/// The record from its JSON object (as written by to_json).
inline EpochRecord epoch_record_from_json(const nlohmann::json& j) {
  qnum::detail::require(j.is_object(), "metrics record: expected a JSON object, got ", j.dump());
  auto num = [&](const char* k) {
    qnum::detail::require(j.contains(k) && j[k].is_number(), "metrics record: '", k, "' missing in ", j.dump());
    return j[k].get<double>();
  };
  return {static_cast<int>(num("epoch")), num("train_loss"), num("val_loss"), num("val_accuracy"), num("seconds")};
}

/// Trains a classifier (a module mapping features [B, F] to logits [B, C]) as the file
/// comment describes.
class Trainer {
 public:
  /// Takes the model to train (shared: the caller keeps its handle) and the settings, which
  /// are validated here (unknown optimizer or schedule names are errors listing the known
  /// ones). The optimizer is built over the model's parameters now.
  Trainer(std::shared_ptr<nn::Module> model, TrainConfig config)
      : model_(std::move(model)), config_(std::move(config)) {
    qnum::detail::require(model_ != nullptr, "Trainer: the model is null");
    validate(config_);
    out_dir_ = resolve_output_dir(config_);
    opt_ = make_optimizer(config_.optimizer, model_->parameters(), config_.learning_rate, config_.weight_decay);
  }

  /// Trains for config.max_epochs epochs (or, with `resume`, continues the run saved as
  /// `last` in the output directory from its next epoch) and returns the records of every
  /// epoch of the run, resumed ones included.
  std::vector<EpochRecord> fit(const data::Dataset& train, const data::Dataset& val, bool resume = false) {
    qnum::detail::require(train.size() > 0, "train: the training set is empty");
    qnum::detail::require(val.size() > 0, "train: the validation set is empty");
    if (config_.threads > 0) set_num_threads(config_.threads);
    std::error_code ec;
    std::filesystem::create_directories(out_dir_, ec);
    qnum::detail::require(!ec, "train: cannot create output directory '", out_dir_.string(), "': ", ec.message());

    history_.clear();
    best_val_loss_ = std::numeric_limits<double>::infinity();
    have_last_ = false;
    int start = 0;
    if (resume) start = load_last();
    Progress progress(config_.progress);

    for (int e = start; e < config_.max_epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      const double lr = epoch_learning_rate(config_.schedule, config_.learning_rate, e, config_.max_epochs);
      opt_->set_lr(lr);
      model_->train();
      const auto epoch_batches =
          data::batches(train, {config_.batch_size, true, false, config_.seed}, static_cast<std::uint64_t>(e));
      const std::int64_t n = epoch_batches.size();
      double loss_sum = 0.0;
      std::int64_t rows = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const data::Batch b = epoch_batches[i];
        opt_->zero_grad();
        const Tensor loss = cross_entropy(model_->forward(b.features), b.labels);
        const float lv = loss.item();
        if (!std::isfinite(lv)) {
          progress.abort();
          fail_non_finite(lv, "loss", e + 1, " batch " + std::to_string(i + 1));
        }
        loss.backward();
        opt_->step();
        const auto br = static_cast<std::int64_t>(b.labels.size());
        loss_sum += static_cast<double>(lv) * static_cast<double>(br);
        rows += br;
        progress.batch(e + 1, config_.max_epochs, i + 1, n, loss_sum / static_cast<double>(rows));
      }
      const Evaluation ev = evaluate(*model_, val, config_.batch_size);
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
      progress.epoch(rec.epoch, config_.max_epochs, rec.train_loss, rec.val_loss, rec.val_accuracy, rec.seconds, lr,
                     best);
      if (on_epoch_ && !on_epoch_(rec)) break;
    }
    return history_;
  }

  /// Sets a function called after each epoch, once its metrics and checkpoints are written;
  /// returning false stops fit() there (as an interruption would: resume continues it).
  void on_epoch_end(std::function<bool(const EpochRecord&)> f) { on_epoch_ = std::move(f); }

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

 private:
  /// Loads `last` into the model and optimizer, restores history and best loss, rewrites
  /// metrics.jsonl from the history, and returns the 0-based epoch to continue with.
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
    write_metrics();
    return meta["epoch"].get<int>();
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
        // What passes made of the model (quantized layers, masks, adapters), so that the
        // checkpoint loads into a fresh model again (passes::restore_structure).
        {"structure", passes::describe_structure(*model_)}};
  }

  void write_metrics() const {
    std::string text;
    for (const auto& r : history_) {  // keys in the documented order, not sorted
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
  TrainConfig config_;
  std::filesystem::path out_dir_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::vector<EpochRecord> history_;
  double best_val_loss_ = std::numeric_limits<double>::infinity();
  bool have_last_ = false;
  std::function<bool(const EpochRecord&)> on_epoch_;
};

}  // namespace qnum::train
