// Shared helpers of the search tests.
#pragma once

#include <filesystem>
#include <string>

#include "error_of.hpp"
#include "qnum/search/trial.hpp"

namespace qnum_search_test {

using qnum_test::error_of;

/// tests/fixtures/search/tpe (Optuna's values, made by make_tpe_fixtures.py).
inline const std::filesystem::path kTpeFixtures =
    std::filesystem::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "search" / "tpe";

/// A small objective over a float and an int parameter: x^2 + k, x in [-1, 1], k in 1..4.
inline double toy_objective(qnum::search::Trial& t) {
  const double x = t.suggest_float("x", -1.0, 1.0);
  const auto k = t.suggest_int("k", 1, 4);
  return x * x + double(k);
}

}  // namespace qnum_search_test
