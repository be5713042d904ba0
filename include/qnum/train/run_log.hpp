// What a training run records as it goes: metrics.jsonl (one row per epoch, and with
// log_every_n_steps > 0 one per N optimizer steps, MASE's log_every_n_steps) and, with
// tensorboard_dir set, TensorBoard event files (io/tensorboard.hpp) with the same numbers.
//
// metrics.jsonl rows, in step order (a step row precedes the row of the epoch it is in):
//   {"step":S,"epoch":E,"loss":L,"learning_rate":R[,"grad_norm":G]}        every N steps
//   {"epoch":E,"train_loss":..,"val_loss":..,"val_accuracy":..,"seconds":..} every epoch
// TensorBoard scalars, on the global optimizer step (1-based) as x axis, with Hugging Face
// Trainer's tags: train/loss, train/learning_rate, train/grad_norm, train/epoch every N steps
// (every step when N is 0), and train/epoch_loss, eval/loss, eval/accuracy at each epoch's
// last step. grad_norm is the global norm before clipping, on a CPU run always, on a device
// when clipping computes it (max_grad_norm > 0).
//
// A fresh run starts both logs empty; a resumed one keeps what was recorded up to the
// checkpoint it resumes from (steps and epochs after it, from a killed run, are dropped and
// recorded again, with the same values: the run is deterministic).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"
#include "qnum/io/tensorboard.hpp"
#include "qnum/train/recipe.hpp"

namespace qnum::train {

/// One epoch row of metrics.jsonl. `epoch` is 1-based; losses are means over rows.
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

/// One step row of metrics.jsonl: the 1-based global step, its epoch, the batch's loss, the
/// learning rate the step used and the gradient norm before clipping (when known).
struct StepRecord {
  std::int64_t step = 0;
  int epoch = 0;
  double loss = 0, learning_rate = 0;
  std::optional<double> grad_norm;
};

/// The metrics.jsonl line of a step (keys in the documented order).
inline std::string metrics_line(const StepRecord& r) {
  nlohmann::ordered_json line = {
      {"step", r.step}, {"epoch", r.epoch}, {"loss", r.loss}, {"learning_rate", r.learning_rate}};
  if (r.grad_norm) line["grad_norm"] = *r.grad_norm;
  return line.dump() + "\n";
}

/// The metrics.jsonl line of an epoch (keys in the documented order).
inline std::string metrics_line(const EpochRecord& r) {
  const nlohmann::ordered_json line = {{"epoch", r.epoch},
                                       {"train_loss", r.train_loss},
                                       {"val_loss", r.val_loss},
                                       {"val_accuracy", r.val_accuracy},
                                       {"seconds", r.seconds}};
  return line.dump() + "\n";
}

/// The step rows of a metrics.jsonl written by RunLog, of epochs up to `max_epoch`. A torn
/// last line (a run killed while appending) is dropped; any other unreadable line is a
/// qnum::Error naming the file and line. A missing file has none.
inline std::vector<StepRecord> read_step_rows(const std::filesystem::path& file, int max_epoch) {
  std::vector<StepRecord> rows;
  if (!std::filesystem::exists(file)) return rows;
  const std::string text = read_file(file);
  std::size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // torn last line
    const std::string where = file.string() + ":" + std::to_string(line_no);
    const nlohmann::json j = io::parse_json(std::string_view(text).substr(pos, nl - pos), where, false);
    pos = nl + 1;
    qnum::detail::require(j.is_object(), where, ": not a metrics row");
    if (!j.contains("step")) continue;  // an epoch row: the checkpoint's history has those
    StepRecord r;
    try {
      r.step = j.at("step").get<std::int64_t>();
      r.epoch = j.at("epoch").get<int>();
      r.loss = j.at("loss").get<double>();
      r.learning_rate = j.at("learning_rate").get<double>();
      if (j.contains("grad_norm")) r.grad_norm = j["grad_norm"].get<double>();
    } catch (const nlohmann::json::exception&) {
      qnum::detail::fail(where, ": not a step row: ", j.dump());
    }
    if (r.epoch <= max_epoch) rows.push_back(r);
  }
  return rows;
}

/// The run's metrics.jsonl rows and TensorBoard log (see the file comment).
class RunLog {
 public:
  /// Opens the logs of a run whose metrics file is `metrics_file`: a fresh one (resume_epoch
  /// < 0) empties them, a resumed one keeps what was recorded up to `resume_epoch` (0-based
  /// epochs done) and `resume_step` (optimizer steps done).
  RunLog(const TrainConfig& c, std::filesystem::path metrics_file, int resume_epoch, std::int64_t resume_step)
      : every_(c.log_every_n_steps), metrics_file_(std::move(metrics_file)) {
    if (resume_epoch >= 0 && every_ > 0) steps_ = read_step_rows(metrics_file_, resume_epoch);
    if (c.tensorboard_dir.empty()) return;
    const std::filesystem::path dir = c.tensorboard_dir;
    if (resume_epoch >= 0)
      io::tensorboard::truncate_log(dir, resume_step);
    else
      io::tensorboard::clear_log(dir);
    tb_ = std::make_unique<io::tensorboard::EventWriter>(dir);
  }

  /// Whether 1-based `step` is recorded (as a row or a TensorBoard scalar).
  bool records_step(std::int64_t step) const {
    if (every_ > 0) return step % every_ == 0;
    return tb_ != nullptr;
  }

  /// Records a step (records_step(r.step) must hold); `epochs_done` is the fractional epoch
  /// at its end (TensorBoard's train/epoch).
  void step(const StepRecord& r, double epochs_done) {
    if (every_ > 0 && r.step % every_ == 0) {
      steps_.push_back(r);
      append(metrics_line(r));
    }
    if (!tb_) return;
    tb_->add_scalar("train/loss", static_cast<float>(r.loss), r.step);
    tb_->add_scalar("train/learning_rate", static_cast<float>(r.learning_rate), r.step);
    if (r.grad_norm) tb_->add_scalar("train/grad_norm", static_cast<float>(*r.grad_norm), r.step);
    tb_->add_scalar("train/epoch", static_cast<float>(epochs_done), r.step);
  }

  /// Rewrites metrics.jsonl atomically: the step rows and `epochs` in step order.
  void write_metrics(const std::vector<EpochRecord>& epochs) const {
    std::string text;
    std::size_t s = 0;
    for (const auto& e : epochs) {
      for (; s < steps_.size() && steps_[s].epoch <= e.epoch; ++s) text += metrics_line(steps_[s]);
      text += metrics_line(e);
    }
    for (; s < steps_.size(); ++s) text += metrics_line(steps_[s]);
    write_file_atomic(metrics_file_, text);
  }

  /// Records an epoch's scalars in TensorBoard at its last step (metrics.jsonl: write_metrics).
  void epoch(const EpochRecord& r, std::int64_t step) {
    if (!tb_) return;
    tb_->add_scalar("train/epoch_loss", static_cast<float>(r.train_loss), step);
    tb_->add_scalar("eval/loss", static_cast<float>(r.val_loss), step);
    tb_->add_scalar("eval/accuracy", static_cast<float>(r.val_accuracy), step);
  }

 private:
  void append(const std::string& line) const {
    std::ofstream out(metrics_file_, std::ios::app | std::ios::binary);
    out << line;
    out.flush();
    qnum::detail::require(static_cast<bool>(out), "train: cannot append to '", metrics_file_.string(), "'");
  }

  std::int64_t every_;
  std::filesystem::path metrics_file_;
  std::vector<StepRecord> steps_;
  std::unique_ptr<io::tensorboard::EventWriter> tb_;
};

}  // namespace qnum::train
