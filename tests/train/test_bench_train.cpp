// `qnum bench train` (apps/common/bench_train.hpp) on a small epoch: what it reports is
// consistent (batches, parameters, a finite falling-from-chance loss, memory fields), the
// same seed gives the same loss at 1 and 2 threads, and bad arguments are named. No timing
// assertions: only that times are positive.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "common/bench_train.hpp"

TEST_CASE("bench train: one small epoch reports consistent numbers") {
  const auto r = qnum::cli::bench_train("jsc-mlp:16-64-32-32-5", 3000, 256, 1);
  CHECK(r.batches == 12);  // ceil(3000 / 256)
  CHECK(r.params == 4677);
  CHECK(r.rows == 3000);
  CHECK(r.seconds > 0);
  CHECK(r.cpu_seconds >= 0);
  CHECK(r.rows_per_s == doctest::Approx(3000 / r.seconds));
  CHECK(std::isfinite(r.mean_loss));
  CHECK(r.mean_loss < std::log(5.0) + 0.2);  // starts near chance, not diverging
#if defined(__linux__)
  CHECK(r.rss_before_mb > 0);
  CHECK(r.peak_rss_mb >= r.rss_before_mb);
#endif
  const auto j = nlohmann::json::parse(qnum::cli::bench_train_json(r));
  for (const char* key : {"model", "rows", "batch_size", "batches", "params", "threads", "seconds", "cpu_seconds",
                          "rows_per_s", "peak_rss_mb", "rss_before_mb", "epoch_extra_mb", "mean_loss"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["model"] == "jsc-mlp:16-64-32-32-5");
}

TEST_CASE("bench train: the epoch's loss does not depend on the thread count") {
  const auto one = qnum::cli::bench_train("jsc-tiny", 2000, 128, 1, 7);
  const auto two = qnum::cli::bench_train("jsc-tiny", 2000, 128, 2, 7);
  CHECK(one.mean_loss == two.mean_loss);
  CHECK(one.threads == 1);
  CHECK(two.threads == 2);
}

TEST_CASE("bench train: bad arguments are named") {
  using qnum::cli::bench_train;
  CHECK_THROWS_WITH_AS(bench_train("jsc-tiny", 0, 256, 1), doctest::Contains("--rows 0"), qnum::Error);
  CHECK_THROWS_WITH_AS(bench_train("jsc-tiny", 100, 0, 1), doctest::Contains("--batch-size 0"), qnum::Error);
  CHECK_THROWS_WITH_AS(bench_train("jsc-tiny", 100, 10, 0), doctest::Contains("--threads 0"), qnum::Error);
  CHECK_THROWS_WITH_AS(bench_train("jsc-huge", 100, 10, 1), doctest::Contains("unknown model 'jsc-huge'"), qnum::Error);
}
