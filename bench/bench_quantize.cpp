// Quantize throughput, each kernel beside its baselines in the same process: memcpy of the
// same buffer, the scalar reference (Format::quantize) and the SIMD kernel
// (qnum::kernel::quantize), from L1-sized tensors to DRAM (4M floats = 16 MB per buffer).
// Bytes counted: 4 read + 4 written per element. Threads: 1 unless the name says /threads:2.
//
//   ./qnum-bench --benchmark_filter=quantize --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qnum/format/format.hpp"
#include "qnum/kernel/quantize.hpp"
#include "qnum/kernel/threading.hpp"

namespace {

const std::vector<std::int64_t> kSizes = {1 << 12, 1 << 15, 1 << 18, 1 << 20, 1 << 22};

struct Case {
  const char* name;
  const char* spec;
};
const Case kCases[] = {
    {"integer", "integer:width=8,frac_width=4"},
    {"minifloat_exact", "minifloat_ieee:width=8,exponent_width=4"},
    {"minifloat_mase", "minifloat_ieee:width=8,exponent_width=4,mode=mase_compat"},
    {"fp8_e4m3", "fp8_e4m3"},
    {"minifloat_denorm_mase", "minifloat_denorm:mode=mase_compat"},
    {"log", "log"},
    {"log_mase", "log:mode=mase_compat"},
    {"binary", "binary"},
    {"block_fp", "block_fp"},
    {"mxint8", "mxint8"},
    {"mxfp4", "mxfp4_e2m1"},
};

std::vector<float> inputs(std::int64_t n) {
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

void set_counters(benchmark::State& st, std::int64_t n) {
  st.SetItemsProcessed(st.iterations() * n);
  st.SetBytesProcessed(st.iterations() * n * 8);  // 4 read + 4 written
}

void bm_memcpy(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto in = inputs(n);
  std::vector<float> out(in.size());
  for (auto _ : st) {
    std::memcpy(out.data(), in.data(), in.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n);
}

void bm_reference(benchmark::State& st, const qnum::Format& f) {
  const std::int64_t n = st.range(0);
  const auto in = inputs(n);
  std::vector<float> out(in.size());
  for (auto _ : st) {
    f.quantize(in, out, {n});
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n);
}

void bm_simd(benchmark::State& st, const qnum::Format& f, int threads) {
  const std::int64_t n = st.range(0);
  const auto in = inputs(n);
  std::vector<float> out(in.size());
  qnum::set_num_threads(threads);
  for (auto _ : st) {
    qnum::kernel::quantize(f, in, out, {n});
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  qnum::set_num_threads(1);
  set_counters(st, n);
  st.SetLabel(std::string(qnum::kernel::to_string(qnum::kernel::quantize_path(f))) + " " +
              std::string(qnum::kernel::simd_arch_name()));
}

const bool registered = [] {
  for (const auto& c : kCases) {
    const qnum::Format f = qnum::Format::parse(c.spec);
    const std::string base = std::string("quantize/") + c.name;
    auto* m = benchmark::RegisterBenchmark((base + "/memcpy").c_str(), bm_memcpy);
    auto* r = benchmark::RegisterBenchmark((base + "/reference").c_str(), [f](benchmark::State& st) {
      bm_reference(st, f);
    });
    auto* s = benchmark::RegisterBenchmark((base + "/simd").c_str(), [f](benchmark::State& st) { bm_simd(st, f, 1); });
    auto* s2 = benchmark::RegisterBenchmark((base + "/simd/threads:2").c_str(),
                                            [f](benchmark::State& st) { bm_simd(st, f, 2); });
    for (auto n : kSizes) {
      m->Arg(n);
      s->Arg(n);
    }
    r->Arg(1 << 18)->Arg(1 << 22);  // the reference is slow: two sizes
    s2->Arg(1 << 22);
  }
  return true;
}();

}  // namespace
