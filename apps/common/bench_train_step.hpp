// `qnum bench train-step`: one BERT training step, timed — forward + cross-entropy + backward
// + grad-norm clipping (1.0) + AdamW (lr 1e-4), on random token ids of batch x seq with no
// padding, in the products' precision asked for (tensor/precision.hpp). The same work as
// bench/torch_bert_baseline.py (--model, --autocast bf16 for PyTorch's CPU autocast), so the
// two give a ratio. Median of `steps` steps after `warmup`, wall and process CPU time.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qnum/core/error.hpp>
#include <qnum/core/heap.hpp>
#include <qnum/core/rng.hpp>
#include <qnum/kernel/gemm.hpp>
#include <qnum/kernel/threading.hpp>
#include <qnum/models/bert.hpp>
#include <qnum/tensor/precision.hpp>
#include <qnum/train/recipe.hpp>

#include "common/bench_train.hpp"

namespace qnum::cli {

struct TrainStepBenchResult {
  std::string model, precision, engine;
  std::int64_t batch = 0, seq = 0, params = 0;
  int threads = 1, steps = 0;
  double median_ms = 0, median_cpu_ms = 0, loss = 0;
};

/// Times `steps` training steps of `model` (a BERT name: bert-tiny ... bert-base, bert:L-H-A-I)
/// after `warmup` untimed ones. Bad arguments throw qnum::Error naming them.
inline TrainStepBenchResult bench_train_step(const std::string& model, std::int64_t batch, std::int64_t seq,
                                             const std::string& precision, int threads, int steps = 5,
                                             int warmup = 1) {
  const Precision p = parse_precision(precision);
  qnum::detail::require(batch >= 1 && batch <= 4096, "bench train-step: --batch ", batch, " must be in [1, 4096]");
  qnum::detail::require(seq >= 1 && seq <= 512, "bench train-step: --seq ", seq, " must be in [1, 512]");
  qnum::detail::require(threads >= 1 && threads <= 1024, "bench train-step: --threads ", threads,
                        " must be in [1, 1024]");
  qnum::detail::require(steps >= 1 && warmup >= 0, "bench train-step: --steps must be >= 1");
  retain_freed_memory();
  const int saved_threads = num_threads();
  set_num_threads(threads);
  auto m = models::make_bert_model(model, 0);
  m->train();
  auto opt = train::make_optimizer("adamw", m->parameters(), 1e-4, 0.0);
  std::vector<Tensor> params = m->parameters();
  const std::vector<std::int64_t> ids = detail::bench_token_ids(batch, seq);
  std::vector<std::int64_t> mask(static_cast<std::size_t>(batch * seq), 1), labels;
  for (std::int64_t i = 0; i < batch; ++i) labels.push_back(i % 2);

  TrainStepBenchResult r;
  r.model = model;
  r.precision = std::string(to_string(p));
  r.engine = p == Precision::bf16 ? bf16_engine() : "fp32 GEMM";
  r.batch = batch;
  r.seq = seq;
  r.threads = threads;
  r.steps = steps;
  for (const auto& t : params) r.params += t.numel();
  const PrecisionScope scope(p);
  std::vector<double> wall, cpu;
  for (int s = 0; s < warmup + steps; ++s) {
    const double c0 = detail::process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    opt->zero_grad();
    const Tensor loss = cross_entropy(m->forward(models::BertInput{batch, seq, ids, mask, {}}), labels);
    loss.backward();
    train::clip_grad_norm(params, 1.0);
    opt->step();
    r.loss = loss.item();
    if (s < warmup) continue;
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    cpu.push_back((detail::process_cpu_seconds() - c0) * 1e3);
  }
  set_num_threads(saved_threads);
  r.median_ms = detail::median_of(wall);
  r.median_cpu_ms = detail::median_of(cpu);
  qnum::detail::require(std::isfinite(r.loss), "bench train-step: the loss became ", r.loss);
  return r;
}

/// {"model", "precision", "engine", "batch", "seq", "threads", "params", "steps", "median_ms",
///  "median_cpu_ms", "loss"}.
inline std::string bench_train_step_json(const TrainStepBenchResult& r) {
  nlohmann::json j = {{"model", r.model},   {"precision", r.precision}, {"engine", r.engine},
                      {"batch", r.batch},   {"seq", r.seq},             {"threads", r.threads},
                      {"params", r.params}, {"steps", r.steps},         {"median_ms", r.median_ms},
                      {"median_cpu_ms", r.median_cpu_ms}, {"loss", r.loss}};
  return j.dump();
}

}  // namespace qnum::cli
