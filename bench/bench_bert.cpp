// bert-tiny training step and inference (batch 32, seq 128 and 256, no padding, random ids),
// the same work as bench/torch_bert_baseline.py: forward + cross-entropy + backward +
// grad-norm clipping (1.0) + AdamW for a step; eval-mode forward without gradients (fused
// attention) for inference. The Qat variants first quantize every Linear to 8-bit fixed point
// (data_in 8/4, weight 8/7, bias 8/5: examples/configs/bert_int8_qat.toml) — the baseline's
// --qat, MASE's LinearInteger. Threads: QNUM_BENCH_THREADS (default 1), as the baseline's
// --threads. All call qnum::retain_freed_memory() first, as Trainer::fit does.
// qnum's classifier runs the last layer for the [CLS] token only (the logits are the same:
// BertModel::encode_first_token); the AllTokens variants turn that off and do the work
// transformers does, token for token.
//   ./qnum-bench --benchmark_filter=Bert
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "qnum/core/heap.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/train/recipe.hpp"
#include "qnum/train/recipe.hpp"

namespace {

struct BertBatch {
  std::vector<std::int64_t> ids, mask, labels;
};

BertBatch random_batch(std::int64_t b, std::int64_t t) {
  BertBatch x;
  const qnum::CounterRng rng(7);
  for (std::int64_t i = 0; i < b * t; ++i)
    x.ids.push_back(1000 + static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(i)) * 29000.0f));
  x.mask.assign(static_cast<std::size_t>(b * t), 1);
  for (std::int64_t i = 0; i < b; ++i) x.labels.push_back(i % 2);
  return x;
}

/// examples/configs/bert_int8_qat.toml: 8-bit fixed point on every Linear's input, weight, bias.
void quantize_int8(qnum::nn::Module& m) {
  qnum::passes::quantize(m, nlohmann::json::parse(R"({"by": "type", "default": {"config": {"name": "NA"}},
      "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
                            "weight_frac_width": 7, "bias_width": 8, "bias_frac_width": 5}}})"));
}

int bench_threads() {
  const char* s = std::getenv("QNUM_BENCH_THREADS");
  return s ? std::atoi(s) : 1;
}

void train_step(benchmark::State& state, bool qat, bool first_token_only = true) {
  qnum::retain_freed_memory();
  qnum::set_num_threads(bench_threads());
  const std::int64_t B = state.range(0), T = state.range(1);
  auto m = qnum::models::make_bert_model("bert-tiny", 0);
  if (qat) quantize_int8(*m);
  m->first_token_only = first_token_only;
  m->train();
  auto opt = qnum::train::make_optimizer("adamw", m->parameters(), 1e-4, 0.0);
  std::vector<qnum::Tensor> params = m->parameters();
  const BertBatch x = random_batch(B, T);
  for (auto _ : state) {
    opt->zero_grad();
    const qnum::Tensor loss =
        qnum::cross_entropy(m->forward(qnum::models::BertInput{B, T, x.ids, x.mask, {}}), x.labels);
    loss.backward();
    qnum::train::clip_grad_norm(params, 1.0);
    opt->step();
    benchmark::DoNotOptimize(loss.item());
  }
  state.counters["threads"] = bench_threads();
}
void BM_BertTinyTrainStep(benchmark::State& state) { train_step(state, false); }
void BM_BertTinyQatTrainStep(benchmark::State& state) { train_step(state, true); }
void BM_BertTinyTrainStepAllTokens(benchmark::State& state) { train_step(state, false, false); }
BENCHMARK(BM_BertTinyTrainStep)->Args({32, 128})->Args({32, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BertTinyQatTrainStep)->Args({32, 128})->Args({32, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BertTinyTrainStepAllTokens)
    ->Args({32, 128})
    ->Args({32, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void inference(benchmark::State& state, bool qat, bool first_token_only = true) {
  qnum::retain_freed_memory();
  qnum::set_num_threads(bench_threads());
  const std::int64_t B = state.range(0), T = state.range(1);
  auto m = qnum::models::make_bert_model("bert-tiny", 0);
  if (qat) quantize_int8(*m);
  m->first_token_only = first_token_only;
  m->eval();
  const BertBatch x = random_batch(B, T);
  for (auto _ : state) {
    qnum::autograd::NoGradGuard no_grad;
    benchmark::DoNotOptimize(m->forward(qnum::models::BertInput{B, T, x.ids, x.mask, {}}).data());
  }
  state.counters["threads"] = bench_threads();
}
void BM_BertTinyInference(benchmark::State& state) { inference(state, false); }
void BM_BertTinyQatInference(benchmark::State& state) { inference(state, true); }
void BM_BertTinyInferenceAllTokens(benchmark::State& state) { inference(state, false, false); }
BENCHMARK(BM_BertTinyInference)->Args({32, 128})->Args({32, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BertTinyQatInference)->Args({32, 128})->Args({32, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BertTinyInferenceAllTokens)
    ->Args({32, 128})
    ->Args({32, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
