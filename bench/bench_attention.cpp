// Attention forward: naive (materialised scores, Eigen GEMMs) beside fused (tiled, online
// softmax) in the same process, BERT shapes: batch 1, head_dim 64, seq 128..1024, heads 2..12,
// 1 and 2 threads. Reports ms per call (real time) and GFLOP/s (4 * heads * seq^2 * head_dim).
// AttentionTrain: a training step's attention (forward + backward, additive mask, dropout 0.1)
// at bert-tiny's shape (batch 32, 2 heads of 64) through scaled_dot_product_attention beside
// the layer ops it replaces (permute, transpose, matmul, scale, mask, softmax, dropout, matmul,
// permute: the same bits), one thread; ms per step. AttentionTrainRecompute: the fused op
// keeping nothing for backward (probabilities and dropout mask recomputed there).
//   ./qnum-bench --benchmark_filter=Attention --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "qnum/core/heap.hpp"
#include "qnum/kernel/attention.hpp"
#include "qnum/tensor/ops.hpp"

namespace {

struct AttentionInputs {
  qnum::AttentionShape s;
  std::vector<float> q, k, v, out;
  explicit AttentionInputs(const qnum::AttentionShape& shape) : s(shape) {
    std::mt19937 g(1234);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    q.resize(static_cast<std::size_t>(s.q_size()));
    k.resize(static_cast<std::size_t>(s.kv_size()));
    v.resize(static_cast<std::size_t>(s.kv_size()));
    out.resize(q.size());
    for (auto* x : {&q, &k, &v})
      for (auto& e : *x) e = dist(g);
  }
};

template <bool Fused>
void bm_attention(benchmark::State& state) {
  const int saved = qnum::detail::thread_setting();
  qnum::set_num_threads(static_cast<int>(state.range(2)));
  AttentionInputs in(qnum::AttentionShape::self(1, state.range(1), state.range(0), 64));
  for (auto _ : state) {
    if constexpr (Fused)
      qnum::attention_fused(in.q.data(), in.k.data(), in.v.data(), nullptr, in.out.data(), in.s);
    else
      qnum::attention_naive(in.q.data(), in.k.data(), in.v.data(), nullptr, in.out.data(), in.s);
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(in.s.flops() * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  qnum::detail::thread_setting() = saved;
}

void attention_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seq", "heads", "threads"});
  for (std::int64_t threads : {1, 2})
    for (std::int64_t seq : {128, 256, 512, 1024})
      for (std::int64_t heads : {2, 12}) b->Args({seq, heads, threads});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

/// One training step's attention at [32, seq, 2·64]: forward and backward; Mode 0 the layers,
/// 1 the fused op (probabilities saved at these sizes), 2 the fused op recomputing them.
template <int Mode>
void bm_attention_train(benchmark::State& state) {
  using qnum::Tensor;
  qnum::retain_freed_memory();
  const int saved = qnum::detail::thread_setting();
  qnum::set_num_threads(1);
  const std::int64_t B = 32, T = state.range(0), H = 2, D = 64, HD = H * D;
  const float scale = qnum::detail::attention_scale(D), p = 0.1f;
  Tensor q = Tensor::randn({B, T, HD}, 1, 0.0f, 1.0f, true), k = Tensor::randn({B, T, HD}, 2, 0.0f, 1.0f, true),
         v = Tensor::randn({B, T, HD}, 3, 0.0f, 1.0f, true);
  const Tensor g = Tensor::randn({B, T, HD}, 4);
  std::vector<float> m(static_cast<std::size_t>(B * T), 0.0f);
  for (std::int64_t b = 0; b < B; ++b)  // row b: its last b keys are padding
    for (std::int64_t j = T - b; j < T; ++j) m[static_cast<std::size_t>(b * T + j)] = -3.4e38f;
  const Tensor mask({B, 1, 1, T}, qnum::FloatBuffer(m.begin(), m.end()));
  auto heads_first = [&](const Tensor& t) { return qnum::permute(qnum::reshape(t, {B, T, H, D}), {0, 2, 1, 3}); };
  std::uint64_t seed = 0;
  for (auto _ : state) {
    Tensor y;
    if constexpr (Mode > 0) {
      y = qnum::scaled_dot_product_attention(
          q, k, v, mask, H, scale, p, ++seed,
          Mode == 1 ? qnum::AttentionMemory::automatic : qnum::AttentionMemory::recompute);
    } else {
      const Tensor s =
          qnum::add(qnum::mul_scalar(qnum::matmul(heads_first(q), qnum::transpose(heads_first(k), 2, 3)), scale), mask);
      const Tensor ctx = qnum::matmul(qnum::dropout(qnum::softmax(s, -1), p, true, ++seed), heads_first(v));
      y = qnum::reshape(qnum::permute(ctx, {0, 2, 1, 3}), {B, T, HD});
    }
    y.backward(g);
    benchmark::DoNotOptimize(q.grad().data());
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();
  }
  qnum::detail::thread_setting() = saved;
}

BENCHMARK(bm_attention<false>)->Name("AttentionNaive")->Apply(attention_args);
BENCHMARK(bm_attention_train<0>)
    ->Name("AttentionTrainLayers")
    ->Arg(128)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_attention_train<1>)
    ->Name("AttentionTrainFused")
    ->Arg(128)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_attention_train<2>)
    ->Name("AttentionTrainRecompute")
    ->Arg(128)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_attention<true>)->Name("AttentionFused")->Apply(attention_args);

}  // namespace
