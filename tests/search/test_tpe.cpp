// TPESampler beyond the recorded decisions: Optuna's truncated-normal helpers on their own
// (erf's polynomial path, log_ndtr's tails, ppf, ndtri_exp), a seeded qnum Study with pruning
// repeating a seeded Optuna study through Study/Trial, and bad options named in errors.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"
#include "search/helpers.hpp"

// The objective below must round as Python's does: no fused multiply-adds.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

using namespace qnum::search;
using qnum_search_test::kTpeFixtures;
using nlohmann::json;
using qnum_search_test::error_of;


json load(const std::string& name) {
  std::ifstream in(kTpeFixtures / name);
  REQUIRE_MESSAGE(in.good(), "cannot open ", (kTpeFixtures / name).string());
  return json::parse(in);
}

bool close(double a, double b, double rel) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= rel * std::max(1.0, std::fabs(b));
}

// make_tpe_fixtures.py's objective for the "mixed" space (+ - * only).
double mixed_value(Trial& t) {
  double v = 0.0;
  const double x = t.suggest_float("x", -5.0, 5.0);
  v += (x - 0.7) * (x - 0.7);
  const double lr = t.suggest_float("lr", 1e-5, 1e-1, std::nullopt, true);
  v += (lr - 0.003) * (lr - 0.003) * 1000.0;
  const double n = double(t.suggest_int("n", -10, 10));
  v += (n - 0.7) * (n - 0.7);
  const double k = double(t.suggest_int("k", 0, 100, 5, false));
  v += (k - 0.7) * (k - 0.7);
  const std::string c = t.suggest_categorical("c", std::vector<std::string>{"a", "b", "c", "d", "e"});
  v += c == "a" ? 3.0 : c == "b" ? 1.0 : c == "c" ? 0.0 : c == "d" ? 2.0 : 4.0;
  const std::int64_t w = t.suggest_categorical("w", std::vector<std::int64_t>{1, 2, 4, 8});
  v += w == 1 ? 1.5 : w == 2 ? 0.5 : w == 4 ? 0.0 : 2.5;
  const double p = t.suggest_float("p", 0.0, 1.0, 0.1, false);
  v += (p - 0.7) * (p - 0.7);
  const double units = double(t.suggest_int("units", 1, 1024, 1, true));
  v += (units - 100) * (units - 100) / 10000.0;
  return v;
}

}  // namespace

TEST_CASE("tpe: Optuna's truncated-normal helpers") {
  namespace tn = qnum::search::detail::truncnorm;
  const json doc = load("numerics.json");
  SUBCASE("erf over 2000+ elements takes Optuna's polynomial path") {
    const double start = doc["erf_linspace"][0], stop = doc["erf_linspace"][1];
    const int num = doc["erf_linspace"][2];
    std::vector<double> x(static_cast<std::size_t>(num));
    const double step = (stop - start) / (num - 1);
    for (int i = 0; i < num; ++i) x[std::size_t(i)] = double(i) * step + start;
    x.back() = stop;
    tn::erf_inplace(x);
    const auto want = doc["erf_every_5th"].get<std::vector<double>>();
    int bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) bad += !close(x[i * 5], want[i], 1e-15);
    CHECK(bad == 0);
  }
  SUBCASE("log_ndtr in both tails and the middle") {
    const auto a = doc["log_ndtr_a"].get<std::vector<double>>();
    const auto want = doc["log_ndtr"].get<std::vector<double>>();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(close(tn::log_ndtr(a[i]), want[i], 1e-15), "a=", a[i]);
  }
  SUBCASE("log_gauss_mass, ppf and ndtri_exp") {
    const auto q = doc["ppf_q"].get<std::vector<double>>(), a = doc["ppf_a"].get<std::vector<double>>(),
               b = doc["ppf_b"].get<std::vector<double>>();
    const auto mass = tn::log_gauss_mass(a, b), ppf = tn::ppf(q, a, b);
    const auto want_mass = doc["log_gauss_mass"].get<std::vector<double>>(),
               want_ppf = doc["ppf"].get<std::vector<double>>();
    int bad_mass = 0, bad_ppf = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      bad_mass += !close(mass[i], want_mass[i], 1e-13);
      bad_ppf += !close(ppf[i], want_ppf[i], 1e-12);
    }
    CHECK(bad_mass == 0);
    CHECK(bad_ppf == 0);
    const auto y = doc["ndtri_exp_y"].get<std::vector<double>>();
    const auto x = tn::ndtri_exp(y), want = doc["ndtri_exp"].get<std::vector<double>>();
    int bad = 0;
    for (std::size_t i = 0; i < y.size(); ++i) bad += !close(x[i], want[i], 1e-12);
    CHECK(bad == 0);
  }
}

TEST_CASE("tpe: a seeded qnum Study with pruning repeats the seeded Optuna study") {
  const json doc = load("mixed_min_60_pruned.json");
  REQUIRE(doc["seed"] == 9);
  auto storage = std::make_shared<InMemoryStorage>();
  Study study(storage, "tpe-mixed", {StudyDirection::minimize}, std::make_shared<TPESampler>(9));
  study.optimize(
      [](Trial& t) {
        const double v = mixed_value(t);
        if (t.number() % 5 == 4) {
          for (std::int64_t step = 0; step < t.number() % 3 + 1; ++step) t.report(v + 1.0 / double(step + 1), step);
          throw TrialPruned();
        }
        return v;
      },
      60);
  const auto trials = study.trials();
  REQUIRE(trials.size() == doc["trials"].size());
  int mismatches = 0;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const json& want = doc["trials"][i];
    CHECK(std::string(to_string(trials[i].state)) == want["state"].get<std::string>());
    for (const auto& [name, value] : want["params"].items()) {
      const ParamValue got = trials[i].param(name);
      const ParamValue exp = param_value_from_json(value);
      const bool same = std::holds_alternative<double>(exp) ? close(std::get<double>(got), std::get<double>(exp), 1e-12)
                                                            : choice_equal(got, exp);
      if (!same && ++mismatches <= 3)
        MESSAGE("trial ", i, " ", name, ": qnum ", to_string(got), " optuna ", to_string(exp));
    }
  }
  CHECK(mismatches == 0);
  CHECK(study.best_value() == doc["trials"][std::size_t(study.best_trial().number)]["value"].get<double>());
}

TEST_CASE("tpe: bad options are named; multi-objective studies run") {
  auto err_opts = [](auto set) {
    TPEOptions o;
    set(o);
    return error_of([&] { TPESampler s(0, o); });
  };
  CHECK(err_opts([](TPEOptions& o) { o.n_startup_trials = -1; }).find("n_startup_trials must be >= 0, got -1") !=
        std::string::npos);
  CHECK(err_opts([](TPEOptions& o) { o.n_ei_candidates = 0; }).find("n_ei_candidates") != std::string::npos);
  CHECK(err_opts([](TPEOptions& o) { o.prior_weight = -1; }).find("prior_weight") != std::string::npos);
  CHECK(err_opts([](TPEOptions& o) { o.prior_weight = NAN; }).find("prior_weight") != std::string::npos);
  CHECK(err_opts([](TPEOptions& o) { o.gamma = nullptr; }).find("gamma") != std::string::npos);
  CHECK(error_of([] { TPESampler s(std::uint64_t{1} << 32); }).find("seed 4294967296 out of range") !=
        std::string::npos);

  auto run = [](TPEOptions o, int n) {
    Study study(std::make_shared<InMemoryStorage>(), "s", {StudyDirection::minimize},
                std::make_shared<TPESampler>(1, std::move(o)));
    study.optimize([](Trial& t) { return t.suggest_float("x", 0.0, 1.0); }, n);
    return study.trials();
  };
  TPEOptions neg_gamma;
  neg_gamma.n_startup_trials = 2;
  neg_gamma.gamma = [](std::int64_t) { return std::int64_t{-1}; };
  // A failing sampler fails the trial (Study records FAIL with the reason).
  const auto s1 = run(neg_gamma, 3);
  const auto t = s1.back();
  CHECK(t.state == TrialState::fail);
  CHECK(t.system_attrs.value("fail_reason", std::string()).find("gamma(2) returned -1") != std::string::npos);

  TPEOptions neg_weights;
  neg_weights.n_startup_trials = 2;
  neg_weights.weights = [](std::size_t n) { return std::vector<double>(n, -1.0); };
  const auto s2 = run(neg_weights, 3);
  CHECK(s2.back().system_attrs.value("fail_reason", std::string()).find("negative value") != std::string::npos);

  // Several objectives are Optuna's multi-objective TPE (test_motpe.cpp), past the start-up too.
  Study multi(std::make_shared<InMemoryStorage>(), "m", {StudyDirection::minimize, StudyDirection::minimize},
              std::make_shared<TPESampler>(1));
  multi.optimize([](Trial& tr) { return std::vector<double>{tr.suggest_float("x", 0.0, 1.0), 1.0}; }, 12);
  for (const auto& t : multi.trials()) CHECK(t.state == TrialState::complete);
}

TEST_CASE("tpe: defaults are Optuna 4.x's") {
  const TPEOptions o;
  CHECK(o.n_startup_trials == 10);
  CHECK(o.n_ei_candidates == 24);
  CHECK(o.prior_weight == 1.0);
  CHECK(o.consider_magic_clip);
  CHECK_FALSE(o.consider_endpoints);
  CHECK_FALSE(o.multivariate);
  CHECK_FALSE(o.constant_liar);
  CHECK(o.gamma(1) == 1);
  CHECK(o.gamma(10) == 1);
  CHECK(o.gamma(11) == 2);
  CHECK(o.gamma(300) == 25);
  const auto w = tpe_default_weights(30);
  CHECK(w.size() == 30);
  CHECK(w[0] == doctest::Approx(1.0 / 30));
  CHECK(w[4] == 1.0);
  CHECK(w[29] == 1.0);
}
