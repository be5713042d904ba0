// Atomic file writes: data goes to a temporary file beside the target, is flushed, and is
// renamed over the target only when complete, so a failure never leaves a half-written file
// and never destroys what the user had.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum {

/// Writes `bytes` to `path` atomically (temp file + rename). Throws qnum::Error on failure.
inline void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / (".tmp." + path.filename().string() + "." + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) detail::fail("cannot write '", path.string(), "': cannot create a file in '", dir.string(), "'");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      detail::fail("cannot write '", path.string(), "': write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    detail::fail("cannot write '", path.string(), "': ", ec.message());
  }
}

/// Reads a whole file. Throws qnum::Error if it cannot be opened.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail("cannot open '", path.string(), "'");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return data;
}

}  // namespace qnum
