// `qnum study show --storage URL --study-name NAME [--csv FILE] [--plot FILE.svg] [--json]`
// prints a study's trials and best trial (any study in Optuna's database layout, written by
// qnum or by Optuna) and writes its best-so-far curve as SVG; without --study-name it lists
// the storage's studies.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/study_report.hpp"

namespace qnum::cli {

/// The `study show` subcommand.
class StudyCommand {
 public:
  explicit StudyCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("study", "Inspect stored studies");
    cmd_->require_subcommand(1);
    show_ = cmd_->add_subcommand("show", "Print a study's trials and best trial; write its best-so-far plot");
    show_
        ->add_option("--storage", storage_,
                     "sqlite:///relative.db, sqlite:////absolute.db or postgresql://user:pass@host:port/db")
        ->required();
    show_->add_option("--study-name", name_, "study name (omit to list the studies)");
    show_->add_option("--csv", csv_, "also write the trials table as CSV");
    show_->add_option("--plot", plot_, "write the best-so-far curve as SVG");
    show_->add_flag("--json", json_, "print one JSON object");
  }
  StudyCommand(const StudyCommand&) = delete;
  StudyCommand& operator=(const StudyCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    auto storage = search::open_storage(storage_, false);
    const auto studies = storage->get_all_studies();
    std::string names;
    for (const auto& s : studies) names += (names.empty() ? "" : ", ") + s.name;
    if (name_.empty()) {
      if (json_) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& s : studies) j.push_back(s.name);
        std::cout << nlohmann::json{{"storage", storage->url()}, {"studies", j}}.dump() << "\n";
      } else {
        std::printf("studies in %s: %s\n", storage->url().c_str(), names.empty() ? "(none)" : names.c_str());
      }
      return;
    }
    qnum::detail::require(storage->find_study(name_).has_value(), "study '", name_, "' not found in ", storage->url(),
                          " (studies: ", names.empty() ? "none" : names, ")");
    auto study = search::Study::load(storage, name_);
    const auto table = study.trials_table();
    if (!csv_.empty()) write_file_atomic(csv_, table.to_csv());
    const bool single = study.directions().size() == 1;
    if (!plot_.empty()) {
      qnum::detail::require(single, "study show: --plot draws single-objective studies only");
      search::write_best_so_far_svg(
          study, plot_, "study " + name_,
          std::string("objective (") +
              (study.direction() == search::StudyDirection::maximize ? "maximize" : "minimize") + ")");
    }
    std::vector<search::FrozenTrial> bests = single ? std::vector<search::FrozenTrial>{} : study.best_trials();
    std::optional<search::FrozenTrial> best;
    if (single && !study.get_trials({search::TrialState::complete}).empty()) best = study.best_trial();
    if (json_) {
      nlohmann::json j{{"study", name_}, {"storage", storage->url()}, {"directions", nlohmann::json::array()}};
      for (const auto d : study.directions()) j["directions"].push_back(std::string(search::to_string(d)));
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& r : table.rows) {
        nlohmann::json row = nlohmann::json::object();
        for (std::size_t i = 0; i < r.size(); ++i) row[table.columns[i]] = r[i];
        rows.push_back(row);
      }
      j["trials"] = rows;
      if (best)
        j["best_trial"] = {
            {"number", best->number}, {"value", best->values[0]}, {"params", search::params_json(*best)}};
      if (!single) {
        j["best_trials"] = nlohmann::json::array();
        for (const auto& t : bests)
          j["best_trials"].push_back(
              {{"number", t.number}, {"values", t.values}, {"params", search::params_json(t)}});
      }
      std::cout << j.dump() << "\n";
      return;
    }
    std::printf("study %s in %s, direction(s) %s, %zu trial(s)\n\n", name_.c_str(), storage->url().c_str(),
                search::Study::directions_text(study.directions()).c_str(), table.rows.size());
    std::cout << table.to_text() << "\n";
    if (best)
      std::printf("best trial %lld: value %.10g, %s\n", static_cast<long long>(best->number), best->values[0],
                  search::params_text(*best).c_str());
    else if (single)
      std::printf("no completed trial yet\n");
    for (const auto& t : bests) {
      std::string v;
      for (const double x : t.values) v += (v.empty() ? "" : ", ") + search::python_float_repr(x);
      std::printf("pareto trial %lld: values (%s), %s\n", static_cast<long long>(t.number), v.c_str(),
                  search::params_text(t).c_str());
    }
    if (!plot_.empty()) std::printf("plot written to %s\n", plot_.c_str());
    if (!csv_.empty()) std::printf("table written to %s\n", csv_.c_str());
  }

 private:
  CLI::App* cmd_ = nullptr;
  CLI::App* show_ = nullptr;
  std::string storage_, name_, csv_, plot_;
  bool json_ = false;
};

}  // namespace qnum::cli
