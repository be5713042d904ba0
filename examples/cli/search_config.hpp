// `qnum search --config search.toml`: a mixed-precision search on a trained checkpoint
// (MASE's `ch search`, spec/system.md §7.2, without its pitfalls: every trial quantizes a
// fresh copy of the checkpoint with a config keyed by layer name, and measures it anew).
//
// Top level: model, dataset, load_name (alias load; required), load_type (accepted, unused),
// output_dir (alias project_dir; required), batch_size (evaluation, default 1024), seed,
// threads, task (accepted). [search.search_space]:
//   name = "mixed_precision"           per layer "<layer>/width" in width (default [8, 16, 32])
//                                      and "<layer>/frac_width" in frac_width (default [2, 4, 8]),
//                                      integer on data_in, weight and bias;
//        = "mixed_precision_families"  per layer "<layer>/format" among the variants of
//                                      families (default: all; include_float adds "float");
//        = "graph/quantize/mixed_precision_ptq" (MASE's; alias "mixed_precision_seed"): the
//                                      [seed.<layer or op or default>.config] tables, each key
//                                      a list of choices (or one fixed value), "NA" as MASE's.
//                                      setup.by ("name"/"type") only says how seed keys are
//                                      looked up: a layer's own name first, then its op, then
//                                      default; the config searched is always keyed by name.
//   layers (regex over layer paths, default ".*"), ops (default ["linear"]).
// [search.strategy]: name ("optuna"), sampler (tpe, random, grid, nsgaii), n_trials, timeout
// (seconds), seed, storage (default "memory"), study_name (default "mixed-precision"),
// resume, finetune_epochs (QAT per trial), learning_rate, sum_scaled_metrics (default: true
// for one metric, false for several), population_size (NSGA-II), eval_mode (true), n_jobs
// (1); MASE's [setup] table may hold n_trials, timeout, sampler, sum_scaled_metrics, n_jobs,
// seed; [sw_runner.basic_evaluation] data_loader (val_dataloader default, test_dataloader,
// train_dataloader) and num_samples (rows, default all); [metrics.<name>] scale (1) and
// direction (maximize for accuracy, minimize otherwise); metrics: accuracy, loss, bits,
// model_size, average_bitwidth, bitops, size_ratio (default: accuracy alone).
// Outputs in output_dir: trials.csv (Optuna's trials_dataframe), best.json (best trial or
// Pareto set with metrics and quantize config), best_transform.json (a `qnum transform`
// config applying the best config), plot.svg (best so far; multi-objective: the trials and
// the Pareto front of the first two objectives). Unknown keys are errors naming them.
#pragma once

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/search/grid_sampler.hpp"
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
  bool resume = false;
};

namespace detail_search_config {

using nlohmann::json;
using qnum::detail::fail;
using qnum::detail::require;

inline std::vector<search::CategoricalChoice> choices_of(const json& v, const std::string& where) {
  std::vector<search::CategoricalChoice> out;
  const json list = v.is_array() ? v : json::array({v});
  require(!list.empty(), where, ": an empty list of choices");
  for (const auto& c : list) {
    require(c.is_primitive(), where, ": choices must be numbers, strings or booleans, got ", c.dump());
    out.push_back(search::param_value_from_json(c));
  }
  return out;
}

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

/// MASE's seed space: per selected layer the seed table of its name, else of its op, else
/// `default`; each key a choice list (a scalar is one fixed value).
inline search::MixedPrecisionSpace seed_space(nn::Module& model, const json& sp, const std::string& layers,
                                              const std::vector<std::string>& ops, const std::string& where) {
  require(sp.contains("seed") && sp["seed"].is_object(), where, ": name '", sp["name"].get<std::string>(),
          "' needs a [seed] table ([seed.default.config], [seed.<layer>.config])");
  const json& seed = sp["seed"];
  std::string by = "name";
  if (sp.contains("setup")) {
    cli::detail::require_keys(sp["setup"], where + " setup", {"by"});
    by = sp["setup"].value("by", std::string("name"));
    require(by == "name" || by == "type", where, ": setup.by must be \"name\" or \"type\", got '", by, "'");
  }
  std::vector<search::LayerSpace> out;
  for (const auto& [path, op] : search::select_layers(model, layers, ops)) {
    const json* entry = nullptr;
    for (const auto& [k, e] : seed.items())
      if (passes::detail::name_matches(k, path)) entry = &e;
    if (!entry && seed.contains(op)) entry = &seed[op];
    if (!entry && seed.contains("default")) entry = &seed["default"];
    if (!entry) continue;
    const json& cfg = entry->contains("config") ? (*entry)["config"] : *entry;
    require(cfg.is_object(), where, ": seed entry for layer '", path, "' must be a table");
    search::LayerSpace l{path, op, {}, json::object()};
    for (const auto& [k, v] : cfg.items()) {
      if (v.is_array() && v.size() > 1)
        l.choices[k] = choices_of(v, where + " seed key '" + k + "'");
      else
        l.fixed[k] = v.is_array() ? v[0] : v;
    }
    // A layer whose name is fixed to a skip value has nothing to search.
    if (!l.choices.count("name") && (!l.fixed.contains("name") || passes::is_skip_name(l.fixed["name"]))) continue;
    out.push_back(std::move(l));
  }
  require(!out.empty(), where, ": the seed tables leave no layer to search (every layer's name is NA/none)");
  (void)by;  // seed keys are looked up by name and then by op whatever `by` says (see the header)
  return search::MixedPrecisionSpace(std::move(out));
}

inline std::string params_text(const search::FrozenTrial& t) {
  std::string s;
  for (const auto& [k, v] : t.params)
    s += (s.empty() ? "" : ", ") + k + "=" + search::to_string(search::to_external(t.distributions.at(k), v));
  return s;
}

inline json trial_json(const search::FrozenTrial& t) {
  json p = json::object();
  for (const auto& [k, v] : t.params) p[k] = search::to_json(search::to_external(t.distributions.at(k), v));
  return {{"number", t.number},
          {"values", t.values},
          {"params", p},
          {"metrics", t.user_attrs.value("metrics", json::object())},
          {"quantize", t.user_attrs.value("quantize_config", json::object())}};
}

}  // namespace detail_search_config

/// Runs the search of config file `path` (see the file comment); prints a summary (or one
/// JSON object) on stdout.
inline void run_search_config(const std::string& path, const SearchOverrides& ov, bool json_out) {
  using namespace detail_search_config;
  const json cfg = cli::detail::toml_file_as_json(path);
  const std::string where = path;
  // MASE's keys search does not read: one line each (qnum/io/mase_config.hpp), then run.
  for (const auto& n :
       mase::plan_top_level(cfg, mase::Command::search, where, mase::keys_read_by(mase::Command::search)).notes)
    std::cerr << "note: " << where << ": " << n << "\n";
  auto str = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (cfg.contains(k)) {
        require(cfg[k].is_string(), where, ": '", k, "' must be a string");
        return cfg[k].get<std::string>();
      }
    return std::string();
  };
  const std::string model_name = str({"model"}), dataset = ov.dataset.value_or(str({"dataset"})),
                    load = ov.load.value_or(str({"load_name", "load"})),
                    out_text = ov.output_dir.value_or(str({"output_dir", "project_dir"}));
  require(!model_name.empty(), where, ": 'model' is required");
  require(!dataset.empty(), where, ": 'dataset' is required");
  require(!load.empty(), where, ": 'load_name' (the trained checkpoint to search from) is required");
  require(!out_text.empty(), where, ": 'output_dir' is required");
  const std::int64_t batch = cfg.value("batch_size", std::int64_t{1024});
  require(batch >= 1, where, ": batch_size must be >= 1");
  const std::uint64_t data_seed = cfg.value("seed", std::uint64_t{0});
  require(cfg.contains("search") && cfg["search"].is_object(), where, ": a [search] table is required");
  const json& s = cfg["search"];
  cli::detail::require_keys(s, where + " [search]", {"search_space", "strategy"});
  require(s.contains("search_space"), where, ": [search.search_space] is required");
  const json& sp = s["search_space"];
  const json st = s.value("strategy", json::object());
  const std::string spw = where + " [search.search_space]", stw = where + " [search.strategy]";
  cli::detail::require_keys(
      sp, spw, {"name", "layers", "ops", "width", "frac_width", "families", "include_float", "setup", "seed"});
  cli::detail::require_keys(st, stw,
                            {"name", "sampler", "n_trials", "timeout", "seed", "storage", "study_name", "resume",
                             "finetune_epochs", "learning_rate", "sum_scaled_metrics", "population_size", "eval_mode",
                             "n_jobs", "setup", "sw_runner", "hw_runner", "metrics"});
  // MASE's [setup] keys, merged under the strategy's own.
  json strat = st;
  if (st.contains("setup")) {
    cli::detail::require_keys(st["setup"], stw + " setup",
                              {"n_jobs", "n_trials", "timeout", "sampler", "sum_scaled_metrics", "seed", "pkl_ckpt"});
    for (const auto& [k, v] : st["setup"].items())
      if (!strat.contains(k)) strat[k] = v;
  }
  if (strat.contains("name"))
    require(strat["name"] == "optuna", stw, ": name must be \"optuna\", got ", strat["name"].dump());
  require(strat.value("n_jobs", 1) == 1, stw,
          ": n_jobs must be 1 (run several `qnum search --config` processes on "
          "one sqlite/postgresql storage with resume = true instead)");
  require(strat.value("eval_mode", true), stw,
          ": eval_mode = false (training runner) is not supported; use "
          "finetune_epochs for compression-aware search");
  require(!strat.contains("pkl_ckpt"), stw, ": pkl_ckpt is MASE's pickle resume; use storage + resume instead");
  // MASE's example files name hw_runner.average_bitwidth (compare_to = 32); qnum measures
  // average_bitwidth (and bits, bitops) on every trial, so the runner is accepted and said so.
  if (strat.contains("hw_runner")) {
    const json& hw = strat["hw_runner"];
    cli::detail::require_keys(hw, stw + " hw_runner", {"average_bitwidth"});
    if (hw.contains("average_bitwidth")) {
      cli::detail::require_keys(hw["average_bitwidth"], stw + " hw_runner.average_bitwidth", {"compare_to"});
      const json& c = hw["average_bitwidth"].value("compare_to", json(32));
      require(c.is_number() && c.get<double>() > 0, stw, ": hw_runner.average_bitwidth.compare_to must be > 0");
    }
    std::cerr << "note: " << stw << ": hw_runner.average_bitwidth: qnum measures average_bitwidth (bits per "
              << "parameter) on every trial; compare_to is not needed\n";
  }

  // Metrics.
  std::vector<search::Metric> metrics;
  if (strat.contains("metrics")) {
    require(strat["metrics"].is_object() && !strat["metrics"].empty(), stw, ": metrics must be a non-empty table");
    for (const auto& [name, m] : strat["metrics"].items()) {
      search::QuantizedMetrics{}.get(name);  // unknown names fail here
      cli::detail::require_keys(m, stw + " metrics." + name, {"scale", "direction"});
      search::Metric x{name, name == "accuracy" ? search::StudyDirection::maximize : search::StudyDirection::minimize,
                       m.value("scale", 1.0)};
      if (m.contains("direction")) {
        const auto d = m["direction"].get<std::string>();
        require(d == "maximize" || d == "minimize", stw, ": metrics.", name, ".direction must be maximize or minimize");
        x.direction = d == "maximize" ? search::StudyDirection::maximize : search::StudyDirection::minimize;
      }
      metrics.push_back(x);
    }
  } else {
    metrics.push_back({"accuracy", search::StudyDirection::maximize, 1.0});
  }
  const bool sum_scaled = strat.value("sum_scaled_metrics", metrics.size() == 1);

  // Evaluation split.
  std::string loader = "val_dataloader";
  std::int64_t num_samples = 0;
  if (strat.contains("sw_runner")) {
    cli::detail::require_keys(strat["sw_runner"], stw + " sw_runner", {"basic_evaluation"});
    const json be = strat["sw_runner"].value("basic_evaluation", json::object());
    cli::detail::require_keys(be, stw + " sw_runner.basic_evaluation", {"data_loader", "num_samples"});
    loader = be.value("data_loader", loader);
    num_samples = be.value("num_samples", std::int64_t{0});
    require(loader == "val_dataloader" || loader == "test_dataloader" || loader == "train_dataloader", stw,
            ": data_loader must be val_dataloader, test_dataloader or train_dataloader, got '", loader, "'");
    require(num_samples >= 0, stw, ": num_samples must be >= 0");
  }

  // Everything about the space is checked on the model before any data is read.
  auto base = cli::detail::load_model(model_name, load);
  const auto base_state = base->state_dict();
  const std::string layers = sp.value("layers", std::string(".*"));
  const auto ops = list_of<std::string>(sp, "ops", {"linear"}, spw);
  require(sp.contains("name") && sp["name"].is_string(), spw,
          ": 'name' is required (mixed_precision, "
          "mixed_precision_families or graph/quantize/mixed_precision_ptq)");
  const std::string space_name = sp["name"].get<std::string>();
  search::MixedPrecisionSpace space;
  if (space_name == "mixed_precision") {
    for (const char* k : {"families", "include_float", "setup", "seed"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision\"");
    space = search::MixedPrecisionSpace::integer_widths(*base, layers, ops,
                                                        list_of<std::int64_t>(sp, "width", {8, 16, 32}, spw),
                                                        list_of<std::int64_t>(sp, "frac_width", {2, 4, 8}, spw));
  } else if (space_name == "mixed_precision_families") {
    for (const char* k : {"width", "frac_width", "setup", "seed"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"mixed_precision_families\"");
    space = search::MixedPrecisionSpace::families(*base, layers, ops,
                                                  list_of<std::string>(sp, "families", search::variant_families(), spw),
                                                  sp.value("include_float", false));
  } else if (space_name == "graph/quantize/mixed_precision_ptq" || space_name == "mixed_precision_seed") {
    for (const char* k : {"width", "frac_width", "families", "include_float"})
      require(!sp.contains(k), spw, ": '", k, "' does not apply to name = \"", space_name, "\" (use the seed tables)");
    space = seed_space(*base, sp, layers, ops, spw);
  } else {
    fail(spw, ": unknown name '", space_name,
         "' (allowed: mixed_precision, mixed_precision_families, graph/quantize/mixed_precision_ptq, "
         "mixed_precision_seed)");
  }
  // Every choice must give a valid config: each choice of each key (the others at their
  // first) is applied to a copy before any trial runs.
  {
    const auto grid = space.grid();
    std::map<std::string, search::ParamValue> first;
    for (const auto& [k, c] : grid) first[k] = c.front();
    auto probe = cli::detail::load_model(model_name, load);
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

  // Sampler, storage, study.
  const std::string sampler_name = ov.sampler.value_or(strat.value("sampler", std::string("tpe")));
  const std::uint64_t seed = ov.seed.value_or(strat.value("seed", std::uint64_t{0}));
  const auto directions = search::objective_directions(metrics, sum_scaled);
  std::shared_ptr<search::Sampler> sampler;
  if (sampler_name == "tpe") {
    sampler = std::make_shared<search::TPESampler>(seed);
  } else if (sampler_name == "random") {
    sampler = std::make_shared<search::RandomSampler>(seed);
  } else if (sampler_name == "grid") {
    sampler = std::make_shared<search::GridSampler>(space.grid(), static_cast<std::uint32_t>(seed));
  } else if (sampler_name == "nsgaii") {
    search::NSGAIIOptions o;
    o.population_size = strat.value("population_size", std::int64_t{50});
    sampler = std::make_shared<search::NSGAIISampler>(seed, o);
  } else {
    fail(stw, ": unknown sampler '", sampler_name, "' (allowed: tpe, random, grid, nsgaii)");
  }
  const std::int64_t n_trials = ov.trials.value_or(strat.value("n_trials", std::int64_t{20}));
  require(n_trials >= 0, stw, ": n_trials must be >= 0");
  std::optional<double> timeout = ov.timeout;
  if (!timeout && strat.contains("timeout")) timeout = strat["timeout"].get<double>();
  require(!timeout || *timeout > 0, stw, ": timeout must be > 0 seconds");
  const int finetune = strat.value("finetune_epochs", 0);
  require(finetune >= 0, stw, ": finetune_epochs must be >= 0");
  const bool resume = ov.resume || strat.value("resume", false);
  const std::string study_name = ov.study_name.value_or(strat.value("study_name", std::string("mixed-precision")));
  auto storage = search::open_storage(ov.storage.value_or(strat.value("storage", std::string("memory"))));
  if (!resume)
    require(!storage->find_study(study_name), "search: study '", study_name, "' already exists in ", storage->url(),
            "; set resume = true (or --resume) to continue it, or choose another study_name");

  if (cfg.contains("threads")) set_num_threads(cfg["threads"].get<int>());
  const data::JscSplits data = load_dataset(dataset);
  (void)data_seed;
  data::Dataset split = loader == "test_dataloader" ? data.test : loader == "train_dataloader" ? data.train : data.val;
  if (num_samples > 0 && num_samples < split.size()) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(num_samples));
    for (std::int64_t i = 0; i < num_samples; ++i) idx[static_cast<std::size_t>(i)] = i;
    split = split.subset(idx);
  }
  search::QuantizedEvaluator ev;
  ev.fresh_model = [&] {
    auto m = models::make_jsc_model(model_name, 0);
    if (const auto meta = train::read_checkpoint_meta(load); meta.contains("structure"))
      passes::restore_structure(*m, meta["structure"]);
    m->load_state_dict(base_state);
    return std::static_pointer_cast<nn::Module>(m);
  };
  ev.eval = &split;
  ev.batch_size = batch;
  ev.example = Tensor::zeros({1, models::kJscFeatures});
  ev.finetune_epochs = finetune;
  ev.train = &data.train;
  ev.finetune.model = model_name;
  ev.finetune.dataset = dataset;
  ev.finetune.batch_size = 256;
  ev.finetune.learning_rate = strat.value("learning_rate", 1e-3);
  ev.finetune.seed = seed;
  ev.finetune.progress = false;

  const std::filesystem::path out_dir(out_text);
  std::filesystem::create_directories(out_dir);
  search::Study study(storage, study_name, directions, sampler, nullptr,
                      resume ? search::OpenMode::create_or_load : search::OpenMode::create);
  study.set_user_attr("space", space_name);
  study.set_user_attr("model", model_name);
  study.set_user_attr("checkpoint", load);
  json mj = json::array();
  for (const auto& m : metrics)
    mj.push_back({{"name", m.name}, {"scale", m.scale}, {"direction", std::string(search::to_string(m.direction))}});
  study.set_user_attr("metrics", mj);
  study.set_user_attr("sum_scaled_metrics", sum_scaled);
  const auto before = study.get_trials().size();
  study.optimize(
      [&](search::Trial& t) {
        const auto qc = space.sample(t);
        t.set_user_attr("quantize_config", qc);
        const auto r = ev(qc, out_dir / "trials" / std::to_string(t.number()));
        t.set_user_attr("metrics", r.to_json());
        for (const char* k : {"accuracy", "bits", "bitops"}) t.set_user_attr(k, r.get(k));
        return objective_values(r, metrics, sum_scaled);
      },
      n_trials, timeout);

  // Outputs.
  const auto trials = study.get_trials();
  write_file_atomic(out_dir / "trials.csv", study.trials_table().to_csv());
  const bool single = directions.size() == 1;
  const auto done = study.get_trials({search::TrialState::complete});
  json best = json::object();
  std::vector<search::FrozenTrial> front;
  if (!done.empty()) {
    if (single) {
      best = trial_json(study.best_trial());
    } else {
      front = study.best_trials();
      best = json::array();
      for (const auto& t : front) best.push_back(trial_json(t));
    }
  }
  json summary{{"study", study_name},
               {"storage", storage->url()},
               {"space", space_name},
               {"layers", space.layers().size()},
               {"sampler", sampler->name()},
               {"metrics", mj},
               {"sum_scaled_metrics", sum_scaled},
               {"evaluated_on", loader},
               {"trials_run", trials.size() - before},
               {"trials_total", trials.size()},
               {"completed", done.size()},
               {single ? "best_trial" : "best_trials", best}};
  write_file_atomic(out_dir / "best.json", summary.dump(2) + "\n");
  if (single && !done.empty())
    write_file_atomic(out_dir / "best_transform.json", json{{"model", model_name},
                                                            {"dataset", dataset},
                                                            {"load_name", load},
                                                            {"passes", {{"quantize", best["quantize"]}}}}
                                                               .dump(2) +
                                                           "\n");
  if (single) {
    search::PlotSeries values{"trial value", {}, true}, curve{"best so far", {}, false};
    for (const auto& t : done) values.points.emplace_back(double(t.number), t.values[0]);
    for (const auto& [n, v] : study.best_so_far()) curve.points.emplace_back(double(n), v);
    search::write_svg_line_plot((out_dir / "plot.svg").string(), {values, curve}, "study " + study_name, "trial number",
                                metrics.size() == 1 ? metrics[0].name : "scaled sum of metrics");
  } else {
    search::PlotSeries all{"trials", {}, true}, pf{"Pareto front", {}, false};
    for (const auto& t : done) all.points.emplace_back(t.values[1], t.values[0]);
    for (const auto& t : front) pf.points.emplace_back(t.values[1], t.values[0]);
    std::sort(pf.points.begin(), pf.points.end());
    search::write_svg_line_plot((out_dir / "plot.svg").string(), {all, pf}, "study " + study_name, metrics[1].name,
                                metrics[0].name);
  }
  if (json_out) {
    std::cout << summary.dump() << "\n";
    return;
  }
  std::printf("study %s in %s: %s over %zu layer(s) of %s (%s), %s, evaluated on %s\n", study_name.c_str(),
              storage->url().c_str(), space_name.c_str(), space.layers().size(), model_name.c_str(), load.c_str(),
              sampler->name().c_str(), loader.c_str());
  std::printf("trials run %zu, in study %zu, completed %zu\n", trials.size() - before, trials.size(), done.size());
  if (single && !done.empty()) {
    const auto b = study.best_trial();
    std::printf("best trial %lld: value %.6g (accuracy %.4f, %.2f bits/parameter, %.4g BitOPs/sample): %s\n",
                static_cast<long long>(b.number), b.values[0], best["metrics"].value("accuracy", 0.0),
                best["metrics"].value("average_bitwidth", 0.0), best["metrics"].value("bitops", 0.0),
                params_text(b).c_str());
  }
  for (const auto& t : front)
    std::printf("pareto trial %lld: %s = %.6g, %s = %.6g\n", static_cast<long long>(t.number), metrics[0].name.c_str(),
                t.values[0], metrics[1].name.c_str(), t.values[1]);
  std::printf("wrote %s (trials.csv, best.json, plot.svg%s)\n", out_dir.string().c_str(),
              single && !done.empty() ? ", best_transform.json" : "");
}

}  // namespace qnum::cli
