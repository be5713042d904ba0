// Reading archives with libarchive (tar, tar.gz, zip, ...: whatever libarchive detects):
// extract_archive unpacks one into a directory, read_archive_files reads members into
// memory (torch's zip checkpoints). Only regular files and directories are accepted; an
// absolute name, a ".." component, a link or a device is an error naming the entry, so an
// archive cannot write outside the target directory. Extraction goes to a temporary
// directory beside the target, renamed into place only when every entry was written.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "qnum/core/error.hpp"

namespace qnum {

namespace detail {

/// An open libarchive reader over a file or bytes in memory; errors name the file (or the
/// name given to the bytes).
class ArchiveReader {
 public:
  // The handle is freed by its member's destructor, which also runs when the constructor
  // throws (a file libarchive cannot open; fuzz_archive found the leak of the old ~ArchiveReader).
  explicit ArchiveReader(const std::filesystem::path& path) : ArchiveReader(path.string(), Unopened{}) {
    if (archive_read_open_filename(a_.get(), path_.c_str(), 1 << 16) != ARCHIVE_OK) fail_here("cannot open it");
  }
  /// Over `bytes`, which must outlive the reader.
  ArchiveReader(std::string_view bytes, std::string name) : ArchiveReader(std::move(name), Unopened{}) {
    if (archive_read_open_memory(a_.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) fail_here("cannot open it");
  }

  /// The next entry, or nullptr at the end.
  archive_entry* next() {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(a_.get(), &e);
    if (rc == ARCHIVE_EOF) return nullptr;
    if (rc < ARCHIVE_WARN) fail_here("corrupt or truncated");
    return e;
  }

  /// Streams the current entry's bytes to `sink`.
  void read_data(const std::string& entry, const std::function<void(const char*, std::size_t)>& sink) {
    char buf[1 << 16];
    while (true) {
      const la_ssize_t n = archive_read_data(a_.get(), buf, sizeof buf);
      if (n == 0) return;
      if (n < 0) fail_here("entry '" + entry + "' is corrupt or truncated");
      sink(buf, static_cast<std::size_t>(n));
    }
  }

  /// Adds `n` to the member bytes read so far; an error past `max_bytes`.
  void count(std::size_t n, std::size_t max_bytes) {
    total_ += n;
    require(total_ <= max_bytes, "archive '", path_, "': members decompress to more than ", max_bytes,
            " bytes; refused (an archive bomb, or raise the limit)");
  }

  [[noreturn]] void fail_here(const std::string& what) {
    const char* msg = archive_error_string(a_.get());
    fail("archive '", path_, "': ", what, msg ? std::string(" (") + msg + ")" : std::string());
  }

 private:
  struct Unopened {};
  ArchiveReader(std::string name, Unopened) : path_(std::move(name)), a_(archive_read_new(), &archive_read_free) {
    require(a_ != nullptr, "archive: out of memory opening '", path_, "'");
    archive_read_support_filter_all(a_.get());
    archive_read_support_format_all(a_.get());
  }

  std::string path_;
  std::unique_ptr<archive, decltype(&archive_read_free)> a_;
  std::size_t total_ = 0;
};

/// `name` as a safe relative path, or an error naming the entry.
inline std::filesystem::path safe_entry_path(const std::string& archive, const std::string& name) {
  const std::filesystem::path p(name);
  require(!name.empty() && !p.is_absolute(), "archive '", archive, "': entry '", name,
          "' has an absolute or empty name");
  for (const auto& part : p)
    require(part != "..", "archive '", archive, "': entry '", name, "' leaves the target directory ('..')");
  return p.lexically_normal();
}

}  // namespace detail

/// Largest total of member bytes an archive may unpack to by default (4 GiB: above IMDb's
/// ~500 MB and bert-large's weights, below what a small "zip bomb" would fill).
inline constexpr std::size_t kMaxArchiveBytes = std::size_t{4} << 30;

/// Unpacks the archive at `path` so that its entries end up under `dest` (which must not
/// exist yet; its parent is created). Returns the number of files written. On any error
/// nothing is left at dest. More than `max_bytes` of member data is refused.
inline std::size_t extract_archive(const std::filesystem::path& path, const std::filesystem::path& dest,
                                   std::size_t max_bytes = kMaxArchiveBytes) {
  namespace fs = std::filesystem;
  detail::require(!fs::exists(dest), "extract: '", dest.string(), "' already exists");
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  detail::require(!ec, "extract: cannot create '", dest.parent_path().string(), "': ", ec.message());
  std::random_device rd;
  const fs::path tmp = dest.parent_path() / (".tmp." + dest.filename().string() + "." + std::to_string(rd()));
  std::size_t files = 0;
  try {
    fs::create_directories(tmp);
    detail::ArchiveReader r(path);
    while (archive_entry* e = r.next()) {
      const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
      const fs::path rel = detail::safe_entry_path(path.string(), name);
      const auto type = archive_entry_filetype(e);
      if (type == AE_IFDIR) {
        fs::create_directories(tmp / rel);
        continue;
      }
      detail::require(type == AE_IFREG && archive_entry_hardlink(e) == nullptr, "archive '", path.string(),
                      "': entry '", name, "' is not a regular file or directory (links and devices are refused)");
      fs::create_directories((tmp / rel).parent_path());
      std::ofstream out(tmp / rel, std::ios::binary | std::ios::trunc);
      detail::require(static_cast<bool>(out), "extract: cannot create '", (tmp / rel).string(), "'");
      r.read_data(name, [&](const char* p, std::size_t n) {
        r.count(n, max_bytes);
        out.write(p, static_cast<std::streamsize>(n));
      });
      out.close();
      detail::require(static_cast<bool>(out), "extract: cannot write '", (tmp / rel).string(), "' (disk full?)");
      ++files;
    }
    fs::rename(tmp, dest, ec);
    detail::require(!ec, "extract: cannot move the files into '", dest.string(), "': ", ec.message());
  } catch (const fs::filesystem_error& e) {  // e.g. a file entry and then a directory of that name
    fs::remove_all(tmp, ec);
    detail::fail("extract '", path.string(), "': ", e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return files;
}

namespace detail {
inline std::map<std::string, std::string> read_members(ArchiveReader& r,
                                                       const std::function<bool(std::string_view)>& want,
                                                       std::size_t max_bytes) {
  std::map<std::string, std::string> files;
  while (archive_entry* e = r.next()) {
    const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (archive_entry_filetype(e) != AE_IFREG || !want(name)) continue;
    std::string& bytes = files[name];
    bytes.clear();  // a name repeated in the archive: the last member wins
    r.read_data(name, [&](const char* p, std::size_t n) {
      r.count(n, max_bytes);
      bytes.append(p, n);
    });
  }
  return files;
}
}  // namespace detail

/// The regular files of the archive at `path` whose names `want` accepts, by name; members
/// adding up to more than `max_bytes` are refused. (No memory is reserved from the sizes the
/// headers claim: they are the archive's word, not bytes present.)
inline std::map<std::string, std::string> read_archive_files(const std::filesystem::path& path,
                                                             const std::function<bool(std::string_view)>& want,
                                                             std::size_t max_bytes = kMaxArchiveBytes) {
  detail::ArchiveReader r(path);
  return detail::read_members(r, want, max_bytes);
}

/// read_archive_files over an archive's bytes in memory; `name` names them in errors.
inline std::map<std::string, std::string> read_archive_bytes(std::string_view bytes, std::string name,
                                                             const std::function<bool(std::string_view)>& want,
                                                             std::size_t max_bytes = kMaxArchiveBytes) {
  detail::ArchiveReader r(bytes, std::move(name));
  return detail::read_members(r, want, max_bytes);
}

}  // namespace qnum
