// The recipe of a training run (TrainConfig: every setting of the one training loop, with
// the two defaults a model starts from: MASE's for feature tables, table_recipe(), and the
// Hugging Face Trainer's shape for text, text_recipe()), and its optimizer and learning-rate
// schedule, chosen by name as MASE's Lightning trainer does (spec/system.md §10.3):
//   adam   torch.optim.Adam(lr, weight_decay)
//   adamw  torch.optim.AdamW(lr, weight_decay)
//   sgd    torch.optim.SGD(lr, momentum 0.9, Nesterov, weight_decay 5e-4 — MASE hard-codes
//          it; qnum uses the run's weight_decay instead when that is > 0)
// Schedules with schedule_unit "epoch" set the rate once at the start of each epoch and hold
// it for all its steps, as MASE's CosineAnnealingLR stepped by Lightning once per epoch:
//   cosine    eta_min + (lr - eta_min)·(1 + cos(π·e / T)) / 2, T = t_max (MASE's key; default
//             max_epochs), eta_min 1e-6 unless set (MASE means to pass both to
//             CosineAnnealingLR; its trainer drops them, spec/system.md §10.3)
//   linear    lr·(1 - e / max_epochs)
//   constant  lr
// with e the 0-based epoch. With schedule_unit "step" (HF's Trainer) the rate is set before
// every optimizer step: lr·factor(step) with a linear warm-up over warmup_steps (or
// ceil(warmup_ratio · total steps)), then linear decay to 0, cosine or constant
// (nn/schedule.hpp). Both are functions of the epoch or step alone, so runs resume exactly.
// max_steps > 0 (Lightning's) stops training after that many optimizer steps, mid-epoch if
// need be, and caps the total a per-step schedule spans.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numbers>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/nn/schedule.hpp"
#include "qnum/tensor/precision.hpp"

namespace qnum::train {

/// The optimizer names make_optimizer knows.
inline std::vector<std::string> optimizer_names() { return {"adam", "adamw", "sgd"}; }
/// The schedule names epoch_learning_rate knows.
inline std::vector<std::string> schedule_names() { return {"constant", "linear", "cosine"}; }
/// The floor of MASE's cosine schedule (CosineAnnealingLR's eta_min).
inline constexpr double kCosineEtaMin = 1e-6;
/// The weight decay MASE's SGD hard-codes.
inline constexpr double kMaseSgdWeightDecay = 5e-4;

/// An optimizer over `params` by name (see the file comment); an unknown name is a
/// qnum::Error listing the known ones.
inline std::unique_ptr<nn::Optimizer> make_optimizer(std::string_view name, std::vector<Tensor> params, double lr,
                                                     double weight_decay) {
  qnum::detail::require(std::isfinite(weight_decay) && weight_decay >= 0.0, "optimizer: weight_decay ", weight_decay,
                        " must be finite and >= 0");
  if (name == "adam")
    return std::make_unique<nn::Adam>(std::move(params), nn::AdamOptions{.lr = lr, .weight_decay = weight_decay});
  if (name == "adamw")
    return std::make_unique<nn::AdamW>(std::move(params), nn::AdamWOptions{.lr = lr, .weight_decay = weight_decay});
  if (name == "sgd")
    return std::make_unique<nn::SGD>(
        std::move(params), nn::SGDOptions{.lr = lr,
                                          .momentum = 0.9,
                                          .weight_decay = weight_decay > 0.0 ? weight_decay : kMaseSgdWeightDecay,
                                          .nesterov = true});
  qnum::detail::fail("optimizer: unknown name '", name, "' (known: adam, adamw, sgd)");
}

/// Checks a schedule name; an unknown one is a qnum::Error listing the known ones.
inline nn::ScheduleKind parse_schedule(std::string_view name) { return nn::parse_schedule_kind(name); }

/// The learning rate of 0-based `epoch` of a `max_epochs` run (see the file comment).
inline double epoch_learning_rate(std::string_view schedule, double lr, int epoch, int max_epochs, int t_max = 0,
                                  double eta_min = kCosineEtaMin) {
  qnum::detail::require(max_epochs >= 1 && epoch >= 0, "schedule: epoch ", epoch, " of ", max_epochs,
                        " (need max_epochs >= 1, epoch >= 0)");
  switch (parse_schedule(schedule)) {
    case nn::ScheduleKind::constant:
      return lr;
    case nn::ScheduleKind::linear:
      return lr * nn::linear_schedule_with_warmup(epoch, 0, max_epochs);
    case nn::ScheduleKind::cosine: {  // CosineAnnealingLR(T_max = t_max or max_epochs, eta_min), closed form
      const double period = t_max > 0 ? t_max : max_epochs;
      return eta_min + (lr - eta_min) * (1.0 + std::cos(std::numbers::pi * static_cast<double>(epoch) / period)) / 2.0;
    }
  }
  return lr;
}

/// The learning rate of 0-based `step` of a per-step schedule with `warmup` warm-up steps
/// out of `total` (see the file comment).
inline double step_learning_rate(std::string_view schedule, double lr, std::int64_t step, std::int64_t warmup,
                                 std::int64_t total) {
  switch (parse_schedule(schedule)) {
    case nn::ScheduleKind::constant:
      return lr * nn::constant_schedule(step, warmup);
    case nn::ScheduleKind::cosine:
      return lr * nn::cosine_schedule_with_warmup(step, warmup, total);
    case nn::ScheduleKind::linear:
      break;
  }
  return lr * nn::linear_schedule_with_warmup(step, warmup, total);
}

/// The settings of a training run (MASE's CLI/TOML keys and defaults where it has them; HF
/// TrainingArguments names for the per-step settings). The defaults are table_recipe()'s.
struct TrainConfig {
  std::string model = "jsc-tiny";  ///< recorded in checkpoints; the caller builds the model
  std::string dataset = "jsc";     ///< recorded in checkpoints; the caller loads the data
  int max_epochs = 20;
  std::int64_t max_steps = -1;  ///< > 0: stop after this many optimizer steps (Lightning's max_steps); -1: none
  std::int64_t batch_size = 256;
  std::int64_t eval_batch_size = 0;  ///< validation/test batches; 0: batch_size
  double learning_rate = 1e-3;
  std::string optimizer = "adam";       ///< adam | adamw | sgd
  std::string schedule = "cosine";      ///< cosine | linear | constant
  std::string schedule_unit = "epoch";  ///< epoch (MASE) | step (HF, with warm-up)
  double warmup_ratio = 0;              ///< step schedules: warm-up = ceil(ratio · total) unless warmup_steps > 0
  int t_max = 0;                        ///< cosine per epoch: the half period in epochs (MASE's t_max); 0: max_epochs
  double eta_min = kCosineEtaMin;       ///< cosine per epoch: the floor (MASE's eta_min)
  std::int64_t warmup_steps = 0;
  double max_grad_norm = 0;  ///< > 0: clip the global gradient norm to it before each step
  double weight_decay = 0;
  std::int64_t max_length = 0;          ///< tokens per text (recorded; the data were tokenized with it); 0: features
  std::int64_t pad_to_multiple_of = 1;  ///< token batches: round the padded length up to a multiple
  std::uint64_t seed = 0;  ///< the batch order; the model's initialisation is the caller's
  int threads = 0;         ///< > 0: qnum::set_num_threads(threads) when fit starts; 0: leave as is
  /// Where the model trains: "cpu", "cuda" (the Trainer moves the model there; checkpoints
  /// hold host values either way, so a run resumes or evaluates on any device).
  std::string device = "cpu";
  /// Where metrics and checkpoints go; "<model>" and "<dataset>" are replaced by the names.
  std::string output_dir = "qnum-runs/<model>_<dataset>";
  bool progress = true;  ///< progress on stderr (a live line on a terminal, else a line per epoch)
  /// > 0: a metrics.jsonl row every N optimizer steps (MASE's log_every_n_steps), and
  /// TensorBoard's step scalars at that interval; 0: epoch rows only (TensorBoard: every step).
  std::int64_t log_every_n_steps = 0;
  /// Non-empty: the folder of this run's TensorBoard event files (train/run_log.hpp).
  std::string tensorboard_dir;
  /// The products' precision (tensor/precision.hpp): "fp32", or "bf16" (bf16 operands, fp32
  /// accumulation; weights, optimizer and everything else fp32). Lightning's "bf16-mixed" and
  /// "32-true" are read too. Checkpoints hold fp32 weights either way.
  std::string precision = "fp32";

  std::int64_t evaluation_batch_size() const { return eval_batch_size > 0 ? eval_batch_size : batch_size; }
};

/// MASE's defaults for feature tables (JSC): Adam, lr 1e-3, cosine per epoch, 20 epochs of
/// 256 rows, no clipping.
inline TrainConfig table_recipe() { return {}; }

/// The text-classification recipe (BERT): one epoch of 32 texts per step, AdamW lr 1e-3 with
/// weight decay 0.01, linear warm-up over 6% of the steps then linear decay per step,
/// gradient clipping 1.0, batch order seed 42 (HF's). Measured on bert-tiny/IMDb at 128
/// tokens (docs/results.md): 0.84 validation accuracy in one epoch; the same at batch 8 stays
/// at 0.66, and HF's own defaults (lr 5e-5, no warm-up or decay) reach 0.78.
inline TrainConfig text_recipe() {
  TrainConfig c;
  c.model = "bert-tiny";
  c.dataset = "imdb";
  c.max_epochs = 1;
  c.batch_size = 32;
  c.eval_batch_size = 64;
  c.learning_rate = 1e-3;
  c.optimizer = "adamw";
  c.schedule = "linear";
  c.schedule_unit = "step";
  c.warmup_ratio = 0.06;
  c.max_grad_norm = 1.0;
  c.weight_decay = 0.01;
  c.max_length = 512;
  c.seed = 42;
  return c;
}

/// The config as JSON (the "config" field of checkpoint metadata).
inline nlohmann::json to_json(const TrainConfig& c) {
  return {{"model", c.model},
          {"dataset", c.dataset},
          {"max_epochs", c.max_epochs},
          {"max_steps", c.max_steps},
          {"batch_size", c.batch_size},
          {"eval_batch_size", c.eval_batch_size},
          {"learning_rate", c.learning_rate},
          {"optimizer", c.optimizer},
          {"schedule", c.schedule},
          {"schedule_unit", c.schedule_unit},
          {"warmup_ratio", c.warmup_ratio},
          {"warmup_steps", c.warmup_steps},
          {"t_max", c.t_max},
          {"eta_min", c.eta_min},
          {"max_grad_norm", c.max_grad_norm},
          {"weight_decay", c.weight_decay},
          {"max_length", c.max_length},
          {"pad_to_multiple_of", c.pad_to_multiple_of},
          {"seed", c.seed},
          {"threads", c.threads},
          {"output_dir", c.output_dir},
          {"log_every_n_steps", c.log_every_n_steps},
          {"tensorboard_dir", c.tensorboard_dir},
          {"precision", c.precision}};
}

/// The config saved as JSON by to_json (keys it lacks keep `defaults`' values); `what` names
/// the source in errors.
inline TrainConfig config_from_json(const nlohmann::json& j, TrainConfig defaults, const std::string& what) {
  qnum::detail::require(j.is_object(), what, ": 'config' is not an object");
  auto get = [&](const char* key, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if (!j.contains(key) || j[key].is_null()) return;
    try {
      field = j[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      qnum::detail::fail(what, ": config '", key, "' = ", j[key].dump(), " has the wrong type");
    }
  };
  TrainConfig& c = defaults;
  get("model", c.model);
  get("dataset", c.dataset);
  get("max_epochs", c.max_epochs);
  get("max_steps", c.max_steps);
  get("batch_size", c.batch_size);
  get("eval_batch_size", c.eval_batch_size);
  get("learning_rate", c.learning_rate);
  get("optimizer", c.optimizer);
  get("schedule", c.schedule);
  get("schedule_unit", c.schedule_unit);
  get("warmup_ratio", c.warmup_ratio);
  get("warmup_steps", c.warmup_steps);
  get("t_max", c.t_max);
  get("eta_min", c.eta_min);
  get("max_grad_norm", c.max_grad_norm);
  get("weight_decay", c.weight_decay);
  get("max_length", c.max_length);
  get("pad_to_multiple_of", c.pad_to_multiple_of);
  get("seed", c.seed);
  get("threads", c.threads);
  get("output_dir", c.output_dir);
  get("log_every_n_steps", c.log_every_n_steps);
  get("tensorboard_dir", c.tensorboard_dir);
  get("precision", c.precision);
  return c;
}

/// c.output_dir with "<model>" and "<dataset>" replaced (an empty one means the default).
inline std::filesystem::path resolve_output_dir(const TrainConfig& c) {
  std::string s = c.output_dir.empty() ? TrainConfig{}.output_dir : c.output_dir;
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"<model>", c.model}, {"<dataset>", c.dataset}})
    for (std::size_t pos; (pos = s.find(key)) != std::string::npos;) s.replace(pos, key.size(), value);
  return s;
}

/// Checks a config: positive sizes, finite rates, known optimizer, schedule and unit.
inline void validate(const TrainConfig& c) {
  using qnum::detail::require;
  require(c.max_epochs >= 1, "train: max_epochs must be >= 1, got ", c.max_epochs);
  require(c.max_steps == -1 || c.max_steps >= 1, "train: max_steps must be >= 1 (or -1: no limit), got ", c.max_steps);
  require(c.t_max >= 0, "train: t_max must be >= 0 (0: max_epochs), got ", c.t_max);
  require(std::isfinite(c.eta_min) && c.eta_min >= 0.0, "train: eta_min ", c.eta_min, " must be finite and >= 0");
  require(c.batch_size >= 1, "train: batch_size must be >= 1, got ", c.batch_size);
  require(c.eval_batch_size >= 0, "train: eval_batch_size must be >= 0 (0 = batch_size), got ", c.eval_batch_size);
  require(std::isfinite(c.learning_rate) && c.learning_rate >= 0.0, "train: learning_rate ", c.learning_rate,
          " must be finite and >= 0");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "train: weight_decay ", c.weight_decay,
          " must be finite and >= 0");
  require(c.schedule_unit == "epoch" || c.schedule_unit == "step", "train: schedule_unit '", c.schedule_unit,
          "' is unknown (known: epoch, step)");
  require(c.warmup_ratio >= 0.0 && c.warmup_ratio <= 1.0, "train: warmup_ratio ", c.warmup_ratio, " must be in [0, 1]");
  require(c.warmup_steps >= 0, "train: warmup_steps must be >= 0, got ", c.warmup_steps);
  require(c.schedule_unit == "step" || (c.warmup_ratio == 0 && c.warmup_steps == 0),
          "train: warm-up needs a per-step schedule (schedule_unit step); per-epoch schedules have none");
  require(std::isfinite(c.max_grad_norm), "train: max_grad_norm must be finite");
  require(c.max_length >= 0, "train: max_length must be >= 0, got ", c.max_length);
  require(c.pad_to_multiple_of >= 1, "train: pad_to_multiple_of must be >= 1");
  require(c.threads >= 0, "train: threads must be >= 0 (0 = default), got ", c.threads);
  require(c.log_every_n_steps >= 0, "train: log_every_n_steps must be >= 0 (0: once per epoch), got ",
          c.log_every_n_steps);
  const Precision precision = parse_precision(c.precision);
  require(precision == Precision::fp32 || c.device == "cpu", "train: precision ", c.precision,
          " runs on the CPU only (device ", c.device, "); use precision fp32 there");
  std::error_code ec;
  require(c.tensorboard_dir.empty() || !std::filesystem::exists(c.tensorboard_dir, ec) ||
              std::filesystem::is_directory(c.tensorboard_dir, ec),
          "train: the TensorBoard folder '", c.tensorboard_dir, "' is a file");
  parse_schedule(c.schedule);
  bool known = false;
  for (const auto& n : optimizer_names()) known = known || n == c.optimizer;
  require(known, "optimizer: unknown name '", c.optimizer, "' (known: adam, adamw, sgd)");
}

/// clip_grad_norm for parameters on a device, without waiting for it: the global Σg², the
/// norm and the factor stay on the device (sum_squares_multi, grad_norm_factor) and every
/// gradient is scaled by the factor there (scale_multi; a gradient whose memory another
/// tensor shares is copied first). The norm comes back in `norm` (read it when needed).
inline void clip_device_grad_norm(std::vector<Tensor>& params, double max_norm, DeviceArray& norm) {
  const Device d = params.front().device();
  DeviceBackend& be = device_backend(d);
  std::vector<float*> grads;
  std::vector<std::size_t> sizes;
  for (auto& p : params) {
    DeviceArray& g = p.impl_ptr()->dgrad;
    if (g.empty()) continue;
    if (g.use_count() > 1) {  // scaled in place below: own it first
      DeviceArray copy(d, g.size());
      be.copy_on_device(copy.data(), g.data(), g.size() * sizeof(float));
      g = std::move(copy);
    }
    grads.push_back(g.data());
    sizes.push_back(g.size());
  }
  DeviceArray scalars(d, 2);  // Σg², factor
  norm = DeviceArray(d, 1);
  be.sum_squares_multi(grads.data(), sizes.data(), grads.size(), scalars.data());
  be.grad_norm_factor(scalars.data(), static_cast<float>(max_norm), norm.data(), scalars.data() + 1);
  be.scale_multi(grads.data(), sizes.data(), grads.size(), scalars.data() + 1);
}

/// Scales the gradients of `params` so that their global L2 norm is at most max_norm
/// (torch.nn.utils.clip_grad_norm_: factor max_norm / (norm + 1e-6) when it is below 1).
/// Returns the norm before clipping.
inline double clip_grad_norm(std::vector<Tensor>& params, double max_norm) {
  if (!params.empty() && params.front().is_cuda()) {
    DeviceArray norm;
    clip_device_grad_norm(params, max_norm, norm);
    float v = 0.0f;
    norm.backend().copy_to_host(&v, norm.data(), sizeof(float));
    return v;
  }
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

}  // namespace qnum::train
