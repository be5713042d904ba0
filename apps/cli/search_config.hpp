// `qnum search --config search.toml`: a mixed-precision search on a trained checkpoint of any
// registered model (MASE's `ch search`, spec/system.md §7.2, without its pitfalls: every trial
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
// [search.strategy]: name ("optuna"), sampler (tpe, random, grid, nsgaii), n_trials, timeout
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

#include <cstdio>
#include <functional>
#include <type_traits>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/datasets.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/mase_space.hpp"
#include "qnum/search/nsga2.hpp"
#include "qnum/search/plot.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/spaces.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"
#include "transform_command.hpp"

namespace qnum::cli {

/// Command-line values that override the config's (unset = the config's).
struct SearchOverrides {
  std::optional<std::int64_t> trials;
  std::optional<std::string> sampler, storage, study_name;
  std::optional<std::uint64_t> seed;
  std::optional<double> timeout;
  std::optional<std::string> dataset, load, output_dir;  ///< MASE's `ch search --dataset/--load/--project-dir`
  std::optional<std::string> model;
  std::optional<std::int64_t> max_length, limit;  ///< text models: tokens per text, rows per split
  bool resume = false;
};

namespace detail_search_config {

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
inline search::MixedPrecisionSpace seed_space(nn::Module& model, const json& sp, const std::string& layers,
                                              const std::vector<std::string>& ops, const std::string& where) {
  require(sp.contains("seed") && sp["seed"].is_object(), where, ": name '", sp["name"].get<std::string>(),
          "' needs a [seed] table ([seed.default.config], [seed.<layer>.config])");
  std::string by = "name";
  if (sp.contains("setup")) {
    cli::detail::require_keys(sp["setup"], where + " setup", {"by"});
    require(sp["setup"].value("by", json("name")).is_string(), where, ": setup.by must be \"name\" or \"type\"");
    by = sp["setup"].value("by", by);
  }
  std::vector<std::string> notes;
  try {
    auto space = search::mase_seed_space(model, sp["seed"], search::parse_seed_by(by), layers, ops, &notes);
    for (const auto& n : notes) std::cerr << "note: " << where << ": " << n << "\n";
    return space;
  } catch (const qnum::Error& e) {
    fail(where, ": ", e.what());
  }
}

inline std::string params_text(const search::FrozenTrial& t) {
  std::string s;
  for (const auto& [k, v] : t.params)
    s += (s.empty() ? "" : ", ") + k + "=" + search::to_string(search::to_external(t.distributions.at(k), v));
  return s;
}

/// One trial as best.json holds it: MASE's columns (number, value(s), software_metrics,
/// hardware_metrics, scaled_metrics; its sampled_config is `quantize`) and the drawn params.
inline json trial_json(const search::FrozenTrial& t) {
  json p = json::object();
  for (const auto& [k, v] : t.params) p[k] = search::to_json(search::to_external(t.distributions.at(k), v));
  const auto attr = [&](const char* k) { return t.user_attrs.value(k, json::object()); };
  return {{"number", t.number},
          {"values", t.values},
          {"params", p},
          {"metrics", attr("metrics")},
          {"software_metrics", attr("software_metrics")},
          {"hardware_metrics", attr("hardware_metrics")},
          {"scaled_metrics", attr("scaled_metrics")},
          {"quantize", t.user_attrs.contains("sampled_config") ? attr("sampled_config") : attr("quantize_config")}};
}

/// The metrics as the study records them.
inline json metrics_json(const std::vector<search::Metric>& metrics) {
  json mj = json::array();
  for (const auto& m : metrics)
    mj.push_back({{"name", m.name}, {"scale", m.scale}, {"direction", std::string(search::to_string(m.direction))}});
  return mj;
}

/// What the config's top level and the command line say about the run.
struct SearchJob {
  std::string model, dataset, load;
  std::filesystem::path out_dir;
  std::int64_t batch = 1024;
  std::int64_t max_length = 0, limit = 0;  ///< text models (max_length 0: the checkpoint's)
  json meta;                               ///< the checkpoint's metadata
};

inline SearchJob read_job(const json& cfg, const SearchOverrides& ov, const std::string& where) {
  auto str = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (cfg.contains(k)) {
        require(cfg[k].is_string(), where, ": '", k, "' must be a string");
        return cfg[k].get<std::string>();
      }
    return std::string();
  };
  SearchJob job;
  job.model = ov.model.value_or(str({"model"}));
  job.dataset = ov.dataset.value_or(str({"dataset"}));
  job.load = ov.load.value_or(str({"load_name", "load"}));
  // MASE's project: <project_dir or mase_output>/<project>/software/search_ckpts (output_dir wins).
  std::string out_text = ov.output_dir.value_or(str({"output_dir"}));
  if (out_text.empty() && cfg.contains("project"))
    out_text = mase::project_output_dir(str({"project_dir"}), str({"project"}), mase::Command::search);
  if (out_text.empty()) out_text = str({"project_dir"});
  require(!job.model.empty(), where, ": 'model' is required (or --model)");
  require(!job.load.empty(), where, ": 'load_name' (the trained checkpoint to search from) is required");
  require(!out_text.empty(), where, ": 'output_dir' (or MASE's project / project_dir) is required");
  job.out_dir = out_text;
  job.batch = cfg.value("batch_size", std::int64_t{1024});
  require(job.batch >= 1, where, ": batch_size must be >= 1");
  job.max_length = ov.max_length.value_or(cfg.value("max_length", std::int64_t{0}));
  job.limit = ov.limit.value_or(cfg.value("limit", std::int64_t{0}));
  require(job.max_length == 0 || job.max_length >= 2, where, ": max_length must be >= 2 ([CLS] and [SEP])");
  require(job.limit >= 0, where, ": limit must be >= 0");
  const auto& spec = models::model_spec(job.model);  // unknown names fail here, listing the known ones
  if (spec.input == models::InputKind::features)
    require(!cfg.contains("max_length") && !cfg.contains("limit") && !ov.max_length && !ov.limit, where,
            ": max_length and limit apply to text models, not to ", job.model);
  job.meta = train::read_checkpoint_meta(job.load);
  require_checkpoint_of(job.model, job.load, job.meta);
  if (job.dataset.empty()) job.dataset = job.meta.value("dataset", std::string());
  require(!job.dataset.empty(), where, ": 'dataset' is required (the checkpoint names none)");
  require_matching_data(job.model, job.dataset);
  if (spec.input == models::InputKind::tokens && job.max_length == 0) {
    job.max_length = 512;
    if (job.meta.contains("config") && job.meta["config"].value("max_length", 0) >= 2)
      job.max_length = job.meta["config"]["max_length"].get<std::int64_t>();
  }
  return job;
}

/// [search.strategy] with MASE's [setup] keys merged under its own; what qnum cannot do is an
/// error saying what to do instead.
inline json read_strategy(const json& st, const std::string& stw) {
  cli::detail::require_keys(st, stw,
                            {"name", "sampler", "n_trials", "timeout", "seed", "storage", "study_name", "resume",
                             "finetune_epochs", "learning_rate", "sum_scaled_metrics", "population_size", "eval_mode",
                             "n_jobs", "setup", "sw_runner", "hw_runner", "metrics"});
  json strat = st;
  if (st.contains("setup")) {
    cli::detail::require_keys(st["setup"], stw + " setup",
                              {"n_jobs", "n_trials", "timeout", "sampler", "sum_scaled_metrics", "direction", "seed",
                               "pkl_ckpt", "save_every_n_trials"});
    for (const auto& [k, v] : st["setup"].items())
      if (!strat.contains(k)) strat[k] = v;
  }
  if (strat.contains("name"))
    require(strat["name"] == "optuna", stw, ": name must be \"optuna\", got ", strat["name"].dump());
  if (strat.contains("n_jobs")) {
    require(strat["n_jobs"].is_number_integer() && (strat["n_jobs"].get<std::int64_t>() >= 1 ||
                                                    strat["n_jobs"].get<std::int64_t>() == -1),
            stw, ": n_jobs must be a positive integer or -1, got ", strat["n_jobs"].dump());
    if (strat["n_jobs"] != 1)
      std::cerr << "note: " << stw << ": n_jobs " << strat["n_jobs"].dump()
                << ": trials run one at a time here (each trial's kernels use every core); for parallel trials "
                   "run several `qnum search --config` processes on one sqlite/postgresql storage with resume = true\n";
  }
  require(!strat.contains("pkl_ckpt"), stw, ": pkl_ckpt is MASE's pickle resume; use storage + resume instead");
  if (strat.contains("save_every_n_trials"))
    std::cerr << "note: " << stw << ": save_every_n_trials: ignored: the study storage records every trial as "
              << "it ends\n";
  if (strat.contains("hw_runner")) {
    const json& hw = strat["hw_runner"];
    cli::detail::require_keys(hw, stw + " hw_runner", {"average_bitwidth"});
    if (hw.contains("average_bitwidth"))
      cli::detail::require_keys(hw["average_bitwidth"], stw + " hw_runner.average_bitwidth", {"compare_to"});
  }
  return strat;
}

/// MASE's hw_runner.average_bitwidth.compare_to (memory_density = compare_to /
/// average_bitwidth); 32 without it.
inline double read_compare_to(const json& strat, const std::string& stw) {
  const json hw = strat.value("hw_runner", json::object()).value("average_bitwidth", json::object());
  const json c = hw.value("compare_to", json(32));
  require(c.is_number() && c.get<double>() > 0, stw, ": hw_runner.average_bitwidth.compare_to must be a number > 0");
  return c.get<double>();
}

/// The objective metrics ([metrics.<name>] tables; default: accuracy alone).
inline std::vector<search::Metric> read_metrics(const json& strat, const std::string& stw) {
  if (!strat.contains("metrics")) return {{"accuracy", search::StudyDirection::maximize, 1.0}};
  require(strat["metrics"].is_object() && !strat["metrics"].empty(), stw, ": metrics must be a non-empty table");
  std::vector<search::Metric> metrics;
  for (const auto& [name, m] : strat["metrics"].items()) {
    search::QuantizedMetrics{}.get(name);  // unknown names fail here
    cli::detail::require_keys(m, stw + " metrics." + name, {"scale", "direction"});
    const bool more_is_better = name == "accuracy" || name == "memory_density";
    search::Metric x{name, more_is_better ? search::StudyDirection::maximize : search::StudyDirection::minimize,
                     m.value("scale", 1.0)};
    if (m.contains("direction")) {
      const auto d = m["direction"].get<std::string>();
      require(d == "maximize" || d == "minimize", stw, ": metrics.", name, ".direction must be maximize or minimize");
      x.direction = d == "maximize" ? search::StudyDirection::maximize : search::StudyDirection::minimize;
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

inline EvalSplit read_eval_split(const json& strat, const std::string& stw) {
  EvalSplit e;
  if (!strat.contains("sw_runner")) return e;
  cli::detail::require_keys(strat["sw_runner"], stw + " sw_runner", {"basic_evaluation", "basic_train"});
  const json be = strat["sw_runner"].value("basic_evaluation", json::object());
  cli::detail::require_keys(be, stw + " sw_runner.basic_evaluation", {"data_loader", "num_samples"});
  e.loader = be.value("data_loader", e.loader);
  e.num_samples = be.value("num_samples", std::int64_t{0});
  require(e.loader == "val_dataloader" || e.loader == "test_dataloader" || e.loader == "train_dataloader", stw,
          ": data_loader must be val_dataloader, test_dataloader or train_dataloader, got '", e.loader, "'");
  require(e.num_samples >= 0, stw, ": num_samples must be >= 0");
  return e;
}

/// [sw_runner.basic_train] (nullopt without one); eval_mode = false is what MASE trains with,
/// so each implies the other.
inline std::optional<TrainRunner> read_train_runner(const json& strat, const std::string& stw) {
  const json sw = strat.value("sw_runner", json::object());
  const bool eval_mode = strat.value("eval_mode", true);
  if (!sw.contains("basic_train")) {
    require(eval_mode, stw, ": eval_mode = false trains each trial: add [sw_runner.basic_train] (or finetune_epochs)");
    return std::nullopt;
  }
  const std::string w = stw + " sw_runner.basic_train";
  require(!eval_mode, w, ": trains each trial, so it needs eval_mode = false");
  require(!strat.contains("finetune_epochs") && !strat.contains("learning_rate"), w,
          ": give either basic_train or finetune_epochs/learning_rate, not both");
  const json& bt = sw["basic_train"];
  cli::detail::require_keys(bt, w,
                            {"num_samples", "max_epochs", "optimizer", "learning_rate", "weight_decay", "lr_scheduler",
                             "num_warmup_steps", "gradient_accumulation_steps"});
  require(bt.value("gradient_accumulation_steps", 1) == 1, w,
          ": gradient_accumulation_steps must be 1 (one optimizer step per batch; raise batch_size instead)");
  TrainRunner r;
  r.max_epochs = bt.value("max_epochs", 1);
  r.num_samples = bt.value("num_samples", std::int64_t{0});
  require(r.max_epochs >= 1 && r.num_samples >= 0, w, ": max_epochs must be >= 1 and num_samples >= 0");
  if (bt.contains("optimizer")) r.optimizer = bt["optimizer"].get<std::string>();
  if (bt.contains("lr_scheduler")) r.lr_scheduler = bt["lr_scheduler"].get<std::string>();
  if (bt.contains("learning_rate")) r.learning_rate = bt["learning_rate"].get<double>();
  if (bt.contains("weight_decay")) r.weight_decay = bt["weight_decay"].get<double>();
  r.num_warmup_steps = bt.value("num_warmup_steps", std::int64_t{0});
  require(!r.optimizer || *r.optimizer == "adam" || *r.optimizer == "adamw" || *r.optimizer == "sgd", w,
          ": optimizer must be adam, adamw or sgd");
  require(!r.lr_scheduler || *r.lr_scheduler == "linear" || *r.lr_scheduler == "cosine" ||
              *r.lr_scheduler == "constant",
          w, ": lr_scheduler must be linear, cosine or constant");
  require(!r.learning_rate || *r.learning_rate > 0, w, ": learning_rate must be > 0");
  require(r.num_warmup_steps >= 0, w, ": num_warmup_steps must be >= 0");
  return r;
}

/// The space [search.search_space] describes over the layers of `model`.
inline search::MixedPrecisionSpace read_space(nn::Module& model, const json& sp, const std::string& spw) {
  cli::detail::require_keys(
      sp, spw, {"name", "layers", "ops", "width", "frac_width", "families", "include_float", "setup", "seed"});
  const std::string layers = sp.value("layers", std::string(".*"));
  const auto ops = list_of<std::string>(sp, "ops", {"linear"}, spw);
  require(sp.contains("name") && sp["name"].is_string(), spw,
          ": 'name' is required (mixed_precision, "
          "mixed_precision_families or graph/quantize/mixed_precision_ptq)");
  const std::string space_name = sp["name"].get<std::string>();
  if (space_name == "mixed_precision") {
    for (const char* k : {"families", "include_float", "setup", "seed"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision\"");
    return search::MixedPrecisionSpace::integer_widths(model, layers, ops,
                                                       list_of<std::int64_t>(sp, "width", {8, 16, 32}, spw),
                                                       list_of<std::int64_t>(sp, "frac_width", {2, 4, 8}, spw));
  }
  if (space_name == "mixed_precision_families") {
    for (const char* k : {"width", "frac_width", "setup", "seed"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision_families\"");
    return search::MixedPrecisionSpace::families(model, layers, ops,
                                                 list_of<std::string>(sp, "families", search::variant_families(), spw),
                                                 sp.value("include_float", false));
  }
  if (space_name == "graph/quantize/mixed_precision_ptq" || space_name == "mixed_precision_seed") {
    for (const char* k : {"width", "frac_width", "families", "include_float"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"", space_name, "\" (use the seed tables)");
    // MASE searches every quantizable op unless `ops` narrows it.
    return seed_space(model, sp, layers, list_of<std::string>(sp, "ops", passes::mase_quantizable_ops(), spw), spw);
  }
  fail(spw, ": unknown name '", space_name,
       "' (allowed: mixed_precision, mixed_precision_families, graph/quantize/mixed_precision_ptq, "
       "mixed_precision_seed)");
}

/// Every choice must give a valid config: each choice of each key (the others at their first)
/// is applied to a fresh model before any trial runs.
inline void check_every_choice(const search::MixedPrecisionSpace& space,
                               const std::function<std::shared_ptr<nn::Module>()>& fresh, const std::string& spw) {
  const auto grid = space.grid();
  std::map<std::string, search::ParamValue> first;
  for (const auto& [k, c] : grid) first[k] = c.front();
  auto probe = fresh();
  for (const auto& [k, c] : grid)
    for (const auto& v : c) {
      auto point = first;
      point[k] = v;
      try {
        passes::quantize(*probe, space.config(point));
      } catch (const qnum::Error& e) {
        fail(spw, ": choice ", k, " = ", search::to_string(v), " is invalid: ", e.what());
      }
    }
}

inline std::shared_ptr<search::Sampler> make_sampler(const std::string& name, std::uint64_t seed,
                                                     const search::MixedPrecisionSpace& space, const json& strat,
                                                     const std::string& stw) {
  if (name == "tpe") return std::make_shared<search::TPESampler>(seed);
  if (name == "random") return std::make_shared<search::RandomSampler>(seed);
  if (name == "grid") return std::make_shared<search::GridSampler>(space.grid(), static_cast<std::uint32_t>(seed));
  if (name == "nsgaii") {
    search::NSGAIIOptions o;
    o.population_size = strat.value("population_size", std::int64_t{50});
    return std::make_shared<search::NSGAIISampler>(seed, o);
  }
  fail(stw, ": unknown sampler '", name, "' (allowed: tpe, random, grid, nsgaii)");
}

/// How the study runs: sampler, budget, fine-tuning, storage.
struct StudyPlan {
  std::string space_name, study_name;
  std::shared_ptr<search::Sampler> sampler;
  std::shared_ptr<search::Storage> storage;
  std::vector<search::Metric> metrics;
  bool sum_scaled = true, resume = false;
  std::int64_t n_trials = 20;
  std::optional<double> timeout;
  int finetune_epochs = 0;
  double learning_rate = 0;  ///< 0: the model's recipe
  std::uint64_t seed = 0;
  EvalSplit split;
  std::optional<TrainRunner> train;  ///< MASE's basic_train (sets finetune_epochs)
  search::StudyDirection direction = search::StudyDirection::maximize;  ///< of the scaled sum
  double compare_to = 32;
};

inline StudyPlan read_plan(const json& strat, const SearchOverrides& ov, const search::MixedPrecisionSpace& space,
                           const std::string& stw) {
  StudyPlan p;
  p.metrics = read_metrics(strat, stw);
  p.sum_scaled = strat.value("sum_scaled_metrics", p.metrics.size() == 1);
  if (strat.contains("direction")) {
    const json& d = strat["direction"];
    require(d == "maximize" || d == "minimize", stw, ": setup.direction must be maximize or minimize, got ", d.dump());
    p.direction = d == "maximize" ? search::StudyDirection::maximize : search::StudyDirection::minimize;
  }
  p.split = read_eval_split(strat, stw);
  p.train = read_train_runner(strat, stw);
  p.compare_to = read_compare_to(strat, stw);
  p.seed = ov.seed.value_or(strat.value("seed", std::uint64_t{0}));
  p.sampler = make_sampler(ov.sampler.value_or(strat.value("sampler", std::string("tpe"))), p.seed, space, strat, stw);
  p.n_trials = ov.trials.value_or(strat.value("n_trials", std::int64_t{20}));
  require(p.n_trials >= 0, stw, ": n_trials must be >= 0");
  p.timeout = ov.timeout;
  if (!p.timeout && strat.contains("timeout")) p.timeout = strat["timeout"].get<double>();
  require(!p.timeout || *p.timeout > 0, stw, ": timeout must be > 0 seconds");
  p.finetune_epochs = p.train ? p.train->max_epochs : strat.value("finetune_epochs", 0);
  require(p.finetune_epochs >= 0, stw, ": finetune_epochs must be >= 0");
  if (strat.contains("learning_rate")) {
    p.learning_rate = strat["learning_rate"].get<double>();
    require(p.learning_rate > 0, stw, ": learning_rate must be > 0");
  }
  p.resume = ov.resume || strat.value("resume", false);
  p.study_name = ov.study_name.value_or(strat.value("study_name", std::string("mixed-precision")));
  p.storage = search::open_storage(ov.storage.value_or(strat.value("storage", std::string("memory"))));
  if (!p.resume)
    require(!p.storage->find_study(p.study_name), "search: study '", p.study_name, "' already exists in ",
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

/// The evaluator of the study: fresh copies of the checkpoint measured on `split`, fine-tuned
/// (when asked) with the model's default recipe on `train`.
template <class Data>
search::BasicQuantizedEvaluator<Data> make_evaluator(const SearchJob& job, const StudyPlan& plan,
                                                     const std::function<std::shared_ptr<nn::Module>()>& fresh,
                                                     const Data& split, const Data& train) {
  constexpr bool tokens = std::is_same_v<Data, data::TokenDataset>;
  search::BasicQuantizedEvaluator<Data> ev;
  ev.fresh_model = fresh;
  if constexpr (tokens) {
    ev.forward_of = [](const std::shared_ptr<nn::Module>& m) {
      auto bert = std::dynamic_pointer_cast<models::BertForSequenceClassification>(m);
      require(bert != nullptr, "search: a text model that is not BERT");
      return models::bert_forward(bert);
    };
    ev.example = cli::detail::trace_example(
        models::Classifier{nullptr, nullptr, models::InputKind::tokens, nullptr}, 1,
        std::max<std::int64_t>(1, std::min(job.max_length, split.size() > 0 ? split.length(0) : job.max_length)),
        &split);
  } else {
    ev.example = Tensor::zeros({1, models::kJscFeatures});  // BitOPs per sample
  }
  ev.eval = &split;
  ev.batch_size = job.batch;
  ev.finetune_epochs = plan.finetune_epochs;
  ev.train = &train;
  ev.finetune = models::default_recipe(job.model);
  if constexpr (tokens) ev.finetune.max_length = job.max_length;
  if constexpr (!tokens) ev.finetune.batch_size = 256;
  ev.finetune.dataset = job.dataset;
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
  return ev;
}

/// The summary of `study` (best.json's content); `before` trials were in the study when this
/// run started.
inline json study_summary(search::Study& study, std::size_t before, const StudyPlan& plan,
                          const search::MixedPrecisionSpace& space) {
  const bool single = plan.metrics.size() == 1 || plan.sum_scaled;
  const auto trials = study.get_trials();
  const auto done = study.get_trials({search::TrialState::complete});
  json best = json::object();
  if (!done.empty()) {
    if (single) {
      best = trial_json(study.best_trial());
    } else {
      best = json::array();
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
inline void write_study_outputs(search::Study& study, const json& summary, const SearchJob& job,
                                const StudyPlan& plan) {
  const auto& out_dir = job.out_dir;
  write_file_atomic(out_dir / "trials.csv", study.trials_table().to_csv());
  write_file_atomic(out_dir / "best.json", summary.dump(2) + "\n");
  const auto done = study.get_trials({search::TrialState::complete});
  const auto& metrics = plan.metrics;
  if (summary.contains("best_trial")) {
    if (!done.empty())
      write_file_atomic(out_dir / "best_transform.json", json{{"model", job.model},
                                                              {"dataset", job.dataset},
                                                              {"load_name", job.load},
                                                              {"passes", {{"quantize", summary["best_trial"]["quantize"]}}}}
                                                                 .dump(2) +
                                                             "\n");
    search::PlotSeries values{"trial value", {}, true}, curve{"best so far", {}, false};
    for (const auto& t : done) values.points.emplace_back(double(t.number), t.values[0]);
    for (const auto& [n, v] : study.best_so_far()) curve.points.emplace_back(double(n), v);
    search::write_svg_line_plot((out_dir / "plot.svg").string(), {values, curve}, "study " + plan.study_name,
                                "trial number", metrics.size() == 1 ? metrics[0].name : "scaled sum of metrics");
    return;
  }
  search::PlotSeries all{"trials", {}, true}, pf{"Pareto front", {}, false};
  for (const auto& t : done) all.points.emplace_back(t.values[1], t.values[0]);
  if (!done.empty())
    for (const auto& t : study.best_trials()) pf.points.emplace_back(t.values[1], t.values[0]);
  std::sort(pf.points.begin(), pf.points.end());
  search::write_svg_line_plot((out_dir / "plot.svg").string(), {all, pf}, "study " + plan.study_name, metrics[1].name,
                              metrics[0].name);
}

/// MASE's "Best trial(s)" table (an org-mode table as its tabulate prints): trial number,
/// objective value(s), the measured metrics and the scaled ones.
inline std::string best_trials_table(const json& best, const std::vector<search::Metric>& metrics) {
  const auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v);
    return std::string(b);
  };
  std::vector<std::vector<std::string>> rows{{"number", "value(s)", "accuracy", "loss", "average_bitwidth",
                                              "memory_density"}};
  for (const auto& m : metrics) rows[0].push_back("scaled " + m.name);
  for (const auto& t : best.is_array() ? best : json::array({best})) {
    std::string values;
    for (const auto& v : t["values"]) values += (values.empty() ? "" : ", ") + num(v.get<double>());
    const json& sw = t["software_metrics"];
    const json& hw = t["hardware_metrics"];
    rows.push_back({std::to_string(t["number"].get<std::int64_t>()), values, num(sw.value("accuracy", 0.0)),
                    num(sw.value("loss", 0.0)), num(hw.value("average_bitwidth", 0.0)),
                    num(hw.value("memory_density", 0.0))});
    for (const auto& m : metrics) rows.back().push_back(num(t["scaled_metrics"].value(m.name, 0.0)));
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (std::size_t j = 0; j < rows.size(); ++j) {
    for (std::size_t i = 0; i < rows[j].size(); ++i)
      out += (i ? " | " : "| ") + rows[j][i] + std::string(width[i] - rows[j][i].size(), ' ');
    out += " |\n";
    if (j == 0) {
      for (std::size_t i = 0; i < width.size(); ++i) out += (i ? "-+-" : "|-") + std::string(width[i], '-');
      out += "-|\n";
    }
  }
  return out;
}

/// The summary on stdout: the study, the trials run, the best trial (its params) or the Pareto
/// set, and MASE's table of them.
inline void print_study_summary(search::Study& study, const json& summary, const SearchJob& job,
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

/// Runs the study's trials on the split the plan names of `data` (feature or text splits)
/// and reports it.
template <class Splits>
void run_study(const SearchJob& job, const StudyPlan& plan, const search::MixedPrecisionSpace& space,
               const std::function<std::shared_ptr<nn::Module>()>& fresh, const Splits& data, bool json_out) {
  const auto& loader = plan.split.loader;
  const auto split = first_rows(loader == "test_dataloader"    ? data.test
                                : loader == "train_dataloader" ? data.train
                                                               : data.val,
                                plan.split.num_samples);
  // basic_train's num_samples: that many rows of the training split per trial.
  const auto train = first_rows(data.train, plan.train ? plan.train->num_samples : 0);
  const auto ev = make_evaluator(job, plan, fresh, split, train);
  std::filesystem::create_directories(job.out_dir);
  search::Study study(plan.storage, plan.study_name,
                      search::objective_directions(plan.metrics, plan.sum_scaled, plan.direction),
                      plan.sampler, nullptr, plan.resume ? search::OpenMode::create_or_load : search::OpenMode::create);
  study.set_user_attr("space", plan.space_name);
  study.set_user_attr("model", job.model);
  study.set_user_attr("checkpoint", job.load);
  study.set_user_attr("metrics", metrics_json(plan.metrics));
  study.set_user_attr("sum_scaled_metrics", plan.sum_scaled);
  const auto before = study.get_trials().size();
  study.optimize(
      [&](search::Trial& t) {
        const auto qc = space.sample(t);
        const auto r = ev(qc, job.out_dir / "trials" / std::to_string(t.number()));
        t.set_user_attr("metrics", r.to_json());
        for (const char* k : {"accuracy", "bits", "bitops"}) t.set_user_attr(k, r.get(k));
        // MASE's trial attributes, so its analysis of a study reads qnum's too.
        t.set_user_attr("software_metrics", r.software_metrics());
        t.set_user_attr("hardware_metrics", r.hardware_metrics());
        t.set_user_attr("scaled_metrics", search::scaled_metrics(r, plan.metrics));
        t.set_user_attr("sampled_config", qc);
        return objective_values(r, plan.metrics, plan.sum_scaled, plan.direction);
      },
      plan.n_trials, plan.timeout);
  const json summary = study_summary(study, before, plan, space);
  write_study_outputs(study, summary, job, plan);
  if (json_out)
    std::cout << summary.dump() << "\n";
  else
    print_study_summary(study, summary, job, plan);
}

}  // namespace detail_search_config


/// Runs the search of config file `path` (see the file comment); prints a summary (or one
/// JSON object) on stdout.
inline void run_search_config(const std::string& path, const SearchOverrides& ov, bool json_out) {
  using namespace detail_search_config;
  const json cfg = cli::detail::toml_file_as_json(path);
  const std::string where = path;
  // MASE's keys search does not read: one line each (qnum/io/mase_config.hpp), then run.
  auto reads = mase::keys_read_by(mase::Command::search);
  reads.insert(reads.end(), {"max_length", "limit"});
  for (const auto& n : mase::plan_top_level(cfg, mase::Command::search, where, reads).notes)
    std::cerr << "note: " << where << ": " << n << "\n";
  const SearchJob job = read_job(cfg, ov, where);
  require(cfg.contains("search") && cfg["search"].is_object(), where, ": a [search] table is required");
  const json& s = cfg["search"];
  cli::detail::require_keys(s, where + " [search]", {"search_space", "strategy"});
  require(s.contains("search_space"), where, ": [search.search_space] is required");
  const std::string spw = where + " [search.search_space]", stw = where + " [search.strategy]";
  const json strat = read_strategy(s.value("strategy", json::object()), stw);

  // Everything about the space is checked on the model before any data is read.
  const models::Classifier base = cli::detail::load_classifier(job.model, job.load, job.meta);
  const auto base_state = base.module->state_dict();
  const std::function<std::shared_ptr<nn::Module>()> fresh = [&] {
    models::BuildOptions bo;
    bo.config = job.meta.value("model_config", json(nullptr));
    auto m = models::make_classifier(job.model, bo).module;
    if (job.meta.contains("structure")) passes::restore_structure(*m, job.meta["structure"]);
    m->load_state_dict(base_state);
    return m;
  };
  const auto space = read_space(*base.module, s["search_space"], spw);
  check_every_choice(space, fresh, spw);
  StudyPlan plan = read_plan(strat, ov, space, stw);
  plan.space_name = s["search_space"]["name"].get<std::string>();

  if (cfg.contains("threads")) set_num_threads(cfg["threads"].get<int>());
  if (base.input == models::InputKind::features)
    return run_study(job, plan, space, fresh, load_dataset(job.dataset), json_out);
  run_study(job, plan, space, fresh,
            cli::detail::load_text_splits(job.dataset, job.max_length, job.limit, cli::detail::vocab_beside(job.load)),
            json_out);
}

}  // namespace qnum::cli
