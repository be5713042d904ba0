// The datasets `qnum train` and `qnum test` know by name, as train/validation/test splits.
//   jsc            the real JSC set through the data layer (QNUM_DATA_DIR or the cache;
//                  its error says what file to put where when it is missing)
//   jsc-synthetic  the seeded offline JSC-like set, always generated with data seed 0, so
//                  `qnum test` sees the same test split as the run that trained the model
//                  whatever the run's --seed (which seeds the model and the batch order)
#pragma once

#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/jsc.hpp"

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

/// Every model name the CLI knows, for messages: the JSC zoo, then BERT's.
inline std::string known_models_text() {
  std::string s;
  for (const auto& n : models::jsc_model_names()) s += (s.empty() ? "" : ", ") + n;
  s += "; BERT:";
  for (const auto& n : models::bert_model_names()) s += " " + n;
  return s;
}

/// qnum::Error naming the known models when `name` is neither a JSC nor a BERT model.
inline void require_known_model(const std::string& name) {
  if (models::is_bert_model(name)) return;
  try {
    models::make_jsc_model(name, 0);
  } catch (const qnum::Error& e) {
    qnum::detail::fail("unknown model '", name, "' (known: ", known_models_text(), ")",
                       name == "jsc-m" ? "; MASE has no jsc-m: give the widths, e.g. jsc-mlp:16-64-32-32-5" : "");
  }
}

}  // namespace qnum::cli
