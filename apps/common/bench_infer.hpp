// `qnum bench infer`: BERT classifier inference, timed per weight format in one run — an
// eval-mode forward without gradients of batch x seq random token ids (no padding) to the
// logits. The same work as bench/infer_baseline.py, whose engines (PyTorch fp32, PyTorch's
// quantize_dynamic, ONNX Runtime fp32 and dynamic int8) give the ratios of docs/perf.md.
// Formats: fp32 (the float model); int8 (MASE's 8-bit integer on every Linear — data_in 8/4,
// weight 8/7, bias 8/5 — packed W8A8: nn/packed_int8_linear.hpp); mxint8 (lab 4's packed
// mase-cuda MXINT8 weights, nn/packed_linear.hpp). Like transformers, qnum's classifier needs
// the last layer's [CLS] row only and computes just that (BertModel::encode_first_token).
#pragma once

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qnum/core/error.hpp>
#include <qnum/core/heap.hpp>
#include <qnum/kernel/amx.hpp>
#include <qnum/kernel/threading.hpp>
#include <qnum/models/bert.hpp>
#include <qnum/models/bert_packed.hpp>
#include <qnum/passes/quantize.hpp>

#include "common/bench_train.hpp"

namespace qnum::cli {

struct InferBenchRow {
  std::string format;
  double median_ms = 0, min_ms = 0, tokens_per_s = 0;
  std::size_t linear_weight_bytes = 0;  ///< what the Linears' weights take (fp32 or packed)
  double max_abs_logit_diff = -1;       ///< against the fp32 model's logits (-1: fp32 not run first)
};

struct InferBenchResult {
  std::string model;
  std::int64_t batch = 0, seq = 0;
  int threads = 1, steps = 0;
  bool amx = false;
  std::vector<InferBenchRow> rows;
};

/// MASE's 8-bit integer config on every Linear (examples/configs/bert_int8_qat.toml).
inline nlohmann::json int8_linear_config() {
  return nlohmann::json::parse(R"({"by": "type", "default": {"config": {"name": "NA"}},
      "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
                            "weight_frac_width": 7, "bias_width": 8, "bias_frac_width": 5}}})");
}

/// Times `steps` forwards of `model` (bert-tiny ... bert-base, bert:L-H-A-I; random weights,
/// seed 0) per format in `formats` ("fp32,int8,mxint8"), after `warmup` untimed ones.
inline InferBenchResult bench_infer(const std::string& model, const std::string& formats, std::int64_t batch,
                                    std::int64_t seq, int threads, int steps = 5, int warmup = 1) {
  qnum::detail::require(batch >= 1 && batch <= 4096, "bench infer: --batch ", batch, " must be in [1, 4096]");
  qnum::detail::require(seq >= 1 && seq <= 512, "bench infer: --seq ", seq, " must be in [1, 512]");
  qnum::detail::require(threads >= 1 && threads <= 1024, "bench infer: --threads ", threads, " must be in [1, 1024]");
  qnum::detail::require(steps >= 1 && warmup >= 0, "bench infer: --steps must be >= 1");
  std::vector<std::string> names;
  std::stringstream ss(formats);
  for (std::string f; std::getline(ss, f, ',');) {
    qnum::detail::require(f == "fp32" || f == "int8" || f == "mxint8", "bench infer: unknown format '", f,
                          "' (known: fp32, int8, mxint8)");
    names.push_back(f);
  }
  qnum::detail::require(!names.empty(), "bench infer: --formats names no format");
  retain_freed_memory();
  const int saved_threads = num_threads();
  set_num_threads(threads);
  const std::vector<std::int64_t> ids = detail::bench_token_ids(batch, seq);
  const std::vector<std::int64_t> mask(static_cast<std::size_t>(batch * seq), 1);
  const models::BertInput input{batch, seq, ids, mask, {}};
  autograd::NoGradGuard no_grad;

  InferBenchResult r{model, batch, seq, threads, steps, kernel::amx_enabled(), {}};
  std::vector<float> reference;  // the fp32 model's logits
  for (const auto& f : names) {
    auto m = models::make_bert_model(model, 0);
    m->eval();
    InferBenchRow row{f};
    if (f == "int8") {
      passes::quantize(*m, int8_linear_config());
      row.linear_weight_bytes = models::pack_bert_linears_int8(*m).packed_bytes;
    } else if (f == "mxint8") {
      row.linear_weight_bytes = models::pack_bert_linears_mxint8(*m, Device::cpu()).packed_bytes;
    } else {
      row.linear_weight_bytes = models::bert_weight_bytes(*m).linear_weights;
    }
    std::vector<double> wall;
    Tensor logits;
    for (int s = 0; s < warmup + steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      logits = m->forward(input);
      if (s >= warmup) wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    }
    const auto v = logits.values();
    if (reference.empty()) {
      if (f == "fp32") reference.assign(v.begin(), v.end());
    } else {
      row.max_abs_logit_diff = 0;
      for (std::size_t i = 0; i < v.size(); ++i)
        row.max_abs_logit_diff = std::max(row.max_abs_logit_diff, std::abs(double(v[i]) - reference[i]));
    }
    for (const float x : v) qnum::detail::require(std::isfinite(x), "bench infer: ", f, " logits are not finite");
    row.median_ms = detail::median_of(wall);
    row.min_ms = *std::min_element(wall.begin(), wall.end());
    row.tokens_per_s = static_cast<double>(batch * seq) / (row.median_ms * 1e-3);
    r.rows.push_back(row);
  }
  set_num_threads(saved_threads);
  return r;
}

/// {"model", "batch", "seq", "threads", "steps", "amx", "rows": [{"format", "median_ms", "min_ms",
///  "tokens_per_s", "linear_weight_bytes", "max_abs_logit_diff"}]} (the diff only when fp32 ran first).
inline std::string bench_infer_json(const InferBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"format", x.format},
                    {"median_ms", x.median_ms},
                    {"min_ms", x.min_ms},
                    {"tokens_per_s", x.tokens_per_s},
                    {"linear_weight_bytes", x.linear_weight_bytes},
                    {"max_abs_logit_diff", x.max_abs_logit_diff < 0 ? nlohmann::json() : nlohmann::json(x.max_abs_logit_diff)}});
  nlohmann::json j = {{"model", r.model}, {"batch", r.batch}, {"seq", r.seq}, {"threads", r.threads},
                      {"steps", r.steps}, {"amx", r.amx},     {"rows", rows}};
  return j.dump();
}

/// The same as a table for people.
inline std::string bench_infer_table(const InferBenchResult& r) {
  std::ostringstream o;
  o << r.model << ", batch " << r.batch << " x " << r.seq << " tokens, " << r.threads << " thread(s), median of "
    << r.steps << (r.amx ? ", AMX" : ", no AMX") << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-8s %12s %12s %12s %14s %12s\n", "format", "ms/batch", "min ms", "tokens/s",
                "Linear MiB", "max |dlogit|");
  o << line;
  for (const auto& x : r.rows) {
    std::snprintf(line, sizeof line, "%-8s %12.2f %12.2f %12.0f %14.2f %12.3g\n", x.format.c_str(), x.median_ms,
                  x.min_ms, x.tokens_per_s, static_cast<double>(x.linear_weight_bytes) / (1 << 20),
                  x.max_abs_logit_diff);
    o << line;
  }
  return o.str();
}

}  // namespace qnum::cli
