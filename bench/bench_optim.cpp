// AdamW's step over bert-tiny's 4,386,178 parameters (one tensor, gradient fixed), as the
// BERT training step runs it, beside the update qnum used until session 23 as the baseline:
// the same formula evaluated in double per element (two divisions and a square root each,
// divider-bound), in the chunked, vectorised form it had. Counters: GB/s of the 28 bytes of
// traffic per parameter (p, g, m, v read; p, m, v written), best_ms and the baseline's
// double_ms (best of 5, alternating, after the loop) and ratio = double_ms / best_ms.
// Run: qnum-bench --benchmark_filter=AdamW
#include <benchmark/benchmark.h>

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "qnum/nn/optim.hpp"
#include "qnum/tensor/ops.hpp"

namespace {

constexpr std::int64_t kBertTinyParams = 4386178;

/// The pre-session-23 AdamW update (double per element), in chunks of 64 whose three loops
/// vectorise: moments, square roots, parameter step.
void adamw_double(float* pp, const float* pg, float* pm, float* pv, std::size_t n, double lr, double wd, double t) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const double step_size = lr / (1.0 - std::pow(b1, t)), bc2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
  constexpr std::size_t kChunk = 64;
  alignas(64) double root[kChunk];
  for (std::size_t j0 = 0; j0 < n; j0 += kChunk) {
    const std::size_t c = std::min(kChunk, n - j0);
    for (std::size_t k = 0; k < c; ++k) {
      const std::size_t j = j0 + k;
      pp[j] = static_cast<float>(pp[j] * (1.0 - lr * wd));
      const double gj = pg[j];
      pm[j] = static_cast<float>(b1 * pm[j] + (1.0 - b1) * gj);
      pv[j] = static_cast<float>(b2 * pv[j] + (1.0 - b2) * gj * gj);
      root[k] = static_cast<double>(pv[j]);
    }
    using Batch = xsimd::batch<double>;
    std::size_t k = 0;
    for (; k + Batch::size <= c; k += Batch::size) xsimd::sqrt(Batch::load_aligned(root + k)).store_aligned(root + k);
    for (; k < c; ++k) root[k] = std::sqrt(root[k]);
    for (std::size_t k2 = 0; k2 < c; ++k2) {
      const std::size_t j = j0 + k2;
      pp[j] = static_cast<float>(pp[j] - step_size * pm[j] / (root[k2] / bc2_sqrt + eps));
    }
  }
}

void BM_AdamWStep(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(kBertTinyParams);
  std::vector<float> init(n), grad(n);
  for (std::size_t i = 0; i < n; ++i) {
    init[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
    grad[i] = 1e-3f * std::cos(0.11f * static_cast<float>(i));
  }
  qnum::Tensor p = qnum::Tensor({kBertTinyParams}, init).set_requires_grad(true);
  qnum::sum(qnum::mul(p, qnum::Tensor({kBertTinyParams}, grad))).backward();  // p's gradient: grad
  qnum::nn::AdamW opt({p}, {.lr = 1e-4, .weight_decay = 0.01});
  for (auto _ : st) {
    opt.step();
    benchmark::DoNotOptimize(p.values().data());
  }
  std::vector<float> pd = init, md(n, 0.0f), vd(n, 0.0f);
  double best_double = 1e9, best = 1e9;
  for (int r = 0; r < 5; ++r) {  // alternating, best of 5 each
    auto t0 = std::chrono::steady_clock::now();
    adamw_double(pd.data(), grad.data(), md.data(), vd.data(), n, 1e-4, 0.01, r + 1.0);
    best_double = std::min(best_double, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    t0 = std::chrono::steady_clock::now();
    opt.step();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  benchmark::DoNotOptimize(pd.data());
  st.counters["GBps"] =
      benchmark::Counter(28.0 * static_cast<double>(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["best_ms"] = best * 1e3;
  st.counters["double_ms"] = best_double * 1e3;
  st.counters["ratio"] = best_double / best;
}

}  // namespace

BENCHMARK(BM_AdamWStep)->Unit(benchmark::kMillisecond)->UseRealTime();
