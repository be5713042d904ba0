// Study, Trial, RandomSampler, GridSampler and MedianPruner on the in-memory storage.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/median_pruner.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/study.hpp"
#include "search/helpers.hpp"

using namespace qnum::search;
using qnum_search_test::error_of;

namespace {

double mixed_objective(Trial& t) {
  const double x = t.suggest_float("x", -2.0, 2.0);
  const double lr = t.suggest_float("lr", 1e-4, 1e-1, std::nullopt, true);
  const double q = t.suggest_float("q", 0.0, 1.0, 0.25);
  const auto n = t.suggest_int("n", 1, 9, 2);
  const auto w = t.suggest_int("w", 1, 64, 1, true);
  const auto c = t.suggest_categorical("c", std::vector<std::string>{"a", "b", "c"});
  return x * x + std::log10(lr) * 0.01 + q + double(n) + double(w) * 1e-3 + (c == "b" ? 0.5 : 0.0);
}

std::vector<FrozenTrial> run_random(std::uint64_t seed, int n) {
  auto storage = std::make_shared<InMemoryStorage>();
  Study s(storage, "r", {StudyDirection::minimize}, std::make_shared<RandomSampler>(seed));
  s.optimize(mixed_objective, n);
  return s.trials();
}

}  // namespace

TEST_CASE("search.random: values lie in their distributions and repeat for a seed") {
  const auto a = run_random(7, 40), b = run_random(7, 40), c = run_random(8, 40);
  REQUIRE(a.size() == 40);
  bool differs = false;
  std::set<std::string> cats;
  std::set<std::int64_t> ns;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].state == TrialState::complete);
    CHECK(a[i].params == b[i].params);
    CHECK(a[i].values == b[i].values);
    differs |= a[i].params != c[i].params;
    for (const auto& [name, v] : a[i].params) CHECK_MESSAGE(contains(a[i].distributions.at(name), v), name, " ", v);
    CHECK(std::fmod(a[i].params.at("q"), 0.25) == 0.0);
    cats.insert(std::get<std::string>(a[i].param("c")));
    ns.insert(std::get<std::int64_t>(a[i].param("n")));
  }
  CHECK(differs);
  CHECK(cats.size() == 3);
  CHECK(ns == std::set<std::int64_t>{1, 3, 5, 7, 9});  // 40 draws over 5 values, seed 7
}

TEST_CASE("search.study: failures are recorded and the search goes on") {
  auto storage = std::make_shared<InMemoryStorage>();
  Study s(storage, "f", {StudyDirection::maximize}, std::make_shared<RandomSampler>(1));
  int calls = 0;
  s.optimize(
      [&](Trial& t) -> double {
        const auto k = calls++;
        const double x = t.suggest_float("x", 0.0, 1.0);
        if (k == 1) throw std::runtime_error("boom at trial 1");
        if (k == 2) return std::nan("");
        if (k == 3) t.suggest_categorical("bad", std::vector<CategoricalChoice>{});
        if (k == 4) throw TrialPruned();
        t.set_user_attr("k", k);
        return x;
      },
      6);
  const auto trials = s.trials();
  REQUIRE(trials.size() == 6);
  CHECK(trials[0].state == TrialState::complete);
  CHECK(trials[1].state == TrialState::fail);
  CHECK(trials[1].system_attrs["fail_reason"] == "boom at trial 1");
  CHECK(trials[1].params.count("x") == 1);  // drawn before the failure, kept
  CHECK(trials[2].state == TrialState::fail);
  CHECK(trials[2].system_attrs["fail_reason"].get<std::string>().find("nan") != std::string::npos);
  CHECK(trials[3].state == TrialState::fail);
  CHECK(trials[3].system_attrs["fail_reason"].get<std::string>().find("parameter 'bad'") != std::string::npos);
  CHECK(trials[3].system_attrs["fail_reason"].get<std::string>().find("one or more elements") != std::string::npos);
  CHECK(trials[4].state == TrialState::pruned);
  CHECK(trials[5].state == TrialState::complete);
  CHECK(trials[5].user_attrs["k"] == 5);
  const auto best = s.best_trial();
  CHECK(best.values[0] == std::max(trials[0].values[0], trials[5].values[0]));
  CHECK(s.best_value() == best.values[0]);
  const auto table = s.trials_table();
  CHECK(table.rows.size() == 6);
  CHECK(table.to_csv().find("system_attrs_fail_reason") != std::string::npos);
  CHECK(table.to_csv().find("boom at trial 1") != std::string::npos);
}

TEST_CASE("search.study: directions of an existing study must match; nothing changes") {
  auto storage = std::make_shared<InMemoryStorage>();
  {
    Study s(storage, "d", {StudyDirection::minimize});
    s.optimize([](Trial& t) { return t.suggest_float("x", 0, 1); }, 2);
  }
  const auto msg = error_of([&] { Study s(storage, "d", {StudyDirection::maximize}); });
  CHECK(msg.find("study 'd' exists in memory with direction(s) minimize, not maximize") != std::string::npos);
  CHECK(error_of([&] {
          Study s(storage, "d", {StudyDirection::minimize}, nullptr, nullptr, OpenMode::create);
        }).find("already exists") != std::string::npos);
  CHECK(error_of([&] { Study::load(storage, "nope"); }).find("study 'nope' not found in memory") != std::string::npos);
  CHECK(storage->get_all_studies().size() == 1);
  CHECK(storage->get_all_trials(0, {}).size() == 2);
  auto again = Study::load(storage, "d");
  CHECK(again.direction() == StudyDirection::minimize);
  CHECK(error_of([&] { again.best_trials(); }).empty());
}

TEST_CASE("search.study: enqueued parameters are used, and parameters keep their kind") {
  auto storage = std::make_shared<InMemoryStorage>();
  Study s(storage, "e", {StudyDirection::minimize});
  s.enqueue_trial({{"x", 0.5}, {"c", std::string("b")}});
  s.optimize(
      [](Trial& t) {
        const double x = t.suggest_float("x", 0, 1);
        const auto c = t.suggest_categorical("c", std::vector<std::string>{"a", "b"});
        return x + (c == "b" ? 1.0 : 0.0);
      },
      2);
  const auto trials = s.trials();
  REQUIRE(trials.size() == 2);
  CHECK(trials[0].values[0] == 1.5);
  CHECK(trials[0].system_attrs.contains("fixed_params"));
  s.optimize([](Trial& t) { return double(t.suggest_int("x", 0, 3)); }, 1);
  const auto last = s.trials().back();
  CHECK(last.state == TrialState::fail);
  CHECK(last.system_attrs["fail_reason"].get<std::string>().find(
            "cannot set a IntDistribution where a FloatDistribution") != std::string::npos);
}

TEST_CASE("search.study: multi-objective Pareto front") {
  auto storage = std::make_shared<InMemoryStorage>();
  Study s(storage, "mo", {StudyDirection::minimize, StudyDirection::maximize});
  const std::vector<std::vector<double>> points = {{1, 1}, {2, 3}, {2, 2}, {3, 3}, {0.5, 0.5}, {1, 1}};
  std::size_t i = 0;
  s.optimize(
      [&](Trial& t) {
        t.suggest_int("i", 0, 100);
        return points[i++];
      },
      6);
  std::set<std::int64_t> front;
  for (const auto& t : s.best_trials()) front.insert(t.number);
  CHECK(front == std::set<std::int64_t>{0, 1, 4, 5});
  CHECK(error_of([&] { s.best_trial(); }).find("2 objectives") != std::string::npos);
  s.optimize([](Trial&) { return std::vector<double>{1.0}; }, 1);
  CHECK(s.trials().back().state == TrialState::fail);
  CHECK(s.trials().back().system_attrs["fail_reason"].get<std::string>().find("returned 1 value(s); the study has 2") !=
        std::string::npos);
}

TEST_CASE("search.grid: every point exactly once, then the study stops") {
  auto storage = std::make_shared<InMemoryStorage>();
  const GridSpace space{{"a", {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}},
                        {"b", {std::string("x"), std::string("y")}},
                        {"c", {0.5, 1.5}}};
  auto grid = std::make_shared<GridSampler>(space);
  Study s(storage, "g", {StudyDirection::minimize}, grid);
  auto objective = [](Trial& t) {
    const auto a = t.suggest_int("a", 1, 3);
    const auto b = t.suggest_categorical("b", std::vector<std::string>{"x", "y"});
    const auto c = t.suggest_float("c", 0.0, 2.0);
    return double(a) + (b == "y" ? 10.0 : 0.0) + c;
  };
  s.optimize(objective, 100);
  const auto trials = s.trials();
  CHECK(trials.size() == 12);  // stopped when exhausted
  std::set<std::string> seen;
  for (const auto& t : trials) {
    CHECK(t.system_attrs["grid_id"] == t.number);
    seen.insert(std::to_string(t.params.at("a")) + std::to_string(t.params.at("b")) + std::to_string(t.params.at("c")));
  }
  CHECK(seen.size() == 12);
  CHECK(grid->is_exhausted(s));
}

TEST_CASE("search.grid: the order is Optuna's (numpy RandomState shuffle)") {
  // optuna.samplers.GridSampler({"a": [0..4], "b": ["x", "y"]}, seed=s)._all_grids, Optuna 5.0.0.
  const GridSpace space{{"a", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4}}},
                        {"b", {std::string("x"), std::string("y")}}};
  auto order = [&](std::uint32_t seed) {
    GridSampler g(space, seed);
    std::string s;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto p = g.point(static_cast<std::int64_t>(i));
      s += std::to_string(std::get<std::int64_t>(p.at("a"))) + std::get<std::string>(p.at("b")) + " ";
    }
    return s;
  };
  CHECK(order(0) == "1x 4x 2x 4y 0y 3x 3y 1y 0x 2y ");
  CHECK(order(42) == "4x 0y 2y 0x 3y 1x 4y 2x 1y 3x ");
}

TEST_CASE("search.grid: bad grids are named") {
  CHECK(error_of([] { GridSampler g(GridSpace{}); }).find("search space is empty") != std::string::npos);
  CHECK(error_of([] { GridSampler g(GridSpace{{"a", {}}}); }).find("parameter 'a' has no values") != std::string::npos);
}

TEST_CASE("search.pruner: MedianPruner follows Optuna's rule") {
  auto storage = std::make_shared<InMemoryStorage>();
  Study s(storage, "p", {StudyDirection::minimize}, std::make_shared<RandomSampler>(0),
          std::make_shared<MedianPruner>(2, 1, 1));
  // Two complete trials reporting 1.0 and 3.0 at steps 0..2 (median 2.0).
  for (double level : {1.0, 3.0}) {
    s.optimize(
        [&](Trial& t) {
          for (int step = 0; step < 3; ++step) {
            t.report(level, step);
            CHECK(!t.should_prune());  // fewer than n_startup_trials complete
          }
          return level;
        },
        1);
  }
  std::vector<bool> decisions;
  s.optimize(
      [&](Trial& t) -> double {
        for (int step = 0; step < 3; ++step) {
          t.report(2.5, step);
          decisions.push_back(t.should_prune());
          if (decisions.back()) throw TrialPruned();
        }
        return 2.5;
      },
      1);
  // Step 0 is warm-up; at step 1 the best value 2.5 > median 2.0: pruned.
  CHECK(decisions == std::vector<bool>{false, true});
  const auto last = s.trials().back();
  CHECK(last.state == TrialState::pruned);
  CHECK(last.values == std::vector<double>{2.5});  // Optuna keeps the last intermediate value
  // A better trial is not pruned.
  decisions.clear();
  s.optimize(
      [&](Trial& t) -> double {
        for (int step = 0; step < 3; ++step) {
          t.report(1.5, step);
          decisions.push_back(t.should_prune());
        }
        return 1.5;
      },
      1);
  CHECK(decisions == std::vector<bool>{false, false, false});
  CHECK(error_of([] { MedianPruner(-1); }).find("n_startup_trials cannot be negative") != std::string::npos);
}

namespace {

/// An in-memory storage whose writes of a trial's system attributes can fail: as a dead
/// database would (`broken`), or after another worker finished the trial (`race`).
class FlakyStorage final : public Storage {
 public:
  std::shared_ptr<InMemoryStorage> s = std::make_shared<InMemoryStorage>();
  bool broken = false, race = false;

  std::int64_t create_new_study(const std::vector<StudyDirection>& d, const std::string& n) override {
    return s->create_new_study(d, n);
  }
  std::optional<StudyInfo> find_study(const std::string& n) override { return s->find_study(n); }
  StudyInfo get_study(std::int64_t id) override { return s->get_study(id); }
  std::vector<StudyInfo> get_all_studies() override { return s->get_all_studies(); }
  void set_study_user_attr(std::int64_t id, const std::string& k, const nlohmann::json& v) override {
    s->set_study_user_attr(id, k, v);
  }
  void set_study_system_attr(std::int64_t id, const std::string& k, const nlohmann::json& v) override {
    s->set_study_system_attr(id, k, v);
  }
  nlohmann::json get_study_user_attrs(std::int64_t id) override { return s->get_study_user_attrs(id); }
  nlohmann::json get_study_system_attrs(std::int64_t id) override { return s->get_study_system_attrs(id); }
  std::int64_t create_new_trial(std::int64_t id, const FrozenTrial* t, bool hb) override {
    return s->create_new_trial(id, t, hb);
  }
  void set_trial_param(std::int64_t id, const std::string& n, double v, const Distribution& d) override {
    s->set_trial_param(id, n, v, d);
  }
  void set_trial_intermediate_value(std::int64_t id, std::int64_t step, double v) override {
    s->set_trial_intermediate_value(id, step, v);
  }
  bool set_trial_state_values(std::int64_t id, TrialState st, const std::vector<double>& v, bool hb) override {
    return s->set_trial_state_values(id, st, v, hb);
  }
  void set_trial_user_attr(std::int64_t id, const std::string& k, const nlohmann::json& v) override {
    s->set_trial_user_attr(id, k, v);
  }
  void set_trial_system_attr(std::int64_t id, const std::string& k, const nlohmann::json& v) override {
    if (broken) qnum::detail::fail("storage: disk I/O error");
    if (race) {  // the owner finishes it first; writing to a finished trial is then an error
      s->set_trial_state_values(id, TrialState::complete, {1.0}, false);
      qnum::detail::fail("trial ", id, " is already finished");
    }
    s->set_trial_system_attr(id, k, v);
  }
  FrozenTrial get_trial(std::int64_t id) override { return s->get_trial(id); }
  std::vector<FrozenTrial> get_all_trials(std::int64_t id, const std::vector<TrialState>& st) override {
    return s->get_all_trials(id, st);
  }
  std::int64_t get_n_trials(std::int64_t id, const std::vector<TrialState>& st) override {
    return s->get_n_trials(id, st);
  }
  std::int64_t claim_grid_id(std::int64_t sid, std::int64_t tid, const nlohmann::json& sp, std::int64_t pref,
                             const std::vector<std::int64_t>& order) override {
    return s->claim_grid_id(sid, tid, sp, pref, order);
  }
  void record_heartbeat(std::int64_t id) override { s->record_heartbeat(id); }
  std::vector<std::int64_t> get_stale_trial_ids(std::int64_t id, double grace) override {
    return s->get_stale_trial_ids(id, grace);
  }
  std::string url() const override { return "flaky"; }
};

}  // namespace

TEST_CASE("search.study: failing stale trials hides a finished trial's race, never a storage error") {
  for (const bool race : {false, true}) {
    CAPTURE(race);
    auto storage = std::make_shared<FlakyStorage>();
    Study s(storage, "stale", {StudyDirection::minimize});
    s.enable_heartbeat(0.01, 0.0);
    const std::int64_t id = storage->create_new_trial(s.study_id(), nullptr, /*first_heartbeat=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(storage->get_stale_trial_ids(s.study_id(), 0.0) == std::vector<std::int64_t>{id});
    storage->race = race;
    storage->broken = !race;
    if (race) {  // another worker finished it: nothing to fail, no error
      CHECK(s.fail_stale_trials().empty());
      CHECK(storage->get_trial(id).state == TrialState::complete);
    } else {  // the storage failed: the error reaches the caller, the trial stays as it was
      CHECK(error_of([&] { s.fail_stale_trials(); }).find("disk I/O error") != std::string::npos);
      CHECK(storage->get_trial(id).state == TrialState::running);
    }
  }
}
