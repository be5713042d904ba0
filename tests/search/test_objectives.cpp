// Built-in objectives: their known optima, and grids inside their search spaces.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/objectives.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/study.hpp"
#include "search/helpers.hpp"

using namespace qnum::search;

TEST_CASE("search.objectives: known minima") {
  constexpr double pi = std::numbers::pi;
  for (const auto& [x0, x1] : {std::pair{-pi, 12.275}, std::pair{pi, 2.275}, std::pair{9.42478, 2.475}})
    CHECK(branin(x0, x1) == doctest::Approx(0.397887).epsilon(1e-6));
  CHECK(make_builtin_objective("branin").known_minimum == doctest::Approx(0.397887).epsilon(1e-6));
  CHECK(rastrigin({0, 0, 0, 0, 0}) == 0.0);
  CHECK(rastrigin({1, 0}) == doctest::Approx(1.0));
  CHECK(make_builtin_objective("rastrigin", 3).dims == 3);
  CHECK(qnum_search_test::error_of([] {
          make_builtin_objective("ackley");
        }).find("unknown objective 'ackley' (allowed: branin, rastrigin, mixed-precision)") != std::string::npos);
}

TEST_CASE("search.objectives: a grid search reaches each grid's best point; mixed precision's is the optimum") {
  for (const char* name : {"branin", "mixed-precision"}) {
    const auto o = make_builtin_objective(name);
    auto grid = std::make_shared<GridSampler>(o.grid);
    Study s(std::make_shared<InMemoryStorage>(), name, {StudyDirection::minimize}, grid);
    s.optimize(o.fn, 10000);
    CHECK(s.trials().size() == grid->size());
    for (const auto& t : s.trials()) CHECK(t.state == TrialState::complete);
    if (std::string(name) == "mixed-precision") {
      CHECK(s.best_value() == o.known_minimum);
      CHECK(o.known_minimum == 9.664267578125);
      const auto best = s.best_trial();
      CHECK(std::get<std::int64_t>(best.param("layer0_width")) == 16);
      CHECK(std::get<std::int64_t>(best.param("layer3_width")) == 4);
    } else {
      CHECK(s.best_value() >= o.known_minimum);
    }
  }
  // Random search on Branin gets near its minimum.
  const auto b = make_builtin_objective("branin");
  Study r(std::make_shared<InMemoryStorage>(), "r", {StudyDirection::minimize}, std::make_shared<RandomSampler>(4));
  r.optimize(b.fn, 300);
  CHECK(r.best_value() < 1.0);
  CHECK(r.best_value() >= b.known_minimum);
}
