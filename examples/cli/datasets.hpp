// The datasets `qnum train` and `qnum test` know by name, as train/validation/test splits.
//   jsc            the real JSC set through the data layer (QNUM_DATA_DIR or the cache;
//                  its error says what file to put where when it is missing)
//   jsc-synthetic  the seeded offline JSC-like set, always generated with data seed 0, so
//                  `qnum test` sees the same test split as the run that trained the model
//                  whatever the run's --seed (which seeds the model and the batch order)
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/models/registry.hpp"

namespace qnum::cli {

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
inline models::InputKind dataset_input(const std::string& name) {
  return name == "imdb" || name == "text-synthetic" || name == "imdb-synthetic" ? models::InputKind::tokens
                                                                                : models::InputKind::features;
}

/// qnum::Error when model `model` cannot take dataset `dataset` (names both kinds).
inline void require_matching_data(const std::string& model, const std::string& dataset) {
  const models::InputKind m = models::model_spec(model).input, d = dataset_input(dataset);
  qnum::detail::require(m == d, "model '", model, "' takes ", models::kind_name(m), " but dataset '", dataset, "' holds ",
                        models::kind_name(d), m == models::InputKind::tokens ? " (text datasets: imdb, text-synthetic)"
                                                                             : " (feature datasets: jsc, jsc-synthetic)");
}

/// qnum::Error when the checkpoint `path` (metadata `meta`) was saved from another model
/// than `model`, naming what it holds and what was asked. Files without qnum metadata
/// (e.g. Hugging Face weights) pass: their tensors are checked when they load.
inline void require_checkpoint_of(const std::string& model, const std::string& path, const nlohmann::json& meta) {
  const std::string held = meta.value("model", std::string());
  if (held.empty() || held == model) return;
  const models::ModelSpec* spec = models::find_model(held);
  qnum::detail::fail("checkpoint '", path, "' holds model '", held, "'",
                     spec ? std::string(" (") + models::kind_name(spec->input) + ")" : std::string(), ", not '", model,
                     "' (", models::kind_name(models::model_spec(model).input), "): give MODEL ", held);
}

}  // namespace qnum::cli
