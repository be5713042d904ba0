// The objective of a mixed-precision search (spec/system.md §7.2 without MASE's pitfalls):
// each trial quantizes a FRESH copy of the base model with the config its space drew,
// optionally fine-tunes it (compression-aware search), and measures it anew — accuracy and
// loss on the evaluation split (the validation split; test stays for the final report),
// model bits (passes::model_size), average bits per parameter and BitOPs of a traced batch
// (passes::cost), and MASE's memory_density (compare_to / average_bitwidth, its
// hw_runner.average_bitwidth). Metrics are combined per objective as MASE's `metrics`
// tables say: one value per metric (multi-objective) or a scaled sum (single objective).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/models/forward.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/passes/cost.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/trace.hpp"
#include "qnum/search/storage.hpp"
#include "qnum/train/evaluate.hpp"
#include "qnum/train/trainer.hpp"

namespace qnum::search {

/// What one trial measured.
struct QuantizedMetrics {
  double accuracy = 0, loss = 0;
  double bits = 0, float32_bits = 0, parameters = 0;
  double bitops = 0;  ///< forward BitOPs of the traced batch
  std::size_t quantized_layers = 0;
  double compare_to = 32;  ///< the bit width memory_density compares to (MASE's compare_to)
  double average_bitwidth() const { return parameters > 0 ? bits / parameters : 0.0; }
  double memory_density() const { return bits > 0 ? compare_to / average_bitwidth() : 0.0; }
  /// A metric by name: accuracy, loss, bits (alias model_size), average_bitwidth, bitops,
  /// size_ratio (bits / float32 bits), memory_density. Unknown names are errors listing these.
  double get(const std::string& name) const {
    if (name == "accuracy") return accuracy;
    if (name == "loss") return loss;
    if (name == "bits" || name == "model_size") return bits;
    if (name == "average_bitwidth") return average_bitwidth();
    if (name == "bitops") return bitops;
    if (name == "size_ratio") return float32_bits > 0 ? bits / float32_bits : 0.0;
    if (name == "memory_density") return memory_density();
    qnum::detail::fail("unknown metric '", name, "' (known: ", metric_names_text(), ")");
  }
  static std::string metric_names_text() {
    return "accuracy, loss, bits, model_size, average_bitwidth, bitops, size_ratio, memory_density";
  }
  nlohmann::json to_json() const {
    return {{"accuracy", accuracy},
            {"loss", loss},
            {"bits", bits},
            {"float32_bits", float32_bits},
            {"bitops", bitops},
            {"average_bitwidth", average_bitwidth()},
            {"memory_density", memory_density()},
            {"quantized_layers", quantized_layers}};
  }
  /// MASE's split of a trial's metrics: what its software runners (accuracy, loss) and its
  /// hardware runners (the rest) measure.
  nlohmann::json software_metrics() const { return {{"accuracy", accuracy}, {"loss", loss}}; }
  nlohmann::json hardware_metrics() const {
    return {{"average_bitwidth", average_bitwidth()}, {"memory_density", memory_density()}, {"bits", bits},
            {"bitops", bitops}};
  }
};

/// One objective metric: its name, direction and scale (MASE's [metrics.<name>] table).
struct Metric {
  std::string name;
  StudyDirection direction = StudyDirection::maximize;
  double scale = 1.0;
};

/// The study's directions: one per metric, or `direction` alone for a scaled sum.
inline std::vector<StudyDirection> objective_directions(const std::vector<Metric>& metrics, bool sum_scaled,
                                                        StudyDirection direction = StudyDirection::maximize) {
  qnum::detail::require(!metrics.empty(), "search: no objective metrics");
  if (sum_scaled) return {direction};
  std::vector<StudyDirection> d;
  for (const auto& m : metrics) d.push_back(m.direction);
  return d;
}

/// Each metric's scale·metric, by name (MASE's scaled_metrics).
inline nlohmann::json scaled_metrics(const QuantizedMetrics& r, const std::vector<Metric>& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& m : metrics) out[m.name] = m.scale * r.get(m.name);
  return out;
}

/// The objective values of `r`: scale·metric each, or (sum_scaled) one sum for a study in
/// `direction`: + scale·metric for a metric whose direction is the study's, − otherwise, so
/// a metric to minimize never pulls a maximized sum its way (MASE adds them all with +).
inline std::vector<double> objective_values(const QuantizedMetrics& r, const std::vector<Metric>& metrics,
                                            bool sum_scaled, StudyDirection direction = StudyDirection::maximize) {
  std::vector<double> v;
  double sum = 0;
  for (const auto& m : metrics) {
    const double x = m.scale * r.get(m.name);
    v.push_back(x);
    sum += m.direction == direction ? x : -x;
  }
  if (sum_scaled) return {sum};
  return v;
}

/// Measures quantize configs on fresh copies of a base model, on a split of `Data`: feature
/// rows (data::Dataset, QuantizedEvaluator) or tokenized text (data::TokenDataset,
/// TextQuantizedEvaluator; forward_of gives BERT's forward).
template <class Data>
struct BasicQuantizedEvaluator {
  std::function<std::shared_ptr<nn::Module>()> fresh_model;  ///< a new model holding the base state
  /// The forward of a model fresh_model built; null: the module maps feature rows to logits.
  std::function<models::Forward(const std::shared_ptr<nn::Module>&)> forward_of;
  const Data* eval = nullptr;                                ///< accuracy/loss split (validation)
  std::int64_t batch_size = 1024;                            ///< evaluation batch
  Tensor example;  ///< the input traced for BitOPs (feature rows, or token ids [texts, tokens])
  double compare_to = 32;   ///< memory_density's reference width
  int finetune_epochs = 0;  ///< > 0: QAT per trial (needs train)
  const Data* train = nullptr;  ///< the fine-tuning rows (the caller's subset for MASE's num_samples)
  train::TrainConfig finetune;  ///< fine-tuning settings (max_epochs and output_dir set per trial)

  /// Quantizes a fresh model with `qconfig`, fine-tunes it into `run_dir` when asked, and
  /// measures it. The model is returned through `out` when given.
  QuantizedMetrics operator()(const nlohmann::json& qconfig, const std::filesystem::path& run_dir = {},
                              std::shared_ptr<nn::Module>* out = nullptr) const {
    qnum::detail::require(fresh_model && eval != nullptr, "QuantizedEvaluator: no model or evaluation split");
    auto model = fresh_model();
    const models::Forward forward = forward_of ? forward_of(model) : models::features_forward(model);
    const auto report = passes::quantize(*model, qconfig);
    QuantizedMetrics r;
    r.quantized_layers = report.changed();
    r.compare_to = compare_to;
    if (finetune_epochs > 0) {
      qnum::detail::require(train != nullptr, "QuantizedEvaluator: fine-tuning needs the training split");
      qnum::detail::require(!run_dir.empty(), "QuantizedEvaluator: fine-tuning needs a run directory");
      auto c = finetune;
      c.max_epochs = finetune_epochs;
      c.output_dir = run_dir.string();
      train::Trainer t(model, forward, c);
      t.fit(*train, *eval);
      model->to(Device::cpu());  // measured (and traced) on the host
    }
    const auto e = train::evaluate(*model, forward, *eval, batch_size);
    r.accuracy = e.accuracy;
    r.loss = e.loss;
    const auto size = passes::model_size(*model);
    r.bits = size.bits;
    r.float32_bits = size.float32_bits;
    r.parameters = static_cast<double>(size.parameters);
    if (example.defined())
      r.bitops = passes::cost(passes::trace(*model, example)).total(&passes::CostRow::bitops_forward);
    if (out) *out = model;
    return r;
  }
};

using QuantizedEvaluator = BasicQuantizedEvaluator<data::Dataset>;
using TextQuantizedEvaluator = BasicQuantizedEvaluator<data::TokenDataset>;

}  // namespace qnum::search
