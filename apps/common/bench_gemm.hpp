// `qnum bench gemm`: GFLOP/s of one GEMM kind beside the fp32 GEMM, measured in alternating blocks in
// the same call (best of several runs each). Also used by bench/bench_gemm.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/gemm.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum_bench_gemm {

/// Operands of one GEMM kind, prepared once; run() does one C = A·Bᵀ (NT form).
///   fp32:   gemm_f32_nt on float A [M,K], B [N,K]
///   bf16:   gemm_bf16_nt on the same floats (rounded to bf16 while packing, fp32 accumulation)
///   int8:   gemm_fixed8_nt (int8 codes, int32 accumulation, rescale to float)
///   mxint8: gemm_mxint8_f32_nt (float activations quantized to MXINT8 on the fly, MXINT8 weights)
///   binary: gemm_binary_nt (packed ±1 rows); FLOPs counted as 2·M·N·K equivalent operations
struct GemmCase {
  std::string kind;
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<float> af, bf, cf;
  std::vector<std::int8_t> a8, b8;
  std::vector<qnum::MXInt8> bq;
  std::vector<std::uint64_t> ab, bb;
  std::vector<std::int32_t> ci;

  GemmCase(std::string kind_, std::int64_t m_, std::int64_t n_, std::int64_t k_)
      : kind(std::move(kind_)), m(m_), n(n_), k(k_) {
    std::mt19937 g(42);
    std::normal_distribution<float> d(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, std::int64_t count) {
      v.resize(static_cast<std::size_t>(count));
      for (auto& x : v) x = d(g);
    };
    fill(af, m * k);
    fill(bf, n * k);
    cf.resize(static_cast<std::size_t>(m * n));
    if (kind == "int8") {
      a8 = qnum::quantize_fixed8(af, 5);
      b8 = qnum::quantize_fixed8(bf, 5);
    } else if (kind == "mxint8") {
      bq.resize(static_cast<std::size_t>(n * qnum::mxint8_blocks(k)));
      qnum::quantize_mxint8(bf.data(), n, k, bq.data());
    } else if (kind == "binary") {
      ab = qnum::pack_binary(af.data(), m, k);
      bb = qnum::pack_binary(bf.data(), n, k);
      ci.resize(static_cast<std::size_t>(m * n));
    }
  }
  void run() {
    if (kind == "fp32")
      qnum::gemm_f32_nt(af.data(), bf.data(), cf.data(), m, n, k);
    else if (kind == "bf16")
      qnum::gemm_bf16_nt(af.data(), bf.data(), cf.data(), m, n, k);
    else if (kind == "int8")
      qnum::gemm_fixed8_nt(a8.data(), 5, b8.data(), 5, cf.data(), m, n, k);
    else if (kind == "mxint8")
      qnum::gemm_mxint8_f32_nt(af.data(), bq.data(), cf.data(), m, n, k);
    else
      qnum::gemm_binary_nt(ab.data(), bb.data(), ci.data(), m, n, k);
  }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

inline double seconds_of(GemmCase& c) {
  const auto t0 = std::chrono::steady_clock::now();
  c.run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Checks the arguments of `qnum bench gemm`; qnum::Error names the bad one.
inline void check_args(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& kind, int threads) {
  qnum::detail::require(kind == "fp32" || kind == "bf16" || kind == "int8" || kind == "mxint8" || kind == "binary",
                        "bench gemm: kind '", kind, "' must be one of fp32, bf16, int8, mxint8, binary");
  qnum::detail::require(m >= 1 && n >= 1 && k >= 1, "bench gemm: sizes m=", m, " n=", n, " k=", k, " must all be >= 1");
  constexpr std::int64_t lim = std::int64_t{1} << 16, elems = std::int64_t{1} << 26;
  qnum::detail::require(m <= lim && n <= lim && k <= lim, "bench gemm: sizes m=", m, " n=", n, " k=", k,
                        " must all be <= ", lim);
  qnum::detail::require(m * k <= elems && n * k <= elems && m * n <= elems,
                        "bench gemm: m*k, n*k and m*n must be <= ", elems, " elements");
  qnum::detail::require(threads >= 1 && threads <= 1024, "bench gemm: threads ", threads, " must be in [1, 1024]");
}

/// Best-of GFLOP/s of `kind` and of fp32 at the same shape and thread count, in alternating
/// blocks (at least `min_runs` calls and ~block_seconds each, `rounds` times and until
/// ~min_seconds have passed): the two share the clock's ups and downs, and each call of a block
/// finds its operands in cache as a peer's timing loop does (torch.utils.benchmark, best_time
/// in bench/torch_baseline.py) — alternating single calls made every call cold and, on AMX,
/// start after a run of AVX-512 code.
inline std::pair<double, double> measure(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& kind,
                                         int threads, int min_runs = 3, double min_seconds = 0.5, int rounds = 3,
                                         double block_seconds = 0.05) {
  check_args(m, n, k, kind, threads);
  const int saved = qnum::num_threads();
  qnum::set_num_threads(threads);
  GemmCase q(kind, m, n, k), f("fp32", m, n, k);
  double bq = 1e300, bf = 1e300, spent = 0;
  for (int r = 0; r < rounds || (spent < min_seconds && r < 1000); ++r)
    for (GemmCase* c : {&q, &f}) {
      double& best = c == &q ? bq : bf;
      c->run();  // back in cache after the other kind's block
      double block = 0;
      for (int i = 0; i < min_runs || (block < block_seconds && i < 10000); ++i) {
        const double t = seconds_of(*c);
        best = std::min(best, t);
        block += t;
      }
      spent += block;
    }
  qnum::set_num_threads(saved);
  return {q.flops() / bq * 1e-9, f.flops() / bf * 1e-9};
}

}  // namespace qnum_bench_gemm

/// `qnum bench gemm --json`: {"kind": ..., "m": M, "n": N, "k": K, "threads": T, "gflops": x,
/// "fp32_gflops": y, "ratio": x/y}; bad arguments -> qnum::Error.
inline std::string bench_gemm_json(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& kind,
                                   int threads) {
  const auto [g, f] = qnum_bench_gemm::measure(m, n, k, kind, threads);
  std::ostringstream os;
  os.precision(6);
  os << "{\"kind\": \"" << kind << "\", \"m\": " << m << ", \"n\": " << n << ", \"k\": " << k
     << ", \"threads\": " << threads << ", \"gflops\": " << g << ", \"fp32_gflops\": " << f << ", \"ratio\": " << g / f
     << "}";
  return os.str();
}
