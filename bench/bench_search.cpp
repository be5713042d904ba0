// Search benchmarks: TPE sampler overhead per trial at 1000 trials with 20 categorical
// parameters (bench/optuna_baseline.py measures Optuna's same setup), and TPE quality — mean
// best value over 20 seeds x 100 trials on Branin and Rastrigin-5D (the paired Optuna numbers
// come from the same script).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/objectives.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"

namespace {

using namespace qnum::search;

// 20 categorical parameters of 4 choices; the value rewards choice 1 everywhere.
double categorical_objective(Trial& t) {
  double v = 0;
  for (int i = 0; i < 20; ++i) {
    const std::int64_t c = t.suggest_categorical("p" + std::to_string(i), std::vector<std::int64_t>{0, 1, 2, 3});
    v += c == 1 ? 0.0 : 1.0 + 0.1 * double(i);
  }
  return v;
}

// Trials 1000, 1001, ... of a study whose first 1000 trials were TPE's random start-up
// (n_startup_trials = 1000, so the timed trials are the first TPE ones at n = 1000).
void BM_SearchTpeTrialAt1000_20Categorical(benchmark::State& state) {
  TPEOptions o;
  o.n_startup_trials = 1000;
  Study study(std::make_shared<InMemoryStorage>(), "bench", {StudyDirection::minimize},
              std::make_shared<TPESampler>(0, o));
  study.optimize(categorical_objective, 1000);
  for (auto _ : state) study.optimize(categorical_objective, 1);
  state.SetItemsProcessed(state.iterations());
  state.counters["best"] = study.best_value();
}
BENCHMARK(BM_SearchTpeTrialAt1000_20Categorical)->Unit(benchmark::kMillisecond)->Iterations(20);

// The same with multivariate TPE (one joint decision over the 20 parameters per trial): what
// Optuna >= 5.0's default TPESampler() does for single-objective studies.
void BM_SearchTpeMultivariateTrialAt1000_20Categorical(benchmark::State& state) {
  TPEOptions o;
  o.n_startup_trials = 1000;
  o.multivariate = true;
  Study study(std::make_shared<InMemoryStorage>(), "bench", {StudyDirection::minimize},
              std::make_shared<TPESampler>(0, o));
  study.optimize(categorical_objective, 1000);
  for (auto _ : state) study.optimize(categorical_objective, 1);
  state.SetItemsProcessed(state.iterations());
  state.counters["best"] = study.best_value();
}
BENCHMARK(BM_SearchTpeMultivariateTrialAt1000_20Categorical)->Unit(benchmark::kMillisecond)->Iterations(20);

// The sampler alone at the same point: 20 univariate TPE decisions (one trial) over a fixed
// history of 1000 trials, no storage or Study around it.
void BM_SearchTpeSamplerOnlyAt1000_20Categorical(benchmark::State& state) {
  NumpyRandomState rng(0);
  const Distribution d = CategoricalDistribution({std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}});
  std::vector<FrozenTrial> history(1000);
  for (std::size_t n = 0; n < history.size(); ++n) {
    FrozenTrial& t = history[n];
    t.number = std::int64_t(n);
    t.state = TrialState::complete;
    double v = 0;
    for (int i = 0; i < 20; ++i) {
      const double c = detail::optuna_random_internal(rng, d);
      t.params["p" + std::to_string(i)] = c;
      v += c == 1 ? 0.0 : 1.0 + 0.1 * i;
    }
    t.values = {v};
  }
  std::vector<const FrozenTrial*> view;
  for (const auto& t : history) view.push_back(&t);
  const TPEOptions o;
  for (auto _ : state)
    for (int i = 0; i < 20; ++i)
      benchmark::DoNotOptimize(tpe_sample(view, {{"p" + std::to_string(i), d}}, StudyDirection::minimize, o, rng));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SearchTpeSamplerOnlyAt1000_20Categorical)->Unit(benchmark::kMillisecond);

// Mean best value of default TPE over seeds 0..19, 100 trials each; arg 0 Branin, 1 Rastrigin-5D.
void BM_SearchTpeQuality(benchmark::State& state) {
  const BuiltinObjective obj =
      state.range(0) == 0 ? make_builtin_objective("branin") : make_builtin_objective("rastrigin", 5);
  double mean_best = 0;
  for (auto _ : state) {
    mean_best = 0;
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      Study study(std::make_shared<InMemoryStorage>(), "q", {StudyDirection::minimize},
                  std::make_shared<TPESampler>(seed));
      study.optimize(obj.fn, 100);
      mean_best += study.best_value() / 20;
    }
  }
  state.counters["mean_best"] = mean_best;
  state.SetLabel(state.range(0) == 0 ? "branin" : "rastrigin5");
}
BENCHMARK(BM_SearchTpeQuality)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
