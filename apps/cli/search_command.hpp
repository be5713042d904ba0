// `qnum search --config search.toml [--trials N] [--sampler S] [--storage URL] [--study-name
// NAME] [--seed S] [--timeout T] [--resume] [--json]` runs a mixed-precision search on a
// trained checkpoint of any registered model (search_config.hpp; --model, --max-length and
// --limit for text models), and
// `qnum search --objective branin|rastrigin|mixed-precision --sampler random|grid|tpe|nsgaii
// [--multivariate] --trials N [--storage URL] [--study-name NAME] [--seed S] [--resume] [--json]` runs a
// search on a built-in objective (include/qnum/search/objectives.hpp); `qnum study show` is
// study_command.hpp.
// Several `qnum search --resume` processes on one sqlite:/// or postgresql:// study (the
// latter from several machines) share the work: trial numbers and grid points never repeat,
// and trials of a killed worker become FAIL once their heartbeat is older than --grace-period.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/search/objectives.hpp"
#include "qnum/search/samplers.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/study_report.hpp"
#include "search_config.hpp"

namespace qnum::cli {

/// The `search` subcommand (built-in objectives).
class SearchCommand {
 public:
  explicit SearchCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("search", "Search a built-in objective with an Optuna-like study (sampler, storage)");
    cmd_->add_option("--config", config_,
                     "TOML/JSON search config: a mixed-precision search on a checkpoint (docs/search.md)");
    cmd_->add_option("--objective", objective_, "built-in objective: branin, rastrigin or mixed-precision");
    cmd_->add_option("--sampler", sampler_, "random, grid, tpe or nsgaii (qnum/search/samplers.hpp)")
        ->capture_default_str();
    cmd_->add_flag("--multivariate", multivariate_, "tpe: sample the parameters jointly (Optuna's multivariate=True)");
    cmd_->add_option("--trials", trials_, "trials this process runs (a grid stops when exhausted)");
    cmd_->add_option("--storage", storage_,
                     "memory, sqlite:///relative.db, sqlite:////absolute.db or postgresql://user:pass@host:port/db")
        ->capture_default_str();
    cmd_->add_option("--study-name", study_name_, "study name (default: OBJECTIVE-SAMPLER)");
    cmd_->add_option("--seed", seed_, "sampler seed (give each worker its own)")->capture_default_str();
    cmd_->add_option("--dims", dims_, "rastrigin: number of dimensions")->capture_default_str();
    cmd_->add_option("--timeout", timeout_, "seconds after which no new trial starts");
    cmd_->add_flag("--resume", resume_,
                   "continue the study if it exists (create it otherwise), failing trials of dead workers first; "
                   "every worker joining a shared study passes it");
    cmd_->add_option("--heartbeat-interval", heartbeat_, "seconds between heartbeats of a running trial")
        ->capture_default_str();
    cmd_->add_option("--grace-period", grace_,
                     "a RUNNING trial whose heartbeat is older is failed (default 2 intervals)");
    cmd_->add_option("--trial-delay", delay_, "seconds each trial sleeps (stands in for an expensive objective)")
        ->capture_default_str();
    cmd_->add_option("--dataset", dataset_, "--config: dataset (overrides the config's, e.g. jsc-synthetic)");
    cmd_->add_option("--load", load_, "--config: checkpoint to search from (overrides load_name)");
    cmd_->add_option("--output-dir", output_dir_, "--config: where results go (overrides output_dir/project_dir)");
    cmd_->add_option("--model", model_, "--config: model the checkpoint holds (overrides the config's, e.g. bert-tiny)");
    cmd_->add_option("--max-length", max_length_, "--config, text models: tokens per text (default: the checkpoint's)");
    cmd_->add_option("--limit", limit_, "--config, text models: at most N rows per split");
    cmd_->add_option("--tensorboard", tensorboard_,
                     "write the study's trials into DIR as a TensorBoard log (a scalar per trial and objective)");
    cmd_->add_flag("--json", json_, "print one JSON object");
  }
  SearchCommand(const SearchCommand&) = delete;  // CLI11 holds pointers to the members
  SearchCommand& operator=(const SearchCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(config_.empty() != objective_.empty(),
                          "search: give exactly one of --config FILE and --objective NAME");
    std::error_code ec;
    qnum::detail::require(tensorboard_.empty() || !std::filesystem::exists(tensorboard_, ec) ||
                              std::filesystem::is_directory(tensorboard_, ec),
                          "search: the TensorBoard folder '", tensorboard_, "' is a file");
    if (!config_.empty()) {
      SearchOverrides ov;
      if (cmd_->count("--trials")) ov.trials = trials_;
      if (cmd_->count("--sampler")) ov.sampler = sampler_;
      if (cmd_->count("--storage")) ov.storage = storage_;
      if (cmd_->count("--study-name")) ov.study_name = study_name_;
      if (cmd_->count("--seed")) ov.seed = seed_;
      ov.timeout = timeout_;
      ov.resume = resume_;
      ov.multivariate = multivariate_;
      if (!dataset_.empty()) ov.dataset = dataset_;
      if (!load_.empty()) ov.load = load_;
      if (!output_dir_.empty()) ov.output_dir = output_dir_;
      if (!model_.empty()) ov.model = model_;
      if (cmd_->count("--max-length")) ov.max_length = max_length_;
      if (cmd_->count("--limit")) ov.limit = limit_;
      if (!tensorboard_.empty()) ov.tensorboard = tensorboard_;
      run_search_config(config_, ov, json_);
      return;
    }
    qnum::detail::require(cmd_->count("--trials") > 0, "search: --trials is required with --objective");
    qnum::detail::require(trials_ >= 0, "search: --trials must be >= 0, got ", trials_);
    qnum::detail::require(!timeout_ || *timeout_ > 0, "search: --timeout must be > 0 seconds");
    qnum::detail::require(delay_ >= 0, "search: --trial-delay must be >= 0 seconds, got ", delay_);
    const auto objective = search::make_builtin_objective(objective_, dims_);
    search::SamplerOptions so;
    so.seed = seed_;
    so.grid = objective.grid;
    so.multivariate = multivariate_;
    so.offered = {"random", "grid", "tpe", "nsgaii"};
    so.where = "search";
    const auto sampler = search::make_sampler(sampler_, so);
    const auto grid = std::dynamic_pointer_cast<search::GridSampler>(sampler);
    const std::string name = study_name_.empty() ? objective_ + "-" + sampler_ : study_name_;
    auto storage = search::open_storage(storage_);
    if (!resume_)
      qnum::detail::require(!storage->find_study(name), "search: study '", name, "' already exists in ", storage->url(),
                            "; pass --resume to continue it, or choose another --study-name");
    search::Study study(storage, name, {search::StudyDirection::minimize}, sampler, nullptr,
                        resume_ ? search::OpenMode::create_or_load : search::OpenMode::create);
    study.set_user_attr("objective", objective.name);
    study.enable_heartbeat(heartbeat_, grace_);
    std::vector<std::int64_t> failed_stale;
    if (resume_) failed_stale = study.fail_stale_trials();
    const auto before = study.get_trials().size();
    if (grid && grid->free_grid_ids(study).empty()) {
      if (!json_) std::printf("grid of study '%s' is exhausted (no free point): no trial run\n", name.c_str());
    } else {
      const double delay = delay_;
      auto fn = objective.fn;
      study.optimize(
          [&](search::Trial& t) {
            const double v = fn(t);
            if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
            return v;
          },
          trials_, timeout_);
    }
    if (!tensorboard_.empty()) search::write_study_tensorboard(study, tensorboard_, {"value"});
    const auto trials = study.get_trials();
    std::map<std::string, int> states;
    for (const auto& t : trials) ++states[std::string(search::to_string(t.state))];
    std::optional<search::FrozenTrial> best;
    if (states["COMPLETE"] > 0) best = study.best_trial();
    if (json_) {
      nlohmann::json j{{"study", name},
                       {"storage", storage->url()},
                       {"objective", objective.name},
                       {"sampler", sampler->name()},
                       {"trials_run", trials.size() - before},
                       {"trials_total", trials.size()},
                       {"states", states},
                       {"failed_stale", failed_stale},
                       {"known_minimum", objective.known_minimum}};
      if (best) {
        j["best_value"] = best->values[0];
        j["best_number"] = best->number;
        j["best_params"] = search::params_json(*best);
      }
      std::cout << j.dump() << "\n";
      return;
    }
    std::printf("study %s in %s: %s with %s\n", name.c_str(), storage->url().c_str(), objective.description.c_str(),
                sampler->name().c_str());
    if (!failed_stale.empty()) std::printf("failed %zu stale trial(s) of dead workers\n", failed_stale.size());
    std::printf("trials run %zu, in study %zu (", trials.size() - before, trials.size());
    bool first = true;
    for (const auto& [s, n] : states) std::printf("%s%s %d", first ? "" : ", ", s.c_str(), n), first = false;
    std::printf(")\n");
    if (best)
      std::printf("best value %.10g (known minimum %.10g) at trial %lld: %s\n", best->values[0],
                  objective.known_minimum, static_cast<long long>(best->number),
                  search::params_text(*best).c_str());
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string config_, objective_, sampler_ = "random", storage_ = "memory", study_name_, dataset_, load_, output_dir_,
      model_, tensorboard_;
  std::int64_t max_length_ = 0, limit_ = 0;
  std::int64_t trials_ = 0;
  std::uint64_t seed_ = 0;
  std::size_t dims_ = 5;
  std::optional<double> timeout_, grace_;
  double heartbeat_ = 10, delay_ = 0;
  bool resume_ = false, json_ = false, multivariate_ = false;
};

}  // namespace qnum::cli
