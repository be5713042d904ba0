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

namespace qnum::cli {

inline std::vector<std::string> dataset_names() { return {"jsc", "jsc-synthetic"}; }

/// The splits of dataset `name`; qnum::Error for unknown names (listing the known ones) and
/// for missing or malformed data files.
inline data::JscSplits load_dataset(const std::string& name) {
  if (name == "jsc") return data::load_jsc();
  if (name == "jsc-synthetic") return data::make_jsc_synthetic();
  std::string known;
  for (const auto& n : dataset_names()) known += (known.empty() ? "" : ", ") + n;
  qnum::detail::fail("unknown dataset '", name, "' (known: ", known, ")");
}

}  // namespace qnum::cli
