// Run settings of `qnum train`: the TOML file of `--config run.toml` and the command-line
// options, both as a set of overrides of train::TrainConfig. Precedence as in MASE's `ch`
// (spec/system.md §11): defaults < TOML file < explicit command-line options.
//
// TOML keys (top level, MASE's names where MASE has the setting):
//   model, dataset                      strings (MASE)
//   max_epochs, batch_size, seed        integers (MASE)
//   learning_rate                       number (MASE)
//   optimizer, schedule, output_dir     strings (qnum; MASE spells them training_optimizer
//   weight_decay, threads               and project_dir, accepted as aliases)
//   max_steps, t_max, eta_min           MASE's (Lightning's max_steps; the cosine schedule's
//                                       half period in epochs and floor)
//   project                             MASE's: the run folder becomes <project_dir or
//                                       mase_output>/<project>/software/training_ckpts
//                                       unless output_dir (or --output-dir) names one
//   task                                MASE's; only "classification" / "cls" (the only task)
//   log_every_n_steps                   MASE's: a metrics.jsonl row every N optimizer steps
//   tensorboard                         qnum's: the folder of the run's TensorBoard log
//   accelerator                         MASE's: cpu, or gpu / cuda / auto = cuda where this
//                                       build and machine have a CUDA device, else the CPU
//                                       with one line saying so (accelerator_device)
//   precision                           Lightning's: fp32 (32-true) or bf16 (bf16-mixed)
// MASE's other keys (accelerator, passes, search, ...; qnum/io/mase_config.hpp) are accepted
// with one line on stderr saying why qnum train ignores them; any other key is a qnum::Error
// naming it and listing the known ones. A value of the
// wrong type is an error naming the key and the type expected. Messages start with
// "FILE:LINE:COLUMN:" (toml++ reports syntax errors the same way).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "qnum/core/error.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/io/toml_guard.hpp"
#include "qnum/train/trainer.hpp"
#include "qnum/io/config_file.hpp"

namespace qnum::cli {

/// Settings given explicitly (in a TOML file or on the command line); unset ones leave the
/// TrainConfig value as it is.
struct RunOverrides {
  std::optional<std::string> model, dataset, optimizer, schedule, output_dir, device, project, project_dir,
      tensorboard, precision;
  std::optional<int> max_epochs, threads, t_max;
  std::optional<std::int64_t> batch_size, max_steps, log_every_n_steps;
  std::optional<double> learning_rate, weight_decay, eta_min;
  std::optional<std::uint64_t> seed;

  /// Sets every given field of `c`.
  void apply(train::TrainConfig& c) const {
    if (model) c.model = *model;
    if (dataset) c.dataset = *dataset;
    if (optimizer) c.optimizer = *optimizer;
    if (schedule) c.schedule = *schedule;
    if (output_dir)
      c.output_dir = *output_dir;
    else if (project)
      c.output_dir = mase::project_output_dir(project_dir.value_or(""), *project, mase::Command::train);
    else if (project_dir)
      c.output_dir = *project_dir;
    if (device) c.device = *device;
    if (max_steps) c.max_steps = *max_steps;
    if (t_max) c.t_max = *t_max;
    if (eta_min) c.eta_min = *eta_min;
    if (max_epochs) c.max_epochs = *max_epochs;
    if (threads) c.threads = *threads;
    if (batch_size) c.batch_size = *batch_size;
    if (learning_rate) c.learning_rate = *learning_rate;
    if (weight_decay) c.weight_decay = *weight_decay;
    if (seed) c.seed = *seed;
    if (log_every_n_steps) c.log_every_n_steps = *log_every_n_steps;
    if (tensorboard) c.tensorboard_dir = *tensorboard;
    if (precision) c.precision = *precision;
  }

  /// The fields given in `later` replace these.
  void merge(const RunOverrides& later) {
    auto take = [](auto& mine, const auto& theirs) {
      if (theirs) mine = theirs;
    };
    take(model, later.model);
    take(dataset, later.dataset);
    take(optimizer, later.optimizer);
    take(schedule, later.schedule);
    // A project named later (on the command line) beats an earlier output_dir (the file's).
    if (!later.output_dir && (later.project || later.project_dir)) output_dir.reset();
    take(output_dir, later.output_dir);
    take(project, later.project);
    take(project_dir, later.project_dir);
    take(device, later.device);
    take(max_steps, later.max_steps);
    take(t_max, later.t_max);
    take(eta_min, later.eta_min);
    take(max_epochs, later.max_epochs);
    take(threads, later.threads);
    take(batch_size, later.batch_size);
    take(learning_rate, later.learning_rate);
    take(weight_decay, later.weight_decay);
    take(seed, later.seed);
    take(log_every_n_steps, later.log_every_n_steps);
    take(tensorboard, later.tensorboard);
    take(precision, later.precision);
  }
};

/// The TOML keys read_run_config accepts (qnum's spellings), for messages and docs.
inline constexpr std::string_view kRunConfigKeys =
    "model, dataset, max_epochs, batch_size, learning_rate, optimizer, schedule, weight_decay, seed, threads, "
    "device, output_dir, task, max_steps, t_max, eta_min, project, log_every_n_steps, tensorboard, accelerator, "
    "precision (MASE spellings: training_optimizer = optimizer, project_dir = output_dir)";

/// The device MASE's `accelerator` (Lightning's) means here: "cpu" is the CPU; "gpu", "cuda"
/// and "auto" are cuda:0 where a CUDA backend is linked and sees a device, else the CPU, with
/// a line on stderr saying so for gpu/cuda (a MASE config written for a GPU machine still runs).
/// Other values (tpu, mps, ...) are a qnum::Error naming the ones qnum knows.
inline std::string accelerator_device(std::string_view value, const std::string& where) {
  if (value == "cpu") return "cpu";
  qnum::detail::require(value == "gpu" || value == "cuda" || value == "auto", where, "accelerator '", value,
                        "' is not one qnum trains on (cpu, gpu, cuda or auto)");
  if (device_available(Device::cuda(0))) return Device::cuda(0).str();
  if (value != "auto")
    std::fprintf(stderr, "note: %saccelerator %s: no CUDA device in this build or on this machine: training on the CPU\n",
                 where.c_str(), std::string(value).c_str());
  return "cpu";
}

namespace detail {

/// "FILE:LINE:COLUMN: " of a node or key.
inline std::string where(const std::string& file, const toml::source_region& r) {
  return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column) + ": ";
}

inline std::string type_name(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

}  // namespace detail

/// A run config's text (see the file comment); `file` names it in errors. qnum::Error for TOML
/// syntax errors, unknown keys and values of the wrong type.
inline RunOverrides parse_run_config(std::string_view text, const std::string& file) {
  using qnum::detail::fail;
  using qnum::detail::require;
  const toml::table table = io::parse_toml_text(text, file);

  RunOverrides o;
  std::optional<std::string> optimizer_spelling, output_spelling;
  for (auto&& entry : table) {
    const std::string key(entry.first.str());
    const toml::node& v = entry.second;
    const std::string at = detail::where(file, entry.first.source());
    auto expected = [&](std::string_view what) {
      fail(at, "'", key, "' must be ", what, ", not ", detail::type_name(v));
    };
    auto text = [&]() -> std::string {
      if (!v.is_string()) expected("a string");
      return std::string(v.as_string()->get());
    };
    auto integer = [&](std::int64_t lo, std::int64_t hi) -> std::int64_t {
      if (!v.is_integer()) expected("an integer");
      const std::int64_t x = v.as_integer()->get();
      require(x >= lo && x <= hi, at, "'", key, "' = ", x, " is out of range [", lo, ", ", hi, "]");
      return x;
    };
    auto number = [&]() -> double {
      if (v.is_integer()) return static_cast<double>(v.as_integer()->get());
      if (!v.is_floating_point()) expected("a number");
      return v.as_floating_point()->get();
    };
    // The same setting under qnum's and MASE's name is ambiguous.
    auto once = [&](std::optional<std::string>& seen) {
      require(!seen, at, "'", key, "' repeats '", seen.value_or(""), "' (the same setting; keep one)");
      seen = key;
    };
    constexpr auto int_max = std::numeric_limits<int>::max();
    constexpr auto i64_max = std::numeric_limits<std::int64_t>::max();
    if (key == "model")
      o.model = text();
    else if (key == "dataset")
      o.dataset = text();
    else if (key == "max_epochs")
      o.max_epochs = static_cast<int>(integer(1, int_max));
    else if (key == "batch_size")
      o.batch_size = integer(1, i64_max);
    else if (key == "learning_rate")
      o.learning_rate = number();
    else if (key == "weight_decay")
      o.weight_decay = number();
    else if (key == "seed")
      o.seed = static_cast<std::uint64_t>(integer(0, i64_max));
    else if (key == "threads")
      o.threads = static_cast<int>(integer(0, int_max));
    else if (key == "device")
      o.device = Device::parse(text()).str();
    else if (key == "accelerator")
      o.device = accelerator_device(text(), at);
    else if (key == "optimizer" || key == "training_optimizer") {
      once(optimizer_spelling);
      o.optimizer = text();
    } else if (key == "output_dir" || key == "project_dir") {
      once(output_spelling);
      (key == "output_dir" ? o.output_dir : o.project_dir) = text();
    } else if (key == "project")
      o.project = text();
    else if (key == "max_steps")
      o.max_steps = integer(-1, i64_max);
    else if (key == "t_max")
      o.t_max = static_cast<int>(integer(0, int_max));
    else if (key == "eta_min")
      o.eta_min = number();
    else if (key == "schedule")
      o.schedule = text();
    else if (key == "log_every_n_steps")
      o.log_every_n_steps = integer(0, i64_max);
    else if (key == "tensorboard")
      o.tensorboard = text();
    else if (key == "precision") {  // Lightning's Trainer(precision=): "bf16-mixed", "32-true", or qnum's names
      o.precision = text();
      require(find_precision(*o.precision).has_value(), at, "precision '", *o.precision, "' is unknown (known: ",
              kKnownPrecisions, ")");
    } else if (key == "task") {
      const auto t = text();
      require(t == "classification" || t == "cls", at, "task '", t,
              "' is not supported (qnum train does classification: task = \"classification\" or \"cls\")");
    } else if (const auto* k = mase::find_top_level_key(key)) {
      // MASE's keys qnum train does not use: one line each (mase_config.hpp says why), then run.
      std::ostringstream value;
      if (v.is_string())
        value << '"' << v.as_string()->get() << '"';  // as JSON and MASE's file write it
      else if (!v.is_table() && !v.is_array())
        v.visit([&](const auto& x) { value << x; });
      std::fprintf(stderr, "note: %s%s\n", at.c_str(), mase::ignored_note(*k, value.str(), mase::Command::train).c_str());
    } else
      fail(at, "unknown key '", key, "' (known keys: ", kRunConfigKeys, ")");
  }
  return o;
}

/// Reads a run config file (parse_run_config); also a qnum::Error for a missing file.
inline RunOverrides read_run_config(const std::filesystem::path& file) {
  qnum::detail::require(std::filesystem::is_regular_file(file), "--config: cannot open '", file.string(), "'");
  return parse_run_config(read_file(file), file.string());
}

}  // namespace qnum::cli
