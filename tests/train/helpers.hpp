// Shared pieces of the trainer tests: a temporary directory removed on scope exit, a small
// jsc-synthetic set, and bitwise comparison of state dicts.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "qnum/data/jsc.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum_test {

/// A fresh directory under the system temp dir, removed (recursively) when destroyed.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path = std::filesystem::temp_directory_path() /
           ("qnum-train-test-" + tag + "-" + std::to_string(stamp) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// jsc-synthetic with 4000 training and 1000 validation rows (built once).
inline const qnum::data::JscSplits& small_jsc() {
  static const qnum::data::JscSplits s = qnum::data::make_jsc_synthetic({4000, 1000, 1000, 7});
  return s;
}

/// Whether two state dicts have the same keys, shapes and bits.
inline bool same_bits(const std::map<std::string, qnum::Tensor>& a, const std::map<std::string, qnum::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a) {
    const auto it = b.find(k);
    if (it == b.end() || it->second.shape() != t.shape()) return false;
    if (std::memcmp(t.data(), it->second.data(), static_cast<std::size_t>(t.numel()) * sizeof(float)) != 0)
      return false;
  }
  return true;
}

}  // namespace qnum_test
