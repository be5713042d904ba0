// `qnum bench train`: one training epoch of a JSC model on jsc-synthetic rows, timed, with the
// epoch's peak resident memory. The loop is the Trainer's (train/trainer.hpp) without its
// evaluation and checkpoints: seeded shuffled batches, zero_grad, forward, cross_entropy,
// loss.item(), backward, Adam step. Data generation and model construction are not timed.
// bench/torch_train_baseline.py runs the same model, rows, batch size and optimizer in
// PyTorch and measures memory the same way. Also used by bench/bench_train.cpp.
//
// Peak memory: Linux keeps a high-water mark of the resident set (VmHWM in /proc/self/
// status); writing "5" to /proc/self/clear_refs resets it to the current RSS. It is reset
// right before the epoch and read right after, so peak_rss_mb is the process's largest
// resident set during the epoch (dataset, model and the loop's allocations) and
// epoch_extra_mb = peak_rss_mb - rss_before_mb what the loop itself added on top.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <qnum/core/error.hpp>
#include <qnum/core/rng.hpp>
#include <qnum/data/jsc.hpp>
#include <qnum/kernel/threading.hpp>
#include <qnum/models/jsc.hpp>
#include <qnum/nn/nn.hpp>
#include <qnum/tensor/ops.hpp>

namespace qnum::cli {

/// What one benchmarked epoch measured.
struct TrainBenchResult {
  std::string model;
  std::int64_t rows = 0, batch_size = 0, batches = 0, params = 0;
  int threads = 1;
  double seconds = 0, rows_per_s = 0;
  double cpu_seconds = 0;                       ///< CPU time of the process over the epoch (all threads)
  double rss_before_mb = -1, peak_rss_mb = -1;  ///< -1: not measurable here (no /proc)
  double mean_loss = 0;                         ///< mean training loss of the epoch (a sanity check)
};

namespace detail {

/// A "VmRSS:" / "VmHWM:" line of /proc/self/status in MiB; -1 when unavailable.
inline double proc_status_mb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      std::istringstream is(line.substr(key.size()));
      double kb = -1;
      is >> kb;
      return kb < 0 ? -1 : kb / 1024.0;
    }
  return -1;
}

/// CPU time of the whole process (every thread), in seconds: unlike wall time it does not
/// count the time other programs held this core.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Resets the resident-set high-water mark to the current RSS; false when the kernel lacks it.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

/// The median of `v` (the mean of the middle two for an even count); v not empty.
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// The BERT benchmarks' input: batch·seq token ids in [1000, 30000) from a fixed seed (the
/// same ids as bench/bench_bert.cpp), no padding.
inline std::vector<std::int64_t> bench_token_ids(std::int64_t batch, std::int64_t seq) {
  std::vector<std::int64_t> ids;
  const CounterRng rng(7);
  for (std::int64_t i = 0; i < batch * seq; ++i)
    ids.push_back(1000 + static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(i)) * 29000.0f));
  return ids;
}

}  // namespace detail

/// One epoch of `model` (a JSC model name, see models::make_jsc_model) over `rows`
/// jsc-synthetic rows in batches of `batch_size` with Adam (lr 1e-3) on `threads` threads.
/// Bad arguments throw qnum::Error naming them. Restores the thread setting it changes.
inline TrainBenchResult bench_train(const std::string& model, std::int64_t rows, std::int64_t batch_size, int threads,
                                    std::uint64_t seed = 0) {
  qnum::detail::require(rows >= 1 && rows <= (std::int64_t{1} << 26), "bench train: --rows ", rows,
                        " must be in [1, 67108864]");
  qnum::detail::require(batch_size >= 1, "bench train: --batch-size ", batch_size, " must be >= 1");
  qnum::detail::require(threads >= 1 && threads <= 1024, "bench train: --threads ", threads, " must be in [1, 1024]");
  auto net = models::make_jsc_model(model, seed);
  const auto splits = data::make_jsc_synthetic({.train = rows, .val = 0, .test = 0, .seed = seed});
  const data::Dataset& train = splits.train;

  const int saved_threads = num_threads();
  set_num_threads(threads);
  nn::Adam opt(net->parameters(), nn::AdamOptions{.lr = 1e-3});
  net->train();
  const auto epoch = data::batches(train, {batch_size, true, false, seed}, 0);

  TrainBenchResult r;
  r.model = model;
  r.rows = rows;
  r.batch_size = batch_size;
  r.batches = epoch.size();
  r.threads = threads;
  for (const auto& p : net->parameters()) r.params += p.numel();
  const bool hwm = detail::reset_peak_rss();
  r.rss_before_mb = detail::proc_status_mb("VmRSS:");

  double loss_sum = 0;
  const double c0 = detail::process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < epoch.size(); ++i) {
    const data::Batch b = epoch[i];
    opt.zero_grad();
    const Tensor loss = cross_entropy(net->forward(b.features), b.labels);
    const float lv = loss.item();
    loss.backward();
    opt.step();
    loss_sum += static_cast<double>(lv) * static_cast<double>(b.labels.size());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = detail::process_cpu_seconds() - c0;

  r.peak_rss_mb = hwm ? detail::proc_status_mb("VmHWM:") : -1;
  if (!hwm) r.rss_before_mb = -1;
  r.rows_per_s = static_cast<double>(rows) / r.seconds;
  r.mean_loss = loss_sum / static_cast<double>(rows);
  set_num_threads(saved_threads);
  qnum::detail::require(std::isfinite(r.mean_loss), "bench train: the loss became ", r.mean_loss,
                        " (the measured epoch did not train)");
  return r;
}

/// The result as one JSON object: model, rows, batch_size, batches, params, threads,
/// seconds (wall), cpu_seconds, rows_per_s, peak_rss_mb, rss_before_mb, epoch_extra_mb, mean_loss.
inline std::string bench_train_json(const TrainBenchResult& r) {
  std::ostringstream os;
  os.precision(6);
  const bool mem = r.peak_rss_mb >= 0 && r.rss_before_mb >= 0;
  os << "{\"model\": \"" << r.model << "\", \"rows\": " << r.rows << ", \"batch_size\": " << r.batch_size
     << ", \"batches\": " << r.batches << ", \"params\": " << r.params << ", \"threads\": " << r.threads
     << ", \"seconds\": " << r.seconds << ", \"cpu_seconds\": " << r.cpu_seconds << ", \"rows_per_s\": " << r.rows_per_s
     << ", \"peak_rss_mb\": ";
  if (mem)
    os << r.peak_rss_mb << ", \"rss_before_mb\": " << r.rss_before_mb
       << ", \"epoch_extra_mb\": " << r.peak_rss_mb - r.rss_before_mb;
  else
    os << "null, \"rss_before_mb\": null, \"epoch_extra_mb\": null";
  os << ", \"mean_loss\": " << r.mean_loss << "}";
  return os.str();
}

}  // namespace qnum::cli
