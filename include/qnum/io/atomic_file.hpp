// Atomic file writes: data goes to a temporary file beside the target, is flushed, and is
// renamed over the target only when complete, so a failure never leaves a half-written file
// and never destroys what the user had. And bounded reads: a whole file or one line, refused
// past a size limit before that much is allocated (a hostile 1 GB line or file).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <istream>
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

/// Reads a whole file. Throws qnum::Error if it cannot be opened or holds more than
/// `max_bytes` (checked on the file's size first, then while reading, for pipes).
inline std::string read_file(const std::filesystem::path& path, std::size_t max_bytes = SIZE_MAX) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail("cannot open '", path.string(), "'");
  const auto too_large = [&] {
    detail::fail("'", path.string(), "' is larger than ", max_bytes, " bytes; refused (not the file expected?)");
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::string data;
  if (!ec) {
    if (size > max_bytes) too_large();
    data.reserve(static_cast<std::size_t>(size));
  }
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n > max_bytes - data.size()) too_large();
    data.append(buf, n);
  }
  return data;
}

/// Reads one line of `in` into `line` (without its '\n'); false at the end of the input.
/// A line longer than `max_bytes` is an error naming `where` (the file and line number),
/// raised after reading at most that many bytes of it.
inline bool read_line(std::istream& in, std::string& line, std::size_t max_bytes, const std::string& where) {
  line.clear();
  auto* buf = in.rdbuf();
  int c = std::char_traits<char>::eof();
  bool any = false;
  while ((c = buf->sbumpc()) != std::char_traits<char>::eof()) {
    any = true;
    if (c == '\n') return true;
    if (line.size() == max_bytes)
      detail::fail(where, ": line longer than ", max_bytes, " bytes; refused (not the file expected?)");
    line.push_back(static_cast<char>(c));
  }
  return any;
}

}  // namespace qnum
