// `qnum bench attention`: times naive (materialised scores) and fused (flash-style) attention
// forward on the same random BERT-style inputs (batch 1, no mask), alternating the two, and
// returns one JSON object. Times are the best of several runs of each, in milliseconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <qnum/core/error.hpp>
#include <qnum/kernel/attention.hpp>
#include <qnum/kernel/threading.hpp>

namespace qnum::cli {

/// {"seq": S, "heads": H, "head_dim": D, "threads": T, "fused_ms": a, "naive_ms": b,
///  "ratio": b/a}. Bad arguments (any value < 1, or a problem whose materialised scores or
/// inputs would exceed 2 GiB) throw qnum::Error. Restores the thread setting it changes.
inline std::string bench_attention_json(std::int64_t seq, std::int64_t heads, std::int64_t head_dim, int threads) {
  detail::require(seq >= 1 && seq <= 65536, "bench attention: --seq ", seq, " must be in [1, 65536]");
  detail::require(heads >= 1 && heads <= 1024, "bench attention: --heads ", heads, " must be in [1, 1024]");
  detail::require(head_dim >= 1 && head_dim <= 4096, "bench attention: --head-dim ", head_dim, " must be in [1, 4096]");
  detail::require(threads >= 1 && threads <= 1024, "bench attention: --threads ", threads, " must be in [1, 1024]");
  constexpr double limit = 2.0 * 1024 * 1024 * 1024;
  const double score_bytes = 4.0 * static_cast<double>(heads) * static_cast<double>(seq) * static_cast<double>(seq);
  const double input_bytes =
      4.0 * 4.0 * static_cast<double>(heads) * static_cast<double>(seq) * static_cast<double>(head_dim);
  detail::require(score_bytes <= limit && input_bytes <= limit, "bench attention: heads ", heads, " x seq ", seq,
                  " x head_dim ", head_dim, " needs more than 2 GiB (scores heads*seq^2 floats)");

  const auto shape = AttentionShape::self(1, heads, seq, head_dim);
  std::vector<float> q(static_cast<std::size_t>(shape.q_size())), k(static_cast<std::size_t>(shape.kv_size())),
      v(static_cast<std::size_t>(shape.kv_size())), out(q.size());
  std::mt19937 gen(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = dist(gen);

  const int saved = detail::thread_setting();
  struct Restore {
    int saved;
    ~Restore() { detail::thread_setting() = saved; }
  } restore{saved};
  set_num_threads(threads);

  using Clock = std::chrono::steady_clock;
  const auto time_one = [&](bool fused) {
    const auto t0 = Clock::now();
    if (fused)
      attention_fused(q.data(), k.data(), v.data(), nullptr, out.data(), shape);
    else
      attention_naive(q.data(), k.data(), v.data(), nullptr, out.data(), shape);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  time_one(true);  // warm-up: page in buffers and workspaces
  time_one(false);
  double best_fused = 1e300, best_naive = 1e300, total = 0;
  for (int run = 0; run < 50 && (run < 5 || total < 1.0); ++run) {
    const double f = time_one(true), n = time_one(false);
    best_fused = std::min(best_fused, f);
    best_naive = std::min(best_naive, n);
    total += f + n;
  }
  const auto num = [](double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", x);
    return std::string(buf);
  };
  return "{\"seq\": " + std::to_string(seq) + ", \"heads\": " + std::to_string(heads) +
         ", \"head_dim\": " + std::to_string(head_dim) + ", \"threads\": " + std::to_string(threads) +
         ", \"fused_ms\": " + num(best_fused * 1e3) + ", \"naive_ms\": " + num(best_naive * 1e3) +
         ", \"ratio\": " + num(best_naive / best_fused) + "}";
}

}  // namespace qnum::cli
