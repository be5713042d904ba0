// Atomic file writes: data goes to a temporary file beside the target, is flushed, and is
// renamed over the target only when complete, so a failure never leaves a half-written file
// and never destroys what the user had. A writer killed mid-write leaves its temporary file
// (`.tmp.<name>.<host>.<pid>.<random>`); the next write of the same target on that host
// removes those of writers no longer alive (never a live writer's, e.g. another worker's).
// write_directory_atomic does the same for a folder. And bounded reads: a whole file or one line, refused
// past a size limit before that much is allocated (a hostile 1 GB line or file).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <random>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum {

namespace detail {

/// The start of this host's temporary file names for `path`: `.tmp.<name>.<host>.`.
inline std::string temp_prefix(const std::filesystem::path& path) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return ".tmp." + path.filename().string() + "." + host + ".";
}

/// Removes the temporary files of `path` in `dir` left by writers on this host that were
/// killed mid-write (their process no longer exists). Best effort: errors are ignored.
inline void remove_stale_temps(const std::filesystem::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 9) continue;
    const std::string digits = name.substr(prefix.size(), dot - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

}  // namespace detail

/// Writes `bytes` to `path` atomically (temp file + rename). Throws qnum::Error on failure.
inline void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::random_device rd;
  const std::string prefix = detail::temp_prefix(path);
  const fs::path tmp = dir / (prefix + std::to_string(::getpid()) + "." + std::to_string(rd()));
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
  detail::remove_stale_temps(dir, prefix);
}

/// Writes a folder atomically: `fill(tmp)` writes its files into a fresh temporary folder
/// beside `dir`, which is renamed to `dir` only when fill returns. An existing `dir` is a
/// qnum::Error unless `replace`; then the old folder is moved aside, the new one renamed in and
/// the old one removed, so `dir` is never half-written (a kill between the two renames leaves
/// the old folder beside it as `.tmp.<name>.<host>.<pid>.old`, removed by the next write).
inline void write_directory_atomic(const std::filesystem::path& dir, bool replace,
                                   const std::function<void(const std::filesystem::path&)>& fill) {
  namespace fs = std::filesystem;
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(dir, ec));
  detail::require(!exists || replace, "output folder '", dir.string(), "' exists (pass --force to replace it)");
  detail::require(!exists || fs::is_directory(dir, ec), "output '", dir.string(), "' exists and is not a folder");
  fs::create_directories(parent, ec);
  detail::require(!ec, "cannot create '", parent.string(), "': ", ec.message());
  const std::string prefix = detail::temp_prefix(dir);
  detail::remove_stale_temps(parent, prefix);
  std::random_device rd;
  const std::string stem = prefix + std::to_string(::getpid()) + "." + std::to_string(rd());
  const fs::path tmp = parent / stem, old = parent / (stem + ".old");
  fs::create_directory(tmp, ec);
  detail::require(!ec, "cannot write '", dir.string(), "': cannot create a folder in '", parent.string(), "'");
  try {
    fill(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (exists) {
    fs::rename(dir, old, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      detail::fail("cannot replace '", dir.string(), "': ", ec.message());
    }
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    if (exists) fs::rename(old, dir, ec);
    fs::remove_all(tmp, ec);
    detail::fail("cannot write '", dir.string(), "': ", why);
  }
  if (exists) fs::remove_all(old, ec);
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
