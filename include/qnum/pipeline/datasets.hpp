// The datasets the commands know by name, as train/validation/test splits: feature tables
// (below) and text (data::load_text_dataset: imdb, text-synthetic), and with_splits, which
// loads whichever a model takes.
//   jsc            the real JSC set through the data layer (QNUM_DATA_DIR or the cache;
//                  its error says what file to put where when it is missing)
//   jsc-synthetic  the seeded offline JSC-like set, always generated with data seed 0, so
//                  `qnum test` sees the same test split as the run that trained the model
//                  whatever the run's --seed (which seeds the model and the batch order)
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/data/text.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum::pipeline {

inline std::vector<std::string> dataset_names() { return {"jsc", "jsc-synthetic"}; }

/// The splits of dataset `name`; qnum::Error for unknown names (listing the known ones) and
/// for missing or malformed data files.
inline data::JscSplits load_dataset(const std::string& name) {
  if (name == "jsc") return data::load_jsc();
  if (name == "jsc-synthetic") return data::make_jsc_synthetic();
  std::string known;
  for (const auto& n : dataset_names()) known += (known.empty() ? "" : ", ") + n;
  qnum::detail::fail("unknown dataset '", name, "' (known: ", known,
                     "; the text datasets imdb and text-synthetic are for BERT models)");
}

/// The input kind of dataset `name`: tokenized text for the text datasets, else feature rows.
inline InputKind dataset_input(const std::string& name) {
  return name == "imdb" || name == "text-synthetic" || name == "imdb-synthetic" ? InputKind::tokens
                                                                                : InputKind::features;
}

/// qnum::Error when model `model` cannot take dataset `dataset` (names both kinds).
inline void require_matching_data(const std::string& model, const std::string& dataset) {
  const InputKind m = model_spec(model).input, d = dataset_input(dataset);
  qnum::detail::require(m == d, "model '", model, "' takes ", kind_name(m), " but dataset '", dataset, "' holds ",
                        kind_name(d), m == InputKind::tokens ? " (text datasets: imdb, text-synthetic)"
                                                                             : " (feature datasets: jsc, jsc-synthetic)");
}

/// qnum::Error when the checkpoint `path` (metadata `meta`) was saved from another model
/// than `model`, naming what it holds and what was asked. Files without qnum metadata
/// (e.g. Hugging Face weights) pass: their tensors are checked when they load.
inline void require_checkpoint_of(const std::string& model, const std::string& path, const nlohmann::json& meta) {
  const std::string held = meta.value("model", std::string());
  if (held.empty() || held == model) return;
  const ModelSpec* spec = find_model(held);
  qnum::detail::fail("checkpoint '", path, "' holds model '", held, "'",
                     spec ? std::string(" (") + kind_name(spec->input) + ")" : std::string(), ", not '", model,
                     "' (", kind_name(model_spec(model).input), "): give MODEL ", held);
}

/// What a checkpoint of a feature model records so that `qnum predict` feeds raw rows to it
/// as its training rows were fed: the feature names, the training split's standardisation
/// (mean and scale per feature) and the class names.
inline nlohmann::json feature_metadata(const data::JscSplits& d) {
  nlohmann::json names = nlohmann::json::array(), labels = nlohmann::json::array();
  for (const auto n : data::kJscFeatureNames) names.push_back(std::string(n));
  for (const auto n : data::kJscClassNames) labels.push_back(std::string(n));
  return {{"features", {{"names", names}, {"mean", d.scaler.mean}, {"scale", d.scaler.scale}}}, {"labels", labels}};
}

/// The text splits of `name` tokenized to max_length (limit > 0: rows per split).
inline data::TextSplits load_text_splits(const std::string& name, std::int64_t max_length, std::int64_t limit,
                                         const std::filesystem::path& vocab = {}) {
  data::ImdbOptions io;
  io.max_length = max_length;
  io.limit = limit;
  io.vocab = vocab;
  data::TextSyntheticOptions so;
  if (limit > 0) {
    so.train = std::min(so.train, limit);
    so.val = std::min(so.val, limit);
    so.test = std::min(so.test, limit);
  }
  return data::load_text_dataset(name, io, so);
}

/// The vocab.txt beside a pretrained checkpoint (a downloaded HF folder), if there is one.
inline std::filesystem::path vocab_beside(const std::string& load) {
  if (load.empty()) return {};
  const auto v = std::filesystem::path(load).parent_path() / "vocab.txt";
  return std::filesystem::is_regular_file(v) ? v : std::filesystem::path();
}

/// The tokens per text of a run on a checkpoint: `given` when > 0, else what the checkpoint's
/// run used (its recipe's max_length), else 512.
inline std::int64_t run_max_length(const nlohmann::json& meta, std::int64_t given) {
  if (given > 0) return given;
  if (meta.contains("config") && meta["config"].is_object() && meta["config"].contains("max_length") &&
      meta["config"]["max_length"].is_number_integer() && meta["config"]["max_length"].get<std::int64_t>() >= 2)
    return meta["config"]["max_length"].get<std::int64_t>();
  return 512;
}

/// Calls fn(splits) with dataset `name`'s splits in the form `input` takes: data::JscSplits of
/// feature rows, or data::TextSplits tokenized to `max_length` (at most `limit` rows per split
/// when > 0; the vocab.txt beside checkpoint `load` when there is one).
template <class Fn>
decltype(auto) with_splits(InputKind input, const std::string& name, std::int64_t max_length,
                           std::int64_t limit, const std::string& load, Fn&& fn) {
  if (input == InputKind::features) return fn(load_dataset(name));
  return fn(load_text_splits(name, max_length, limit, vocab_beside(load)));
}

}  // namespace qnum::pipeline
