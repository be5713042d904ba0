// Shared by the fuzz harnesses: the rule every parser must keep on any bytes — return, or
// throw qnum::Error with a one-line message. Any other exception, a crash, a sanitizer report
// or a multi-line message is a finding (libFuzzer stops and saves the input).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "qnum/core/error.hpp"

namespace qnum::fuzz {

/// Runs `parse`, accepting a qnum::Error whose message is one non-empty printable line.
template <class F>
void expect_clean(F&& parse) {
  try {
    parse();
  } catch (const qnum::Error& e) {
    const std::string_view m = e.what();
    bool printable = !m.empty();
    for (const char c : m) printable &= static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (!printable) {
      std::fprintf(stderr, "qnum::Error message is not one printable line: '%s'\n", e.what());
      std::abort();
    }
  }
}

/// Fails the run (libFuzzer saves the input) when `cond` is false.
inline void check(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

/// Where harnesses put the files and trees the code under test must read from disk:
/// /dev/shm when writable (tmpfs: rewriting a file per input costs no disk I/O, which on a
/// journaling file system dominates a harness's time), else the temp directory.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
      return std::filesystem::path("/dev/shm");
    return std::filesystem::temp_directory_path();
  }();
  return dir;
}

/// A file holding the input, for readers that take a path; one per process (fuzz jobs run
/// in parallel), reused across runs and removed at exit.
class InputFile {
 public:
  explicit InputFile(std::string_view suffix)
      : path_(scratch_dir() / ("qnum-fuzz-" + std::to_string(::getpid()) + std::string(suffix))) {}
  ~InputFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::filesystem::path path_;
};

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace qnum::fuzz
