// MASE's search configs (`qnum search --config search.toml`, docs/search.md): a mixed-precision
// search on a trained checkpoint of any registered model (MASE's `ch search`, spec/system.md §7.2, without its pitfalls: every trial
// quantizes a fresh copy of the checkpoint with a config keyed by layer name, and measures it
// anew). JSC models are measured on feature datasets (jsc-synthetic, jsc), BERT models
// (bert-tiny, bert:L-H-A-I, ...) on text datasets (text-synthetic, imdb), tokenized as the
// checkpoint's run did (its max_length unless max_length / --max-length says otherwise).
//
// Top level: model (or --model), dataset, load_name (alias load; required), load_type
// (accepted, unused), output_dir (required; or MASE's project, giving <project_dir or
// mase_output>/<project>/software/search_ckpts, or project_dir alone), batch_size (evaluation,
// default 1024), seed, threads, task (accepted); text models also max_length and limit (rows
// per split). [search.search_space]:
//   name = "mixed_precision"           per layer "<layer>/width" in width (default [8, 16, 32])
//                                      and "<layer>/frac_width" in frac_width (default [2, 4, 8]),
//                                      integer on data_in, weight and bias;
//        = "mixed_precision_families"  per layer "<layer>/format" among the variants of
//                                      families (default: all; include_float adds "float");
//        = "graph/quantize/mixed_precision_ptq" (MASE's; alias "mixed_precision_seed"): the
//                                      [seed.<default | op | layer>.config] tables of choice
//                                      lists, setup.by = "name" (each layer its own seed or
//                                      default) or "type" (each op one config for all its
//                                      layers), "NA" as MASE's files say (qnum/search/mase_space.hpp);
//                                      every MASE-quantizable op unless `ops` narrows it.
//   layers (regex over layer paths, default ".*"), ops (default ["linear"]).
// [search.strategy]: name ("optuna"), sampler (tpe, random, grid, nsgaii; search/samplers.hpp),
// multivariate (tpe: the parameters sampled jointly, Optuna's multivariate=True), n_trials, timeout
// (seconds), seed, storage (default "memory"), study_name (default "mixed-precision"),
// resume, finetune_epochs (QAT per trial, the model's default recipe), learning_rate,
// sum_scaled_metrics (default: true for one metric, false for several), population_size
// (NSGA-II), eval_mode (true; false with [sw_runner.basic_train]), n_jobs (1); MASE's [setup]
// table may hold n_trials, timeout, sampler, sum_scaled_metrics, direction (of the scaled
// sum, default maximize), n_jobs, seed, save_every_n_trials (noted: every trial is stored);
// [sw_runner.basic_evaluation] data_loader (val_dataloader default, test_dataloader,
// train_dataloader) and num_samples (rows, default all); [sw_runner.basic_train] (QAT per
// trial: num_samples rows, at most max_epochs passes, optimizer, learning_rate, weight_decay,
// lr_scheduler linear/cosine/constant per step with num_warmup_steps; unset: the model's
// recipe); [hw_runner.average_bitwidth] compare_to (memory_density = compare_to /
// average_bitwidth, default 32); [metrics.<name>] scale (1) and direction (maximize for
// accuracy and memory_density, minimize otherwise); metrics: accuracy, loss, bits,
// model_size, average_bitwidth, memory_density, bitops (per sample: one feature row, or the
// evaluation split's first text), size_ratio (default: accuracy alone). A scaled sum adds
// scale·metric for metrics in the sum's direction and subtracts the others.
// Outputs in output_dir: trials.csv (Optuna's trials_dataframe), best.json (best trial or
// Pareto set: MASE's number, values, software_metrics, hardware_metrics, scaled_metrics, and
// the quantize config it sampled), best_transform.json (a `qnum transform` config applying the
// best config), plot.svg (best so far; multi-objective: the trials and the Pareto front of
// the first two objectives); stdout ends with MASE's "Best trial(s)" table. Each trial's
// user attributes hold MASE's software_metrics, hardware_metrics, scaled_metrics and
// sampled_config. Unknown keys are errors naming them; a layers regex matching no layer of
// the loaded model is an error listing its layers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/io/atomic_file.hpp"
#include "qnum/io/config_file.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/search/mase_space.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/samplers.hpp"
#include "qnum/search/spaces.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/study_report.hpp"

namespace qnum::search {

/// Values a program sets over the config's study settings (unset = the config's).
struct StudyOverrides {
  std::optional<std::int64_t> trials;
  std::optional<std::string> sampler, storage, study_name;
  std::optional<std::uint64_t> seed;
  std::optional<double> timeout;
  bool resume = false;
  bool multivariate = false;  ///< tpe: sample jointly (also the strategy's `multivariate`)
};

/// What the config's top level and the command line say about the run.
struct SearchJob {
  std::string model, dataset, load;
  std::filesystem::path out_dir;
  std::int64_t batch = 1024;
  std::int64_t max_length = 0, limit = 0;  ///< text models (max_length 0: the checkpoint's)
  nlohmann::json meta;                     ///< the checkpoint's metadata
  std::filesystem::path tensorboard_dir;   ///< non-empty: the trials as a TensorBoard log
};

namespace detail_mase_search {

using nlohmann::json;
using qnum::detail::fail;
using qnum::detail::require;

template <class T>
std::vector<T> list_of(const json& sec, const char* key, std::vector<T> fallback, const std::string& where) {
  if (!sec.contains(key)) return fallback;
  const json& v = sec[key];
  require(v.is_array() && !v.empty(), where, ": '", key, "' must be a non-empty list");
  try {
    return v.get<std::vector<T>>();
  } catch (const json::exception&) {
    fail(where, ": '", key, "' has a value of the wrong type: ", v.dump());
  }
}

/// MASE's seed space (qnum/search/mase_space.hpp); the seed keys `by` leaves unused are
/// noted on stderr.
inline MixedPrecisionSpace seed_space(nn::Module& model, const json& sp, const std::string& layers,
                                              const std::vector<std::string>& ops, const std::string& where) {
  require(sp.contains("seed") && sp["seed"].is_object(), where, ": name '", sp["name"].get<std::string>(),
          "' needs a [seed] table ([seed.default.config], [seed.<layer>.config])");
  std::string by = "name";
  if (sp.contains("setup")) {
    io::require_keys(sp["setup"], where + " setup", {"by"});
    require(sp["setup"].value("by", json("name")).is_string(), where, ": setup.by must be \"name\" or \"type\"");
    by = sp["setup"].value("by", by);
  }
  std::vector<std::string> notes;
  try {
    auto space = mase_seed_space(model, sp["seed"], parse_seed_by(by), layers, ops, &notes);
    for (const auto& n : notes) std::cerr << "note: " << where << ": " << n << "\n";
    return space;
  } catch (const qnum::Error& e) {
    fail(where, ": ", e.what());
  }
}

}  // namespace detail_mase_search

/// [search.strategy] with MASE's [setup] keys merged under its own; what qnum cannot do is an
/// error saying what to do instead.
inline nlohmann::json read_strategy(const nlohmann::json& st, const std::string& stw) {
  io::require_keys(st, stw,
                            {"name", "sampler", "n_trials", "timeout", "seed", "storage", "study_name", "resume",
                             "finetune_epochs", "learning_rate", "sum_scaled_metrics", "population_size", "multivariate", "eval_mode",
                             "n_jobs", "setup", "sw_runner", "hw_runner", "metrics"});
  nlohmann::json strat = st;
  if (st.contains("setup")) {
    io::require_keys(st["setup"], stw + " setup",
                              {"n_jobs", "n_trials", "timeout", "sampler", "multivariate", "sum_scaled_metrics", "direction",
                               "seed", "pkl_ckpt", "save_every_n_trials"});
    for (const auto& [k, v] : st["setup"].items())
      if (!strat.contains(k)) strat[k] = v;
  }
  if (strat.contains("name"))
    qnum::detail::require(strat["name"] == "optuna", stw, ": name must be \"optuna\", got ", strat["name"].dump());
  if (strat.contains("n_jobs")) {
    qnum::detail::require(strat["n_jobs"].is_number_integer() && (strat["n_jobs"].get<std::int64_t>() >= 1 ||
                                                    strat["n_jobs"].get<std::int64_t>() == -1),
            stw, ": n_jobs must be a positive integer or -1, got ", strat["n_jobs"].dump());
    if (strat["n_jobs"] != 1)
      std::cerr << "note: " << stw << ": n_jobs " << strat["n_jobs"].dump()
                << ": trials run one at a time here (each trial's kernels use every core); for parallel trials "
                   "run several `qnum search --config` processes on one sqlite/postgresql storage with resume = true\n";
  }
  qnum::detail::require(!strat.contains("pkl_ckpt"), stw, ": pkl_ckpt is MASE's pickle resume; use storage + resume instead");
  if (strat.contains("save_every_n_trials"))
    std::cerr << "note: " << stw << ": save_every_n_trials: ignored: the study storage records every trial as "
              << "it ends\n";
  if (strat.contains("hw_runner")) {
    const nlohmann::json& hw = strat["hw_runner"];
    io::require_keys(hw, stw + " hw_runner", {"average_bitwidth"});
    if (hw.contains("average_bitwidth"))
      io::require_keys(hw["average_bitwidth"], stw + " hw_runner.average_bitwidth", {"compare_to"});
  }
  return strat;
}

/// MASE's hw_runner.average_bitwidth.compare_to (memory_density = compare_to /
/// average_bitwidth); 32 without it.
inline double read_compare_to(const nlohmann::json& strat, const std::string& stw) {
  const nlohmann::json hw = strat.value("hw_runner", nlohmann::json::object()).value("average_bitwidth", nlohmann::json::object());
  const nlohmann::json c = hw.value("compare_to", nlohmann::json(32));
  qnum::detail::require(c.is_number() && c.get<double>() > 0, stw, ": hw_runner.average_bitwidth.compare_to must be a number > 0");
  return c.get<double>();
}

/// The objective metrics ([metrics.<name>] tables; default: accuracy alone).
inline std::vector<Metric> read_metrics(const nlohmann::json& strat, const std::string& stw) {
  if (!strat.contains("metrics")) return {{"accuracy", StudyDirection::maximize, 1.0}};
  qnum::detail::require(strat["metrics"].is_object() && !strat["metrics"].empty(), stw, ": metrics must be a non-empty table");
  std::vector<Metric> metrics;
  for (const auto& [name, m] : strat["metrics"].items()) {
    QuantizedMetrics{}.get(name);  // unknown names fail here
    io::require_keys(m, stw + " metrics." + name, {"scale", "direction"});
    const bool more_is_better = name == "accuracy" || name == "memory_density";
    Metric x{name, more_is_better ? StudyDirection::maximize : StudyDirection::minimize,
                     m.value("scale", 1.0)};
    if (m.contains("direction")) {
      const auto d = m["direction"].get<std::string>();
      qnum::detail::require(d == "maximize" || d == "minimize", stw, ": metrics.", name, ".direction must be maximize or minimize");
      x.direction = d == "maximize" ? StudyDirection::maximize : StudyDirection::minimize;
    }
    metrics.push_back(x);
  }
  return metrics;
}

/// The split the trials are measured on ([sw_runner.basic_evaluation]).
struct EvalSplit {
  std::string loader = "val_dataloader";
  std::int64_t num_samples = 0;  ///< rows (0: all)
};

/// MASE's [sw_runner.basic_train]: each trial's quantized model trains (QAT) before it is
/// measured; unset keys take the model's recipe.
struct TrainRunner {
  int max_epochs = 1;
  std::int64_t num_samples = 0;  ///< rows trained per trial (0: every row, max_epochs times)
  std::optional<std::string> optimizer, lr_scheduler;
  std::optional<double> learning_rate, weight_decay;
  std::int64_t num_warmup_steps = 0;
};

inline EvalSplit read_eval_split(const nlohmann::json& strat, const std::string& stw) {
  EvalSplit e;
  if (!strat.contains("sw_runner")) return e;
  io::require_keys(strat["sw_runner"], stw + " sw_runner", {"basic_evaluation", "basic_train"});
  const nlohmann::json be = strat["sw_runner"].value("basic_evaluation", nlohmann::json::object());
  io::require_keys(be, stw + " sw_runner.basic_evaluation", {"data_loader", "num_samples"});
  e.loader = be.value("data_loader", e.loader);
  e.num_samples = be.value("num_samples", std::int64_t{0});
  qnum::detail::require(e.loader == "val_dataloader" || e.loader == "test_dataloader" || e.loader == "train_dataloader", stw,
          ": data_loader must be val_dataloader, test_dataloader or train_dataloader, got '", e.loader, "'");
  qnum::detail::require(e.num_samples >= 0, stw, ": num_samples must be >= 0");
  return e;
}

/// [sw_runner.basic_train] (nullopt without one); eval_mode = false is what MASE trains with,
/// so each implies the other.
inline std::optional<TrainRunner> read_train_runner(const nlohmann::json& strat, const std::string& stw) {
  const nlohmann::json sw = strat.value("sw_runner", nlohmann::json::object());
  const bool eval_mode = strat.value("eval_mode", true);
  if (!sw.contains("basic_train")) {
    qnum::detail::require(eval_mode, stw, ": eval_mode = false trains each trial: add [sw_runner.basic_train] (or finetune_epochs)");
    return std::nullopt;
  }
  const std::string w = stw + " sw_runner.basic_train";
  qnum::detail::require(!eval_mode, w, ": trains each trial, so it needs eval_mode = false");
  qnum::detail::require(!strat.contains("finetune_epochs") && !strat.contains("learning_rate"), w,
          ": give either basic_train or finetune_epochs/learning_rate, not both");
  const nlohmann::json& bt = sw["basic_train"];
  io::require_keys(bt, w,
                            {"num_samples", "max_epochs", "optimizer", "learning_rate", "weight_decay", "lr_scheduler",
                             "num_warmup_steps", "gradient_accumulation_steps"});
  qnum::detail::require(bt.value("gradient_accumulation_steps", 1) == 1, w,
          ": gradient_accumulation_steps must be 1 (one optimizer step per batch; raise batch_size instead)");
  TrainRunner r;
  r.max_epochs = bt.value("max_epochs", 1);
  r.num_samples = bt.value("num_samples", std::int64_t{0});
  qnum::detail::require(r.max_epochs >= 1 && r.num_samples >= 0, w, ": max_epochs must be >= 1 and num_samples >= 0");
  if (bt.contains("optimizer")) r.optimizer = bt["optimizer"].get<std::string>();
  if (bt.contains("lr_scheduler")) r.lr_scheduler = bt["lr_scheduler"].get<std::string>();
  if (bt.contains("learning_rate")) r.learning_rate = bt["learning_rate"].get<double>();
  if (bt.contains("weight_decay")) r.weight_decay = bt["weight_decay"].get<double>();
  r.num_warmup_steps = bt.value("num_warmup_steps", std::int64_t{0});
  qnum::detail::require(!r.optimizer || *r.optimizer == "adam" || *r.optimizer == "adamw" || *r.optimizer == "sgd", w,
          ": optimizer must be adam, adamw or sgd");
  qnum::detail::require(!r.lr_scheduler || *r.lr_scheduler == "linear" || *r.lr_scheduler == "cosine" ||
              *r.lr_scheduler == "constant",
          w, ": lr_scheduler must be linear, cosine or constant");
  qnum::detail::require(!r.learning_rate || *r.learning_rate > 0, w, ": learning_rate must be > 0");
  qnum::detail::require(r.num_warmup_steps >= 0, w, ": num_warmup_steps must be >= 0");
  return r;
}

/// The space [search.search_space] describes over the layers of `model`.
inline MixedPrecisionSpace read_space(nn::Module& model, const nlohmann::json& sp, const std::string& spw) {
  io::require_keys(
      sp, spw, {"name", "layers", "ops", "width", "frac_width", "families", "include_float", "setup", "seed"});
  const std::string layers = sp.value("layers", std::string(".*"));
  const auto ops = detail_mase_search::list_of<std::string>(sp, "ops", {"linear"}, spw);
  qnum::detail::require(sp.contains("name") && sp["name"].is_string(), spw,
          ": 'name' is required (mixed_precision, "
          "mixed_precision_families or graph/quantize/mixed_precision_ptq)");
  const std::string space_name = sp["name"].get<std::string>();
  if (space_name == "mixed_precision") {
    for (const char* k : {"families", "include_float", "setup", "seed"})
      qnum::detail::require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision\"");
    return MixedPrecisionSpace::integer_widths(model, layers, ops,
                                                       detail_mase_search::list_of<std::int64_t>(sp, "width", {8, 16, 32}, spw),
                                                       detail_mase_search::list_of<std::int64_t>(sp, "frac_width", {2, 4, 8}, spw));
  }
  if (space_name == "mixed_precision_families") {
    for (const char* k : {"width", "frac_width", "setup", "seed"})
      qnum::detail::require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision_families\"");
    return MixedPrecisionSpace::families(model, layers, ops,
                                                 detail_mase_search::list_of<std::string>(sp, "families", variant_families(), spw),
                                                 sp.value("include_float", false));
  }
  if (space_name == "graph/quantize/mixed_precision_ptq" || space_name == "mixed_precision_seed") {
    for (const char* k : {"width", "frac_width", "families", "include_float"})
      qnum::detail::require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"", space_name, "\" (use the seed tables)");
    // MASE searches every quantizable op unless `ops` narrows it.
    return detail_mase_search::seed_space(model, sp, layers, detail_mase_search::list_of<std::string>(sp, "ops", passes::mase_quantizable_ops(), spw), spw);
  }
  qnum::detail::fail(spw, ": unknown name '", space_name,
       "' (allowed: mixed_precision, mixed_precision_families, graph/quantize/mixed_precision_ptq, "
       "mixed_precision_seed)");
}

/// Every choice must give a valid config: each choice of each key (the others at their first)
/// is applied to a fresh model before any trial runs.
inline void check_every_choice(const MixedPrecisionSpace& space,
                               const std::function<std::shared_ptr<nn::Module>()>& fresh, const std::string& spw) {
  const auto grid = space.grid();
  std::map<std::string, ParamValue> first;
  for (const auto& [k, c] : grid) first[k] = c.front();
  auto probe = fresh();
  for (const auto& [k, c] : grid)
    for (const auto& v : c) {
      auto point = first;
      point[k] = v;
      try {
        passes::quantize(*probe, space.config(point));
      } catch (const qnum::Error& e) {
        qnum::detail::fail(spw, ": choice ", k, " = ", to_string(v), " is invalid: ", e.what());
      }
    }
}

/// How the study runs: sampler, budget, fine-tuning, storage.
struct StudyPlan {
  std::string space_name, study_name;
  std::shared_ptr<Sampler> sampler;
  std::shared_ptr<Storage> storage;
  std::vector<Metric> metrics;
  bool sum_scaled = true, resume = false;
  std::int64_t n_trials = 20;
  std::optional<double> timeout;
  int finetune_epochs = 0;
  double learning_rate = 0;  ///< 0: the model's recipe
  std::uint64_t seed = 0;
  EvalSplit split;
  std::optional<TrainRunner> train;  ///< MASE's basic_train (sets finetune_epochs)
  StudyDirection direction = StudyDirection::maximize;  ///< of the scaled sum
  double compare_to = 32;
};

inline StudyPlan read_plan(const nlohmann::json& strat, const StudyOverrides& ov, const MixedPrecisionSpace& space,
                           const std::string& stw) {
  StudyPlan p;
  p.metrics = read_metrics(strat, stw);
  p.sum_scaled = strat.value("sum_scaled_metrics", p.metrics.size() == 1);
  if (strat.contains("direction")) {
    const nlohmann::json& d = strat["direction"];
    qnum::detail::require(d == "maximize" || d == "minimize", stw, ": setup.direction must be maximize or minimize, got ", d.dump());
    p.direction = d == "maximize" ? StudyDirection::maximize : StudyDirection::minimize;
  }
  p.split = read_eval_split(strat, stw);
  p.train = read_train_runner(strat, stw);
  p.compare_to = read_compare_to(strat, stw);
  p.seed = ov.seed.value_or(strat.value("seed", std::uint64_t{0}));
  SamplerOptions so;
  so.seed = p.seed;
  so.grid = space.grid();
  so.multivariate = ov.multivariate || strat.value("multivariate", false);
  so.population_size = strat.value("population_size", std::int64_t{50});
  so.where = stw;
  p.sampler = make_sampler(ov.sampler.value_or(strat.value("sampler", std::string("tpe"))), so);
  p.n_trials = ov.trials.value_or(strat.value("n_trials", std::int64_t{20}));
  qnum::detail::require(p.n_trials >= 0, stw, ": n_trials must be >= 0");
  p.timeout = ov.timeout;
  if (!p.timeout && strat.contains("timeout")) p.timeout = strat["timeout"].get<double>();
  qnum::detail::require(!p.timeout || *p.timeout > 0, stw, ": timeout must be > 0 seconds");
  p.finetune_epochs = p.train ? p.train->max_epochs : strat.value("finetune_epochs", 0);
  qnum::detail::require(p.finetune_epochs >= 0, stw, ": finetune_epochs must be >= 0");
  if (strat.contains("learning_rate")) {
    p.learning_rate = strat["learning_rate"].get<double>();
    qnum::detail::require(p.learning_rate > 0, stw, ": learning_rate must be > 0");
  }
  p.resume = ov.resume || strat.value("resume", false);
  p.study_name = ov.study_name.value_or(strat.value("study_name", std::string("mixed-precision")));
  p.storage = open_storage(ov.storage.value_or(strat.value("storage", std::string("memory"))));
  if (!p.resume)
    qnum::detail::require(!p.storage->find_study(p.study_name), "search: study '", p.study_name, "' already exists in ",
            p.storage->url(), "; set resume = true (or --resume) to continue it, or choose another study_name");
  return p;
}

/// The first `rows` of `split` (0 or more than it has: all of it).
template <class Data>
Data first_rows(const Data& split, std::int64_t rows) {
  if (rows <= 0 || rows >= split.size()) return split;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) idx[static_cast<std::size_t>(i)] = i;
  return split.subset(idx);
}

/// Sets what the plan says about the trials on `ev` (whose fresh_model, forward_of, example,
/// batch_size and finetune — the model's recipe — the caller set): the split measured, the
/// rows fine-tuned on (both must outlive `ev`), fine-tuning epochs, learning rate, seed and
/// MASE's basic_train settings, memory_density's reference.
template <class Data>
void apply_plan(BasicQuantizedEvaluator<Data>& ev, const StudyPlan& plan, const Data& split, const Data& train) {
  ev.eval = &split;
  ev.finetune_epochs = plan.finetune_epochs;
  ev.train = &train;
  if (plan.learning_rate > 0) ev.finetune.learning_rate = plan.learning_rate;
  ev.finetune.seed = plan.seed;
  ev.finetune.progress = false;
  ev.compare_to = plan.compare_to;
  if (plan.train) {
    const TrainRunner& r = *plan.train;
    // MASE trains num_samples rows per trial, at most max_epochs passes over the split.
    ev.finetune_epochs = r.num_samples == 0 ? r.max_epochs
                         : r.num_samples <= train.size()
                             ? 1
                             : static_cast<int>(std::min<std::int64_t>(
                                   r.max_epochs, (r.num_samples + train.size() - 1) / std::max<std::int64_t>(1, train.size())));
    ev.finetune.optimizer = r.optimizer.value_or(ev.finetune.optimizer);
    ev.finetune.learning_rate = r.learning_rate.value_or(ev.finetune.learning_rate);
    ev.finetune.weight_decay = r.weight_decay.value_or(ev.finetune.weight_decay);
    if (r.lr_scheduler) {  // transformers' get_scheduler: per step, with warm-up steps
      ev.finetune.schedule = *r.lr_scheduler;
      ev.finetune.schedule_unit = "step";
      ev.finetune.warmup_steps = r.num_warmup_steps;
    }
  }
}

/// The split the plan measures (sw_runner.basic_evaluation) and the rows it fine-tunes on
/// (basic_train's num_samples) of `data` (train/val/test splits of either kind).
template <class Splits>
auto plan_splits(const StudyPlan& plan, const Splits& data) {
  const auto& loader = plan.split.loader;
  auto split = first_rows(loader == "test_dataloader"    ? data.test
                          : loader == "train_dataloader" ? data.train
                                                         : data.val,
                          plan.split.num_samples);
  auto train = first_rows(data.train, plan.train ? plan.train->num_samples : 0);
  return std::pair{std::move(split), std::move(train)};
}

/// The summary of `study` (best.json's content); `before` trials were in the study when this
/// run started.
inline nlohmann::json study_summary(Study& study, std::size_t before, const StudyPlan& plan,
                          const MixedPrecisionSpace& space) {
  const bool single = plan.metrics.size() == 1 || plan.sum_scaled;
  const auto trials = study.get_trials();
  const auto done = study.get_trials({TrialState::complete});
  nlohmann::json best = nlohmann::json::object();
  if (!done.empty()) {
    if (single) {
      best = trial_json(study.best_trial());
    } else {
      best = nlohmann::json::array();
      for (const auto& t : study.best_trials()) best.push_back(trial_json(t));
    }
  }
  return {{"study", plan.study_name},
          {"storage", plan.storage->url()},
          {"space", plan.space_name},
          {"layers", space.layers().size()},
          {"sampler", plan.sampler->name()},
          {"metrics", metrics_json(plan.metrics)},
          {"sum_scaled_metrics", plan.sum_scaled},
          {"evaluated_on", plan.split.loader},
          {"trials_run", trials.size() - before},
          {"trials_total", trials.size()},
          {"completed", done.size()},
          {single ? "best_trial" : "best_trials", best}};
}

/// Writes trials.csv, best.json (`summary`), best_transform.json (single objective) and
/// plot.svg (best so far; several objectives: the trials and the Pareto front of the first
/// two) into job.out_dir.
inline void write_study_outputs(Study& study, const nlohmann::json& summary, const SearchJob& job,
                                const StudyPlan& plan) {
  const auto& out_dir = job.out_dir;
  write_file_atomic(out_dir / "trials.csv", study.trials_table().to_csv());
  write_file_atomic(out_dir / "best.json", summary.dump(2) + "\n");
  const auto done = study.get_trials({TrialState::complete});
  const auto& metrics = plan.metrics;
  if (!job.tensorboard_dir.empty()) {
    std::vector<std::string> names;
    for (const auto& m : metrics) names.push_back(m.name);
    if (plan.sum_scaled) names = {"scaled_sum"};
    write_study_tensorboard(study, job.tensorboard_dir, names);
  }
  if (summary.contains("best_trial")) {
    if (!done.empty())
      write_file_atomic(out_dir / "best_transform.json", nlohmann::json{{"model", job.model},
                                                              {"dataset", job.dataset},
                                                              {"load_name", job.load},
                                                              {"passes", {{"quantize", summary["best_trial"]["quantize"]}}}}
                                                                 .dump(2) +
                                                             "\n");
    write_best_so_far_svg(study, (out_dir / "plot.svg").string(), "study " + plan.study_name,
                          metrics.size() == 1 ? metrics[0].name : "scaled sum of metrics");
    return;
  }
  PlotSeries all{"trials", {}, true}, pf{"Pareto front", {}, false};
  for (const auto& t : done) all.points.emplace_back(t.values[1], t.values[0]);
  if (!done.empty())
    for (const auto& t : study.best_trials()) pf.points.emplace_back(t.values[1], t.values[0]);
  std::sort(pf.points.begin(), pf.points.end());
  write_svg_line_plot((out_dir / "plot.svg").string(), {all, pf}, "study " + plan.study_name, metrics[1].name,
                              metrics[0].name);
}

/// The summary on stdout: the study, the trials run, the best trial (its params) or the Pareto
/// set, and MASE's table of them.
inline void print_study_summary(Study& study, const nlohmann::json& summary, const SearchJob& job,
                                const StudyPlan& plan) {
  std::printf("study %s in %s: %s over %zu layer(s) of %s (%s), %s, evaluated on %s of %s\n", plan.study_name.c_str(),
              plan.storage->url().c_str(), plan.space_name.c_str(), summary["layers"].get<std::size_t>(),
              job.model.c_str(), job.load.c_str(), plan.sampler->name().c_str(), plan.split.loader.c_str(),
              job.dataset.c_str());
  std::printf("trials run %zu, in study %zu, completed %zu\n", summary["trials_run"].get<std::size_t>(),
              summary["trials_total"].get<std::size_t>(), summary["completed"].get<std::size_t>());
  const bool done = summary["completed"].get<std::size_t>() > 0;
  const bool single = summary.contains("best_trial");
  if (single && done) {
    const auto b = study.best_trial();
    std::printf("best trial %lld: value %.6g: %s\n", static_cast<long long>(b.number), b.values[0],
                params_text(b).c_str());
  }
  if (done)
    std::printf("%s:\n%s", single ? "Best trial" : "Best trials (Pareto front)",
                best_trials_table(summary[single ? "best_trial" : "best_trials"], plan.metrics).c_str());
  std::printf("wrote %s (trials.csv, best.json, plot.svg%s)\n", job.out_dir.string().c_str(),
              single && done ? ", best_transform.json" : "");
}

/// Runs the study's trials through `ev` (apply_plan) and reports them: outputs in job.out_dir,
/// the summary (or one JSON object) on stdout.
template <class Data>
void run_study(const SearchJob& job, const StudyPlan& plan, const MixedPrecisionSpace& space,
               const BasicQuantizedEvaluator<Data>& ev, bool json_out) {
  std::filesystem::create_directories(job.out_dir);
  Study study(plan.storage, plan.study_name,
                      objective_directions(plan.metrics, plan.sum_scaled, plan.direction),
                      plan.sampler, nullptr, plan.resume ? OpenMode::create_or_load : OpenMode::create);
  study.set_user_attr("space", plan.space_name);
  study.set_user_attr("model", job.model);
  study.set_user_attr("checkpoint", job.load);
  study.set_user_attr("metrics", metrics_json(plan.metrics));
  study.set_user_attr("sum_scaled_metrics", plan.sum_scaled);
  const auto before = study.get_trials().size();
  study.optimize(
      [&](Trial& t) {
        const auto qc = space.sample(t);
        const auto r = ev(qc, job.out_dir / "trials" / std::to_string(t.number()));
        t.set_user_attr("metrics", r.to_json());
        for (const char* k : {"accuracy", "bits", "bitops"}) t.set_user_attr(k, r.get(k));
        // MASE's trial attributes, so its analysis of a study reads qnum's too.
        t.set_user_attr("software_metrics", r.software_metrics());
        t.set_user_attr("hardware_metrics", r.hardware_metrics());
        t.set_user_attr("scaled_metrics", scaled_metrics(r, plan.metrics));
        t.set_user_attr("sampled_config", qc);
        return objective_values(r, plan.metrics, plan.sum_scaled, plan.direction);
      },
      plan.n_trials, plan.timeout);
  const nlohmann::json summary = study_summary(study, before, plan, space);
  write_study_outputs(study, summary, job, plan);
  if (json_out)
    std::cout << summary.dump() << "\n";
  else
    print_study_summary(study, summary, job, plan);
}

}  // namespace qnum::search
