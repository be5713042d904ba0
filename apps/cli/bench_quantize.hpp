// `qnum bench quantize`: quantize throughput of one format against memcpy of the same buffer,
// measured alternately in one process. GB/s count 4 bytes read and 4 written per element.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/format.hpp"
#include "qnum/kernel/dispatch.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum::cli {

/// Runs `f` through the run-time dispatched kernels (kernel::dispatch::quantize) on `size` normally distributed floats
/// (standard deviation `sigma`: 2 by default; 0.02 is BERT's weight scale, where block formats' shared exponents
/// reach float's subnormals) with `threads` threads, alternating with memcpy of the same buffer: 7 rounds, each timing
/// enough repetitions for >= 20 ms, and reports the best round of each (best = least disturbed by the other tenants of
/// the machine). GB/s count 4 bytes per element read and per element written (a format with L output levels writes L
/// floats per input). Returns one JSON object:
/// {"format", "mode", "path", "isa", "arch", "size", "sigma", "threads", "gbps", "memcpy_gbps", "ratio"}.
/// Throws qnum::Error for size < 1, threads < 1 or a sigma that is not a positive finite number.
inline std::string bench_quantize_json(const Format& f, std::int64_t size, int threads, float sigma = 2.0f) {
  detail::require(size >= 1, "bench quantize: --size ", size, " must be >= 1");
  detail::require(sigma > 0.0f && sigma < std::numeric_limits<float>::infinity(), "bench quantize: --sigma ", sigma,
                  " must be a positive finite number");
  detail::require(threads >= 1, "bench quantize: --threads ", threads, " must be >= 1");
  const int saved_threads = num_threads();
  set_num_threads(threads);

  const Shape shape{size};
  // Formats with several output levels (residual_sign) write output_shape's elements.
  std::int64_t out_size = 1;
  for (auto d : f.output_shape(shape)) out_size *= d;
  std::vector<float> in(static_cast<std::size_t>(size)), out(static_cast<std::size_t>(out_size));
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0.0f, sigma);
  for (auto& x : in) x = d(gen);
  const double bytes = 4.0 * static_cast<double>(size + out_size), copy_bytes = 8.0 * static_cast<double>(size);

  using clock = std::chrono::steady_clock;
  auto time_reps = [&](auto&& op, int reps) {
    const auto t0 = clock::now();
    for (int r = 0; r < reps; ++r) op();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  auto quantize_op = [&] { kernel::dispatch::quantize(f, in, out, shape); };
  auto memcpy_op = [&] {
    std::memcpy(out.data(), in.data(), in.size() * sizeof(float));
    asm volatile("" : : "r"(out.data()) : "memory");  // keep the copy
  };
  // repetitions per timing: enough for ~20 ms of quantize (calibrated on one warm-up run)
  quantize_op();
  memcpy_op();
  const double one_q = std::max(time_reps(quantize_op, 1), 1e-7);
  const double one_m = std::max(time_reps(memcpy_op, 1), 1e-7);
  const int reps_q = static_cast<int>(std::clamp(0.02 / one_q, 1.0, 1e6));
  const int reps_m = static_cast<int>(std::clamp(0.02 / one_m, 1.0, 1e6));

  double best_q = 0, best_m = 0;
  for (int round = 0; round < 7; ++round) {
    best_q = std::max(best_q, bytes * reps_q / time_reps(quantize_op, reps_q) / 1e9);
    best_m = std::max(best_m, copy_bytes * reps_m / time_reps(memcpy_op, reps_m) / 1e9);
  }
  set_num_threads(saved_threads);

  char buf[160];
  std::snprintf(buf, sizeof buf, "\"gbps\": %.3f, \"memcpy_gbps\": %.3f, \"ratio\": %.3f", best_q, best_m,
                best_q / best_m);
  std::string fmt_text = f.to_string();
  std::string escaped;
  for (char c : fmt_text) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  std::string json = "{\"format\": \"";  // appends only (GCC 12 -Wrestrict false positive on +)
  json += escaped;
  json += "\", \"mode\": \"";
  json += f.policy.is_mase() ? "mase" : "exact";
  json += "\", \"path\": \"";
  json += kernel::to_string(kernel::dispatch::quantize_path(f, shape));
  json += "\", \"isa\": \"";
  json += kernel::dispatch::to_string(kernel::dispatch::selected_isa());
  json += "\", \"arch\": \"";
  json += kernel::dispatch::simd_arch_name(kernel::dispatch::selected_isa());
  json += "\", \"size\": ";
  json += std::to_string(size);
  char sig[32];
  std::snprintf(sig, sizeof sig, ", \"sigma\": %g", static_cast<double>(sigma));
  json += sig;
  json += ", \"threads\": ";
  json += std::to_string(threads);
  json += ", ";
  json += buf;
  json += "}";
  return json;
}

}  // namespace qnum::cli
