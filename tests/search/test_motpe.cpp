// Optuna 4.x's multi-objective TPE in qnum (qnum/search/multi_objective.hpp, tpe.hpp) against
// fixtures/motpe.json (make_motpe_fixture.py): non-domination ranks, the below split with its
// hypervolume tie-break, the hypervolume weights of below trials, reference points and
// hypervolumes on loss sets with ties and duplicates; and seeded two- and three-objective TPE
// studies whose every draw a seeded qnum TPE repeats.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/search/multi_objective.hpp"
#include "qnum/search/tpe.hpp"

namespace {

using namespace qnum::search;
using nlohmann::json;

json fixture() {
  const auto path = std::filesystem::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "search" / "motpe.json";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  return json::parse(in);
}

mo::Points points_of(const json& j) { return j.get<mo::Points>(); }

/// The fixture's space (make_motpe_fixture.py), in suggest order.
std::vector<std::pair<std::string, Distribution>> space() {
  return {{"c", CategoricalDistribution({"integer", "minifloat", "log", "block_fp"})},
          {"w", CategoricalDistribution({std::int64_t{2}, std::int64_t{4}, std::int64_t{8}, std::int64_t{16}})},
          {"n", IntDistribution(0, 10)},
          {"x", FloatDistribution(-2.0, 2.0)}};
}

// Floats within 1e-12 relative (numpy's vectorised math differs from libm in the last bits);
// integers and categorical indices exactly.
bool motpe_same_value(const Distribution& d, double a, double b) {
  if (!std::holds_alternative<FloatDistribution>(d)) return a == b;
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

}  // namespace

TEST_CASE("motpe: ranks, below split, weights, reference point and hypervolume equal Optuna's") {
  const json doc = fixture();
  REQUIRE(doc["sets"].size() == 5);
  for (const auto& set : doc["sets"]) {
    const mo::Points loss = points_of(set["loss"]);
    CAPTURE(loss.size());
    CAPTURE(loss[0].size());
    const mo::Point ref = mo::reference_point(loss);
    CHECK(ref == set["reference_point"].get<mo::Point>());
    CHECK(mo::hypervolume(loss, ref) == doctest::Approx(set["hypervolume"].get<double>()).epsilon(1e-12));
    for (const auto& s : set["splits"]) {
      const auto n_below = s["n_below"].get<std::size_t>();
      CAPTURE(n_below);
      CHECK(mo::nondomination_ranks(loss, n_below) == s["ranks"].get<std::vector<int>>());
      const std::vector<bool> below = mo::split_below(loss, n_below);
      std::vector<std::size_t> at;
      mo::Points below_loss;
      for (std::size_t i = 0; i < below.size(); ++i)
        if (below[i]) at.push_back(i), below_loss.push_back(loss[i]);
      CHECK(at == s["below"].get<std::vector<std::size_t>>());
      const auto want = s["weights"].get<std::vector<double>>();
      const auto got = mo::weights_below(below_loss);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
    }
  }
}

TEST_CASE("motpe: hypervolume and HSSP by hand") {
  // A staircase of three points up to (4, 4): strips of 3, 2 and 1.
  const mo::Points front{{1, 3}, {2, 2}, {3, 1}};
  CHECK(mo::hypervolume(front, {4, 4}) == 6.0);
  // A dominated point adds nothing; the 3-D cube of one point is its box.
  CHECK(mo::hypervolume({{1, 3}, {2, 2}, {3, 1}, {3, 3}}, {4, 4}) == 6.0);
  CHECK(mo::hypervolume({{1, 1, 1}}, {2, 3, 4}) == 6.0);
  CHECK(mo::hypervolume({{1, 1, 2}, {1, 2, 1}}, {2, 3, 3}) == doctest::Approx(2.0 + 2.0 - 1.0));
  // The middle point alone covers the most (4 of 6): HSSP's first pick.
  CHECK(mo::solve_hssp(front, {10, 11, 12}, 1, {4, 4}) == std::vector<std::size_t>{11});
  CHECK(std::isinf(mo::hypervolume(front, {4, INFINITY})));
}

TEST_CASE("motpe: a seeded multi-objective TPE study repeats Optuna's trial for trial") {
  // Each trial's params drawn from the recorded history (as tpe_fixtures: values as Optuna
  // computed them), the draws from numpy RandomState twins seeded as Optuna's TPESampler.
  const json doc = fixture();
  const auto sp = space();
  for (const auto& rec : doc["studies"]) {
    std::vector<StudyDirection> directions;
    for (const auto& d : rec["directions"]) directions.push_back(parse_direction(d.get<std::string>()));
    CAPTURE(directions.size());
    TPEOptions o;
    o.n_startup_trials = rec["n_startup_trials"];
    const auto seed = rec["seed"].get<std::uint32_t>();
    NumpyRandomState tpe_rng(seed), startup_rng(seed);
    std::vector<FrozenTrial> done;
    int mismatches = 0;
    for (const auto& want : rec["trials"]) {
      std::vector<const FrozenTrial*> hist;
      for (const auto& t : done) hist.push_back(&t);
      FrozenTrial t;
      t.number = static_cast<std::int64_t>(done.size());
      t.state = TrialState::complete;
      t.values = want["values"].get<std::vector<double>>();
      for (const auto& [name, d] : sp) {
        const double got = static_cast<std::int64_t>(hist.size()) < o.n_startup_trials
                               ? qnum::search::detail::optuna_random_internal(startup_rng, d)
                               : tpe_sample(hist, {{name, d}}, directions, o, tpe_rng).picked.at(name);
        const double optuna = to_internal(d, param_value_from_json(want["params"][name]));
        if (!motpe_same_value(d, got, optuna) && ++mismatches <= 3)
          MESSAGE("trial ", t.number, " ", name, ": qnum ", got, " optuna ", optuna);
        t.params[name] = optuna;
        t.distributions.insert_or_assign(name, d);
      }
      done.push_back(std::move(t));
    }
    CHECK(done.size() == rec["trials"].size());
    CHECK(mismatches == 0);
  }
}
