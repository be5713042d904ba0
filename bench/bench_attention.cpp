// Attention forward: naive (materialised scores, Eigen GEMMs) beside fused (tiled, online
// softmax) in the same process, BERT shapes: batch 1, head_dim 64, seq 128..1024, heads 2..12,
// 1 and 2 threads. Reports ms per call (real time) and GFLOP/s (4 * heads * seq^2 * head_dim).
//   ./qnum-bench --benchmark_filter=Attention --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "qnum/kernel/attention.hpp"

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

BENCHMARK(bm_attention<false>)->Name("AttentionNaive")->Apply(attention_args);
BENCHMARK(bm_attention<true>)->Name("AttentionFused")->Apply(attention_args);

}  // namespace
