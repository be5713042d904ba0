// qnum's TPE against Optuna 4.x on recorded studies (tests/fixtures/search/tpe/*.json, made by
// make_tpe_fixtures.py): every recorded decision replayed from numpy's own draws must give
// Optuna's candidates, scores and pick; and a seeded qnum TPE (numpy RandomState twin) must
// repeat each whole seeded Optuna study, start-up trials included.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/helpers.hpp"
#include "qnum/search/tpe.hpp"

namespace {

using namespace qnum::search;
using qnum_search_test::kTpeFixtures;
using nlohmann::json;


json load(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), "cannot open ", p.string());
  return json::parse(in);
}

std::vector<std::filesystem::path> cases() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kTpeFixtures))
    if (e.path().extension() == ".json" && e.path().filename() != "random_state.json" &&
        e.path().filename() != "numerics.json" && e.path().filename().string().rfind("nsga2", 0) != 0)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

Distribution distribution_of(const json& p) {
  const std::string type = p["type"];
  if (type == "float") {
    std::optional<double> step;
    if (p.contains("step")) step = p["step"].get<double>();
    return FloatDistribution(p["low"].get<double>(), p["high"].get<double>(), p.value("log", false), step);
  }
  if (type == "int")
    return IntDistribution(p["low"].get<std::int64_t>(), p["high"].get<std::int64_t>(), p.value("log", false),
                           p.value("step", std::int64_t{1}));
  std::vector<CategoricalChoice> choices;
  for (const auto& c : p["choices"]) choices.push_back(param_value_from_json(c));
  return CategoricalDistribution(std::move(choices));
}

struct Case {
  json doc;
  std::vector<std::pair<std::string, Distribution>> space;  // in suggest order
  std::vector<FrozenTrial> trials;
  TPEOptions options;
  StudyDirection direction;
};

Case load_case(const std::filesystem::path& path) {
  Case c;
  c.doc = load(path);
  for (const auto& p : c.doc["space"]) c.space.emplace_back(p["name"].get<std::string>(), distribution_of(p));
  c.direction = parse_direction(c.doc["direction"].get<std::string>());
  const json& o = c.doc["options"];
  c.options.n_startup_trials = o["n_startup_trials"];
  c.options.n_ei_candidates = o["n_ei_candidates"];
  c.options.prior_weight = o["prior_weight"];
  c.options.consider_magic_clip = o["consider_magic_clip"];
  c.options.consider_endpoints = o["consider_endpoints"];
  c.options.multivariate = o["multivariate"];
  c.options.constant_liar = o["constant_liar"];
  for (const auto& t : c.doc["trials"]) {
    FrozenTrial f;
    f.number = t["number"];
    f.trial_id = f.number;
    f.state = parse_trial_state(t["state"].get<std::string>());
    if (!t["value"].is_null()) f.values = {t["value"].get<double>()};
    for (const auto& iv : t["intermediate"]) f.intermediate_values[iv[0].get<std::int64_t>()] = iv[1].get<double>();
    for (const auto& [name, d] : c.space)
      if (t["params"].contains(name)) {
        f.params[name] = to_internal(d, param_value_from_json(t["params"][name]));
        f.distributions.insert_or_assign(name, d);
      }
    c.trials.push_back(std::move(f));
  }
  return c;
}

// The trials a decision at trial `number` sees (Optuna's states for the options).
std::vector<const FrozenTrial*> history(const Case& c, std::int64_t number) {
  std::vector<const FrozenTrial*> out;
  for (const auto& t : c.trials) {
    if (t.number >= number) break;
    if (t.state == TrialState::complete || t.state == TrialState::pruned ||
        (c.options.constant_liar && t.state == TrialState::running))
      out.push_back(&t);
  }
  return out;
}

const Distribution& dist(const Case& c, const std::string& name) {
  for (const auto& [n, d] : c.space)
    if (n == name) return d;
  FAIL("no parameter ", name);
  throw;
}

bool is_float_param(const Distribution& d) { return std::holds_alternative<FloatDistribution>(d); }

// Floats within 1e-12 relative; integers and categorical indices exactly.
bool same_value(const Distribution& d, double a, double b) {
  if (!is_float_param(d)) return a == b;
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

}  // namespace

TEST_CASE("tpe: numpy RandomState twin gives numpy's random_sample stream") {
  const json doc = load(kTpeFixtures / "random_state.json");
  for (const auto& [seed, expected] : doc["every_100th_of_1300"].items()) {
    NumpyRandomState rs(static_cast<std::uint32_t>(std::stoull(seed)));
    std::vector<double> got;
    for (int i = 0; i < 1300; ++i) {
      const double v = rs.next_double();
      if (i % 100 == 0) got.push_back(v);
    }
    CHECK_MESSAGE(got == expected.get<std::vector<double>>(), "seed ", seed);
  }
}

TEST_CASE("tpe: every recorded Optuna decision replayed from numpy's draws") {
  int detailed = 0, picks = 0;
  double max_score_err = 0;
  std::size_t bit_exact = 0, n_scores = 0;
  for (const auto& path : cases()) {
    CAPTURE(path.filename().string());
    const Case c = load_case(path);
    for (const auto& d : c.doc["decisions"]) {
      if (!d.contains("draws")) continue;
      const std::int64_t number = d["trial"];
      CAPTURE(number);
      std::vector<std::pair<std::string, Distribution>> space;
      for (const auto& name : d["params"]) space.emplace_back(name.get<std::string>(), dist(c, name));
      ReplaySource src(d["draws"].get<std::vector<double>>());
      const TpeDecision got = tpe_sample(history(c, number), space, c.direction, c.options, src);
      CHECK(src.consumed() == d["draws"].size());
      const auto scores = d["scores"].get<std::vector<double>>();
      REQUIRE(got.scores.size() == scores.size());
      int bad_scores = 0, bad_candidates = 0;
      for (std::size_t i = 0; i < scores.size(); ++i) {
        if (!(std::fabs(got.scores[i] - scores[i]) <= 1e-9 * std::max(1.0, std::fabs(scores[i])))) ++bad_scores;
        if (std::isfinite(scores[i])) max_score_err = std::max(max_score_err, std::fabs(got.scores[i] - scores[i]));
        bit_exact += got.scores[i] == scores[i];
        ++n_scores;
        for (std::size_t j = 0; j < space.size(); ++j) {
          const double want = d["candidates"][space[j].first][i];
          if (!same_value(space[j].second, got.candidates[j][i], want)) ++bad_candidates;
        }
      }
      CHECK(bad_scores == 0);
      CHECK(bad_candidates == 0);
      for (const auto& [name, want] : d["picked"].items()) {
        CAPTURE(name);
        CHECK(same_value(dist(c, name), got.picked.at(name), want.get<double>()));
        ++picks;
      }
      ++detailed;
    }
  }
  CHECK(detailed >= 250);
  MESSAGE(detailed, " decisions, ", picks, " picked values compared; scores bit-identical: ", bit_exact, " of ",
          n_scores, ", largest score difference ", max_score_err);
}

TEST_CASE("tpe: a seeded qnum TPE repeats each seeded Optuna study") {
  for (const auto& path : cases()) {
    CAPTURE(path.filename().string());
    const Case c = load_case(path);
    const auto seed = c.doc["seed"].get<std::uint32_t>();
    NumpyRandomState tpe_rng(seed), startup_rng(seed);
    int mismatches = 0;
    for (const auto& trial : c.trials) {
      const std::vector<const FrozenTrial*> hist = history(c, trial.number);
      std::int64_t finished = 0;
      for (const FrozenTrial* t : hist) finished += t->state != TrialState::running;
      std::map<std::string, double> got;
      if (c.options.multivariate) {
        std::vector<FrozenTrial> seen;
        for (const FrozenTrial* t : hist) seen.push_back(*t);
        const SearchSpace rel = intersection_search_space(seen, true);
        if (!rel.empty() && finished >= c.options.n_startup_trials)
          got = tpe_sample(hist, {rel.begin(), rel.end()}, c.direction, c.options, tpe_rng).picked;
      }
      for (const auto& [name, d] : c.space) {
        if (got.count(name)) continue;
        if (finished < c.options.n_startup_trials)
          got[name] = qnum::search::detail::optuna_random_internal(startup_rng, d);
        else
          got[name] = tpe_sample(hist, {{name, d}}, c.direction, c.options, tpe_rng).picked.at(name);
      }
      for (const auto& [name, d] : c.space)
        if (!same_value(d, got.at(name), trial.params.at(name))) {
          if (++mismatches <= 3)
            MESSAGE("trial ", trial.number, " ", name, ": qnum ", got.at(name), " optuna ", trial.params.at(name));
        }
    }
    CHECK(mismatches == 0);
  }
}
