// Shared pieces of the dataset tests: where the committed dataset fixtures are, and a
// scratch file with given contents.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace qnum_test {

/// tests/fixtures/datasets (made by the scripts beside the fixtures).
inline const std::filesystem::path kDatasetFixtures =
    std::filesystem::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "datasets";

/// Writes text to <temp dir>/name (replacing it) and returns the path.
inline std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

}  // namespace qnum_test
