// MASE's configuration files and `ch` options as qnum reads them: one table of every
// top-level key MASE's TOML files and its CLI use (MASE's CLI_DEFAULTS in chop/cli.py plus
// the [passes], [transform] and [search] tables; spec/system.md §11), each either honoured
// (with the qnum setting it becomes) or accepted with the one line that says why qnum
// ignores it. A key MASE does not know stays an error. Precedence is MASE's: command-line
// flags over the file over defaults (merge_settings).
//
// Each command reads the keys keys_read_by() lists; a MASE key it does not read is accepted
// with a note naming the command that uses it, or why none does (a MASE file is shared by
// all four actions).
#pragma once

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"

namespace qnum::mase {

/// The four actions of MASE's `ch` (qnum's commands of the same names).
enum class Command { train, test, transform, search };

inline std::string_view command_name(Command c) {
  switch (c) {
    case Command::train:
      return "train";
    case Command::test:
      return "test";
    case Command::transform:
      return "transform";
    default:
      return "search";
  }
}

/// One top-level key of MASE's configs (= the dest of one `ch` option).
struct TopLevelKey {
  std::string_view key;                                       ///< MASE's TOML key
  std::string_view flag;                                      ///< `ch`'s command-line spelling ("" for tables)
  std::string_view qnum;                                      ///< qnum's setting it becomes; "" when qnum ignores it
  std::string_view why;                                       ///< why it is ignored (or how it maps, for honoured keys)
  std::string_view commands = "train test transform search";  ///< which commands honour it
};

/// Every top-level key MASE knows, in MASE's CLI_DEFAULTS order, then its tables.
inline constexpr std::array<TopLevelKey, 39> kTopLevelKeys = {{
    {"model", "MODEL", "model", "the model name (jsc-tiny, jsc-s, bert-tiny, ...)"},
    {"dataset", "DATASET", "dataset", "the dataset name (jsc, jsc-synthetic, imdb, text-synthetic)"},
    {"task", "--task", "task", "classification (cls) only: every qnum model is a classifier"},
    {"load_name", "--load", "load", "the checkpoint (a qnum run, an HF folder or file, or a hub name)",
     "transform search"},
    {"load_type", "--load-type", "",
     "qnum reads a checkpoint's kind (qnum, safetensors, torch .bin) from the file itself", ""},
    {"batch_size", "--batch-size", "batch_size", "rows per batch"},
    {"to_debug", "--debug", "", "qnum has no debug mode: errors are already one line naming the problem", ""},
    {"log_level", "--log-level", "", "qnum prints progress and results only", ""},
    {"report_to", "--report-to", "",
     "metrics go to metrics.jsonl in the run folder, and to TensorBoard with --tensorboard DIR (no W&B logger)", ""},
    {"seed", "--seed", "seed", "the seed of batch order, initialisation and samplers"},
    {"quant_config", "--quant-config", "", "put the quantize settings in [passes.quantize] (or pass --quantize)", ""},
    {"training_optimizer", "--training-optimizer", "optimizer", "adam, adamw or sgd", "train test"},
    {"trainer_precision", "--trainer-precision", "",
     "qnum trains in float32; lower precision is what [passes.quantize] sets", ""},
    {"learning_rate", "--learning-rate", "learning_rate", "the peak learning rate", "train test"},
    {"weight_decay", "--weight-decay", "weight_decay", "decoupled (adamw) or L2 (adam, sgd)", "train test"},
    {"max_epochs", "--max-epochs", "max_epochs", "epochs to train", "train test"},
    {"max_steps", "--max-steps", "max_steps", "optimizer steps before training stops (Lightning's; -1: no limit)",
     "train test"},
    {"accumulate_grad_batches", "--accumulate-grad-batches", "",
     "one optimizer step per batch; raise batch_size instead", ""},
    {"log_every_n_steps", "--log-every-n-steps", "log_every_n_steps",
     "a metrics.jsonl row and TensorBoard's step scalars every N optimizer steps", "train"},
    {"t_max", "", "t_max", "the cosine schedule's half period in epochs (default: max_epochs)", "train test"},
    {"eta_min", "", "eta_min", "the cosine schedule's floor (default 1e-6)", "train test"},
    {"num_workers", "--cpu", "", "data loading runs in-process; compute threads are qnum's --threads", ""},
    {"num_devices", "--gpu", "", "one process on one machine", ""},
    {"num_nodes", "--nodes", "", "one process on one machine", ""},
    {"accelerator", "--accelerator", "device",
     "cpu; gpu, cuda or auto: --device cuda where a CUDA device is present, else the CPU", "train"},
    {"strategy", "--strategy", "", "no distributed training: one process on one machine", ""},
    {"is_to_auto_requeue", "--auto-requeue", "", "SLURM requeueing; a killed qnum run resumes with --resume", ""},
    {"github_ci", "--github-ci", "", "MASE's CI switch; nothing to switch in qnum", ""},
    {"disable_dataset_cache", "--disable-dataset-cache", "", "qnum caches only downloads, which are checksummed", ""},
    {"is_pretrained", "--pretrained", "",
     "pretrained weights come from --load (e.g. --load bert-tiny downloads prajjwal1/bert-tiny)", ""},
    {"max_token_len", "--max-token-len", "", "BERT's tokens per text are the --max-length option", ""},
    {"project_dir", "--project-dir", "output_dir", "the folder results are written to"},
    {"project", "--project", "project",
     "the run folder is <project_dir>/<project>/software/<action's folder>, as MASE's (output_dir wins)",
     "train test search"},
    {"config", "--config", "", "a config file cannot name another one", ""},
    {"passes", "", "passes", "the passes `qnum transform` runs, in order", "transform"},
    {"transform", "", "transform", "style = \"graph\" or \"module\": qnum's passes work on the module tree either way",
     "transform"},
    {"search", "", "search", "the search space and strategy of `qnum search`", "search"},
    {"profile", "--profile", "", "use `qnum bench` and `qnum report` for timings and statistics", ""},
    {"no_warnings", "--no-warnings", "", "qnum prints no library warnings to silence", ""},
}};

/// The entry of a MASE top-level key, or nullptr when MASE has no such key.
inline const TopLevelKey* find_top_level_key(std::string_view key) {
  for (const auto& k : kTopLevelKeys)
    if (k.key == key) return &k;
  return nullptr;
}

/// The top-level keys each qnum command reads from a config file (MASE's names and qnum's
/// own spellings: load, output_dir, optimizer, schedule, threads).
inline std::vector<std::string> keys_read_by(Command c) {
  switch (c) {
    case Command::train:
    case Command::test: {
      std::vector<std::string> keys = {"model",        "dataset",    "max_epochs",  "max_steps", "batch_size", "learning_rate",
              "optimizer",    "training_optimizer", "schedule", "t_max",   "eta_min",    "weight_decay",
              "seed",         "threads",    "output_dir",  "project_dir", "project",  "task"};
      if (c == Command::train) keys.insert(keys.end(), {"log_every_n_steps", "accelerator"});
      return keys;
    }
    case Command::transform:
      return {"model",      "dataset", "load_name", "load",   "load_type", "output_dir", "project_dir",
              "batch_size", "seed",    "threads",   "passes", "transform", "task"};
    default:
      return {"model",       "dataset", "load_name", "load",    "load_type", "output_dir", "project_dir",
              "project",     "batch_size", "seed",    "threads", "task",      "search"};
  }
}

/// MASE's folder of an action in a named project (chop/cli.py): <project_dir>/<project>/
/// software/ then training_ckpts (train), checkpoints (test), transform or search_ckpts.
/// MASE's project_dir defaults to mase_output in its repository; qnum's to "mase_output".
inline std::string project_output_dir(const std::string& project_dir, const std::string& project, Command c) {
  qnum::detail::require(!project.empty(), "project: an empty project name");
  const char* sub = c == Command::train  ? "training_ckpts"
                    : c == Command::test ? "checkpoints"
                    : c == Command::transform ? "transform"
                                              : "search_ckpts";
  return (project_dir.empty() ? std::string("mase_output") : project_dir) + "/" + project + "/software/" + sub;
}

/// The one line saying that `key = value` is ignored by `command`, and why.
inline std::string ignored_note(const TopLevelKey& k, const std::string& value, Command command) {
  std::string line = std::string(k.key) + (value.empty() ? "" : " = " + value) + ": ignored by qnum " +
                     std::string(command_name(command)) + ": ";
  if (!k.qnum.empty())
    line += "used by qnum " + std::string(k.commands) + " (" + std::string(k.why) + ")";
  else
    line += k.why;
  return line;
}

/// What a config's top level means to `command`: the keys it reads, and one note per MASE
/// key it does not.
struct TopLevelPlan {
  std::vector<std::string> honoured;
  std::vector<std::string> notes;
};

/// Sorts a config's top-level keys for `command`, which reads the keys in `reads` (MASE's
/// and its own spellings): those are honoured; any other key MASE knows gets a note; a key
/// neither knows is a qnum::Error naming it and the file.
inline TopLevelPlan plan_top_level(const nlohmann::json& config, Command command, const std::string& file,
                                   const std::vector<std::string>& reads) {
  qnum::detail::require(config.is_object(), file, ": a MASE config must be a table of keys");
  TopLevelPlan plan;
  for (const auto& [key, value] : config.items()) {
    if (std::find(reads.begin(), reads.end(), key) != reads.end()) {
      plan.honoured.push_back(key);
      continue;
    }
    const TopLevelKey* k = find_top_level_key(key);
    if (k == nullptr) {
      std::string known;
      for (const auto& r : reads) known += (known.empty() ? "" : ", ") + r;
      qnum::detail::fail(file, ": unknown key '", qnum::detail::excerpt(key, 80),
                         "' (neither MASE nor qnum ", command_name(command),
                         " has it; qnum ", command_name(command), " reads: ", known, ")");
    }
    plan.notes.push_back(ignored_note(*k, value.is_structured() ? "" : value.dump(), command));
  }
  return plan;
}

/// MASE's precedence for one setting: an explicit flag, else the file's value, else the
/// default (`ch` compares against its parser defaults the same way).
inline nlohmann::json merge_settings(const nlohmann::json& defaults, const nlohmann::json& file,
                                     const nlohmann::json& flags) {
  nlohmann::json out = defaults.is_object() ? defaults : nlohmann::json::object();
  for (const auto* layer : {&file, &flags})
    if (layer->is_object())
      for (const auto& [k, v] : layer->items())
        if (!v.is_null()) out[k] = v;
  return out;
}

}  // namespace qnum::mase
