// Helpers of the download tests: a temporary directory, the files under a directory, file://
// URLs, whether curl is installed (EnvGuard and error_of come with it).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "env_guard.hpp"
#include "error_of.hpp"

namespace qnum_test {

namespace fs = std::filesystem;

/// A fresh empty directory under the system temp dir, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("qnum-download-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The regular files under `dir` (recursively), relative to it.
inline std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(fs::relative(e.path(), dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string file_url(const fs::path& p) { return "file://" + fs::absolute(p).string(); }

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Whether a `curl` program is on PATH (the tests that run it are skipped, with a note, if not).
inline bool have_curl() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  std::size_t start = 0;
  while (start <= p.size()) {
    const auto end = std::min(p.find(':', start), p.size());
    if (fs::exists(fs::path(p.substr(start, end - start)) / "curl")) return true;
    start = end + 1;
  }
  MESSAGE("curl not found on PATH: curl-based download tests skipped (apt-get install curl)");
  return false;
}

}  // namespace qnum_test
