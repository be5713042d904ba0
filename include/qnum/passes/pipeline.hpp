// MASE's CompressionPipeline (spec/system.md §6) from one config: the quantize pass, then
// the prune pass, each only when its section is present. Fine-tuning afterwards is the
// trainer's (qnum transform's [transform] finetune_epochs, or a search objective's).
//
//   {"quantize": {...quantize pass config...}, "prune": {...prune config...}}
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/passes/prune.hpp"
#include "qnum/passes/quantize.hpp"

namespace qnum::passes {

struct CompressReport {
  std::optional<QuantizeReport> quantize;
  std::optional<PruneReport> prune;
};

namespace detail {

/// compress() with the prune pass given `calibrate_prune(prune_config)`.
template <class Prune>
CompressReport compress_with(nn::Module& model, const nlohmann::json& config, const Prune& calibrate_prune) {
  qnum::detail::require(config.is_object(), "compress config must be a table/object, got ", config.dump());
  for (const auto& [key, v] : config.items())
    qnum::detail::require(key == "quantize" || key == "prune", "compress config: unknown section '", key,
                          "' (allowed: quantize, prune)");
  CompressReport r;
  // Parse the prune section before quantizing, so a bad prune config changes nothing.
  std::optional<PruneConfig> prune_cfg;
  if (config.contains("prune")) prune_cfg = parse_prune_config(config["prune"]);
  if (config.contains("quantize")) r.quantize = quantize(model, config["quantize"]);
  if (prune_cfg) r.prune = calibrate_prune(*prune_cfg);
  return r;
}

}  // namespace detail

/// Applies `config`'s quantize and prune sections to `model` in that order (the pipeline's).
/// `calibration` batches feed global activation pruning. Unknown sections are errors.
inline CompressReport compress(nn::Module& model, const nlohmann::json& config,
                               const std::vector<Tensor>& calibration = {}) {
  return detail::compress_with(model, config,
                               [&](const PruneConfig& c) { return prune(model, c, calibration); });
}

/// compress() for models whose inputs are not one tensor (BERT's token batches):
/// `calibrate` runs the model on the calibration batches (see prune()).
inline CompressReport compress(nn::Module& model, const nlohmann::json& config, const std::function<void()>& calibrate) {
  return detail::compress_with(model, config, [&](const PruneConfig& c) { return prune(model, c, calibrate); });
}

}  // namespace qnum::passes
