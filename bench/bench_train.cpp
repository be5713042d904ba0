// Training benchmarks: one epoch of jsc-tiny and of the 16-64-32-32-5 BatchNorm/ReLU MLP over
// 600,000 jsc-synthetic rows at batch 256 with Adam (apps/common/bench_train.hpp, the loop
// of `qnum bench train`). Only the epoch is timed (manual time; data generation excluded).
// Counters: rows_per_s, cpu_seconds (process CPU time of the epoch) and peak_rss_mb (the
// resident-set high-water mark during the epoch, reset right before it). The baseline has
// no C++ form: run bench/torch_train_baseline.py with the same --model/--threads next to it.
// Run: qnum-bench --benchmark_filter=TrainEpoch
#include <benchmark/benchmark.h>

#include <string>

#include "common/bench_train.hpp"

namespace {

void BM_TrainEpoch(benchmark::State& st, const std::string& model) {
  const int threads = static_cast<int>(st.range(0));
  qnum::cli::TrainBenchResult r;
  for (auto _ : st) {
    r = qnum::cli::bench_train(model, 600000, 256, threads);
    st.SetIterationTime(r.seconds);
  }
  st.counters["rows_per_s"] = r.rows_per_s;
  st.counters["cpu_seconds"] = r.cpu_seconds;
  st.counters["peak_rss_mb"] = r.peak_rss_mb;
  st.counters["epoch_extra_mb"] = r.peak_rss_mb - r.rss_before_mb;
  st.counters["threads"] = threads;
}

}  // namespace

BENCHMARK_CAPTURE(BM_TrainEpoch, jsc_tiny, std::string("jsc-tiny"))
    ->Arg(1)
    ->Arg(2)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainEpoch, jsc_mlp_16_64_32_32_5, std::string("jsc-mlp:16-64-32-32-5"))
    ->Arg(1)
    ->Arg(2)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
