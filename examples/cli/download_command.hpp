// `qnum download DATASET [--dir DIR]`: fetches a dataset's published file into the data
// cache (or DIR), checksum-verified and written atomically (qnum/data/download.hpp), then
// prints where it is. Known: jsc (OpenML 42468, ARFF). jsc-synthetic needs no download.
#pragma once

#include <filesystem>
#include <iostream>
#include <string>

#include "qnum/core/error.hpp"
#include "qnum/data/download.hpp"

namespace qnum::cli {

/// Downloads `name` into `dir` (empty: the cache) and prints the file's path.
inline void download_dataset(const std::string& name, const std::string& dir) {
  if (name == "jsc-synthetic")
    qnum::detail::fail("dataset 'jsc-synthetic' is generated, not downloaded (use it directly)");
  qnum::detail::require(name == "jsc", "download: unknown dataset '", name, "' (known: jsc)");
  data::JscDownloadOptions o;
  o.dir = dir;
  const auto path = data::download_jsc(o);
  std::cout << path.string() << "\n";
}

}  // namespace qnum::cli
