// GEMM benchmarks, each beside its baseline in the same process and the same benchmark:
//   FmaPeak            register-only FMA loop: the machine's fp32 peak (GFLOPS counter)
//   GemmF32Own         own blocked fp32 kernel; eigen_GFLOPS = Eigen on the same buffers
//   GemmF32Eigen       Eigen (Eigen::Map, Eigen::setNbThreads(T)); own_GFLOPS beside it
//   GemmInt8/MXInt8/Binary  quantized GEMM; fp32_GFLOPS = own fp32 at the same shape
//   LinearShape        bert-tiny Linear shapes with bias: the fp32 bias epilogue beside GEMM +
//                      bias pass, and the 8-bit fixed-point GEMM beside fp32 (same bits)
//   LinearGradShape    bert-tiny's dW = dYᵀ·X from memory: X read in place beside X packed
// Counters: GFLOPS (2·M·N·K per run), the baseline's GFLOPS (best of 3 after the loop),
// ratio, and of_peak = GFLOPS / FMA peak at the same thread count.
// Run: bench_gemm --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

// Eigen 3.4's AVX-512 packet code trips GCC 12's uninitialized / unused warnings.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/bench_gemm.hpp"

namespace {

using qnum_bench_gemm::GemmCase;

/// Peak fp32 FMA GFLOP/s on `threads` threads: independent FMA chains in registers only
/// (best of 3 runs of ~0.05 s). Measured again beside each fp32 benchmark: clocks drift here.
double fma_peak_gflops(int threads) {
  using qnum::detail::fvec;
  // Enough independent chains to cover FMA latency x pipes (4 x 2 on current x86 cores), few
  // enough to stay in registers with the two operands: AVX2 has 16 vector registers.
  constexpr int kChains = qnum::detail::kFV >= 16 ? 24 : 12;
  constexpr std::int64_t iters = 5'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      fvec acc[kChains];
      for (int c = 0; c < kChains; ++c) acc[c] = fvec{} + static_cast<float>(c);
      fvec m = fvec{} + 0.999999f, a = fvec{} + 1e-6f;
      benchmark::DoNotOptimize(m);
      benchmark::DoNotOptimize(a);
      for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
        for (int c = 0; c < kChains; ++c) acc[c] = qnum::detail::vfma(acc[c], m, a);
      }
      // One sum escapes, not each chain: DoNotOptimize(acc[c]) takes acc's address, and GCC
      // then kept the chains in memory (a load and store per FMA: 64 of Zen 4's ~117 GFLOP/s).
      fvec sum = acc[0];
      for (int c = 1; c < kChains; ++c) sum += acc[c];
      benchmark::DoNotOptimize(sum);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * qnum::detail::kFV * kChains * static_cast<double>(iters) * threads / s * 1e-9);
  }
  return best;
}

void BM_FmaPeak(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(fma_peak_gflops(threads));
  st.counters["GFLOPS"] = fma_peak_gflops(threads);
  st.counters["threads"] = threads;
}

struct EigenCase {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  GemmCase& c;
  void run() {
    Eigen::Map<const Mat> A(c.af.data(), c.m, c.k), B(c.bf.data(), c.n, c.k);
    Eigen::Map<Mat> C(c.cf.data(), c.m, c.n);
    C.noalias() = A * B.transpose();
  }
};

template <class F>
double best_gflops(double flops, F&& f, int reps = 3) {
  double best = 1e300;
  f();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return flops / best * 1e-9;
}

/// kind: 0 own fp32 (baseline Eigen), 1 Eigen (baseline own), 2 int8, 3 mxint8, 4 binary
/// (baseline own fp32).
void BM_Gemm(benchmark::State& st, int kind) {
  const std::int64_t s = st.range(0);
  const int threads = static_cast<int>(st.range(1));
  static const char* names[] = {"fp32", "fp32", "int8", "mxint8", "binary"};
  qnum::set_num_threads(threads);
  Eigen::setNbThreads(threads);
  GemmCase c(names[kind], s, s, s), f("fp32", s, s, s);
  EigenCase e{f};
  auto run = [&] {
    if (kind == 1)
      e.run();
    else
      c.run();
  };
  run();
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  const double flops = c.flops();
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  double base = 0;
  const char* base_name = "fp32_GFLOPS";
  if (kind == 0) {
    base = best_gflops(flops, [&] { e.run(); });
    base_name = "eigen_GFLOPS";
  } else {
    base = best_gflops(flops, [&] { f.run(); });
    if (kind == 1) base_name = "own_GFLOPS";
  }
  st.counters[base_name] = base;
  // The ratio from the best run of this benchmark beside the best of its baseline.
  const double self = best_gflops(flops, run);
  st.counters["best_GFLOPS"] = self;
  st.counters["ratio"] = self / base;
  if (kind <= 1) {
    const double peak = fma_peak_gflops(threads);
    st.counters["fma_peak_GFLOPS"] = peak;
    st.counters["of_peak"] = self / peak;
  }
}

/// bert-tiny's Linear shapes (batch 32 x seq 128 = 4096 rows: attention output, FFN in, FFN
/// out), with a bias, one thread. kind 0: gemm_f32_nt_bias (bias in the epilogue) beside the
/// GEMM then a bias pass (same bits); kind 1: gemm_fixed8_nt with bias on int8 codes (QAT's
/// 8-bit Linear, linear_fixed8) beside gemm_f32_nt_bias on the dequantized codes (same bits).
void BM_LinearShape(benchmark::State& st, int kind) {
  const std::int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  qnum::set_num_threads(1);
  std::mt19937 g(7);
  std::uniform_int_distribution<int> code(-128, 127);
  std::vector<std::int8_t> a8(static_cast<std::size_t>(m * k)), b8(static_cast<std::size_t>(n * k));
  for (auto& v : a8) v = static_cast<std::int8_t>(code(g));
  for (auto& v : b8) v = static_cast<std::int8_t>(code(g));
  std::vector<float> af(a8.size()), bf(b8.size()), bias(static_cast<std::size_t>(n)),
      c(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < af.size(); ++i) af[i] = std::ldexp(static_cast<float>(a8[i]), -4);
  for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = std::ldexp(static_cast<float>(b8[i]), -7);
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(code(g)) / 32.0f;
  auto epilogue = [&] { qnum::gemm_f32_nt_bias(af.data(), bf.data(), bias.data(), c.data(), m, n, k); };
  auto separate = [&] {
    qnum::gemm_f32_nt(af.data(), bf.data(), c.data(), m, n, k);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[static_cast<std::size_t>(i * n + j)] += bias[static_cast<std::size_t>(j)];
  };
  auto fixed8 = [&] { qnum::gemm_fixed8_nt(a8.data(), 4, b8.data(), 7, c.data(), m, n, k, bias.data()); };
  auto run = [&] { kind == 0 ? epilogue() : fixed8(); };
  run();
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double base = kind == 0 ? best_gflops(flops, separate, 5) : best_gflops(flops, epilogue, 5);
  const double self = best_gflops(flops, run, 5);
  st.counters[kind == 0 ? "gemm_then_bias_GFLOPS" : "fp32_GFLOPS"] = base;
  st.counters["best_GFLOPS"] = self;
  st.counters["ratio"] = self / base;
}

/// A Linear's weight gradient dW [out, in] = dYᵀ·X (gemm_f32_tn) at bert-tiny's shapes (4096
/// rows), operands from memory as in a training step (each run takes the next of 12 operand
/// pairs, 24-96 MB in all, past this machine's L3): X read in place by the micro-kernel beside
/// X packed into panels first (the same bits, tested). Args: out, in.
void BM_LinearGradShape(benchmark::State& st) {
  const std::int64_t rows = 4096, out = st.range(0), in = st.range(1);
  qnum::set_num_threads(1);
  constexpr int kPairs = 12;
  std::mt19937 g(11);
  std::normal_distribution<float> d;
  std::vector<std::vector<float>> dy(kPairs), x(kPairs);
  for (int i = 0; i < kPairs; ++i) {
    dy[i].resize(static_cast<std::size_t>(rows * out));
    x[i].resize(static_cast<std::size_t>(rows * in));
    for (auto& v : dy[i]) v = d(g);
    for (auto& v : x[i]) v = d(g);
  }
  std::vector<float> dw(static_cast<std::size_t>(out * in));
  int next = 0;
  auto grad = [&](bool pack) {
    const int i = next++ % kPairs;
    qnum::detail::gemm_f32_impl(dy[i].data(), x[i].data(), dw.data(), out, in, rows, false, true, nullptr, pack);
  };
  for (auto _ : st) {
    grad(false);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(out) * static_cast<double>(in);
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double base = best_gflops(
      flops, [&] { grad(true); }, 2 * kPairs);
  const double self = best_gflops(
      flops, [&] { grad(false); }, 2 * kPairs);
  st.counters["packed_GFLOPS"] = base;
  st.counters["best_GFLOPS"] = self;
  st.counters["ratio"] = self / base;
}

void linear_shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 128, 128})->Args({4096, 512, 128})->Args({4096, 128, 512});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int s : {256, 1024}) b->Args({s, t});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, f32_own, 0)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, f32_eigen, 1)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, int8, 2)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, mxint8, 3)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, binary, 4)->Apply(shapes);
BENCHMARK_CAPTURE(BM_LinearShape, f32_bias_epilogue, 0)->Apply(linear_shapes);
BENCHMARK_CAPTURE(BM_LinearShape, fixed8_bias, 1)->Apply(linear_shapes);
BENCHMARK(BM_LinearGradShape)
    ->Args({128, 128})
    ->Args({512, 128})
    ->Args({128, 256})
    ->Args({128, 512})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
