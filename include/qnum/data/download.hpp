// Dataset downloads: fetch a URL into the cache directory, verify its MD5 and move it into
// place atomically, so a failed, interrupted or corrupted download never leaves a file
// that a later run would read. Fetching is done by the `curl` program (run as a child
// process, no shell), which brings HTTPS, proxies and redirects without a link-time
// dependency of this header-only library (docs/dependencies.md); tests swap in their own
// fetcher. OpenML publishes an MD5 per dataset file in its data description, which is what
// download_openml_jsc checks the JSC file against.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/digest.hpp"
#include "qnum/io/json.hpp"

extern char** environ;

namespace qnum::data {

/// Fetches `url` into the file `out` (created or truncated); throws qnum::Error on failure.
using Fetcher = std::function<void(const std::string& url, const std::filesystem::path& out)>;

/// MD5 of a string as 32 lowercase hex digits.
inline std::string md5_hex(std::string_view s) { return digest_hex<Md5>(s); }

/// MD5 of a file's bytes as 32 lowercase hex digits; qnum::Error if it cannot be read.
inline std::string md5_file(const std::filesystem::path& path) { return digest_file<Md5>(path); }

// ---- fetching ------------------------------------------------------------------------------

namespace detail {

/// The last non-empty line of a (small) text file, e.g. curl's final error message (it
/// prints one per retry); errors stay one line.
inline std::string last_line_of(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last.size() > 500 ? last.substr(0, 500) + "..." : last;
}

/// A fresh temporary path beside `dest` (same directory, so a rename is atomic).
inline std::filesystem::path temp_beside(const std::filesystem::path& dest, std::string_view tag) {
  std::random_device rd;
  return dest.parent_path() / (".tmp." + dest.filename().string() + "." + std::string(tag) + "." +
                               std::to_string(::getpid()) + "." + std::to_string(rd()));
}

}  // namespace detail

/// How curl_download runs: a total to draw progress against and whether to continue a
/// partial file.
struct CurlOptions {
  std::uint64_t total = 0;  ///< expected bytes (0: unknown; the bar then shows bytes only)
  std::string label;        ///< shown before the progress bar (default: the URL's last part)
  bool resume = false;      ///< continue `out` from its current size (HTTP Range / file offset)
};

namespace detail {

/// One progress line on stderr ("\r" redrawn): label, bar, percent, MB done / total.
inline void draw_progress(const std::string& label, std::uint64_t done, std::uint64_t total) {
  char line[200];
  const double mb = 1e-6;
  if (total > 0) {
    const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    std::string bar(30, ' ');
    for (std::size_t i = 0; i < static_cast<std::size_t>(f * 30); ++i) bar[i] = '#';
    std::snprintf(line, sizeof line, "\r%-28.28s [%s] %5.1f%% %8.1f / %.1f MB", label.c_str(), bar.c_str(), 100.0 * f,
                  static_cast<double>(done) * mb, static_cast<double>(total) * mb);
  } else {
    std::snprintf(line, sizeof line, "\r%-28.28s %8.1f MB", label.c_str(), static_cast<double>(done) * mb);
  }
  std::fputs(line, stderr);
  std::fflush(stderr);
}

inline std::uint64_t size_or_zero(const std::filesystem::path& p) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : static_cast<std::uint64_t>(n);
}

}  // namespace detail

/// Runs `curl` (found on PATH) to fetch `url` into `out`: fails on HTTP errors, follows
/// redirects, gives up connecting after 30 s and retries transient failures twice; with
/// o.resume it continues `out` from its size. file:// URLs work too. While it runs, a
/// progress bar is drawn on stderr when stderr is a terminal. qnum::Error with curl's own
/// message when it fails or is not installed.
inline void curl_download(const std::string& url, const std::filesystem::path& out, const CurlOptions& o) {
  const std::filesystem::path err = out.string() + ".stderr";
  std::vector<std::string> args = {"curl", "--fail",  "--silent", "--show-error", "--location", "--connect-timeout",
                                   "30",   "--retry", "2",        "--output",     out.string()};
  if (o.resume) args.insert(args.end(), {"--continue-at", "-"});
  args.insert(args.end(), {"--", url});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "curl", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  std::error_code ec;
  if (rc != 0) {
    std::filesystem::remove(err, ec);
    qnum::detail::fail("cannot run curl to download ", url, ": ", std::strerror(rc),
                       rc == ENOENT ? " (curl is not installed: apt-get install curl)" : "");
  }
  // The bar follows the output file's size: curl's own bar would have to share the stderr
  // that carries its error message.
  const bool bar = ::isatty(STDERR_FILENO) != 0;
  const std::string label = o.label.empty() ? url.substr(url.find_last_of('/') + 1) : o.label;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, bar ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (r == 0) {
      detail::draw_progress(label, detail::size_or_zero(out), o.total);
      ::usleep(200000);
    }
  }
  if (bar) {
    detail::draw_progress(label, detail::size_or_zero(out), o.total);
    std::fputs("\n", stderr);
  }
  const std::string message = detail::last_line_of(err);
  std::filesystem::remove(err, ec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    qnum::detail::fail("download of ", url, " failed (curl ",
                       WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : std::string("killed"),
                       message.empty() ? "" : ": " + message, ")");
}

/// The default Fetcher: curl_download without resuming or a known total.
inline void curl_fetch(const std::string& url, const std::filesystem::path& out) { curl_download(url, out, {}); }

/// What a downloaded file must be: its size and any digests its publisher gives (lowercase
/// or uppercase hex; empty: not checked). At least one digest is required.
struct ExpectedFile {
  std::uint64_t size = 0;  ///< 0: not known
  std::string md5, sha256;
  std::string git_sha1;  ///< git blob id (SHA-1 of "blob <size>\0" + bytes), as the HF hub lists small files
};

namespace detail {

inline std::string lower_hex(std::string s, std::size_t digits, const char* what) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  qnum::detail::require(
      s.empty() || (s.size() == digits && s.find_first_not_of("0123456789abcdef") == std::string::npos),
      "download: expected ", what, " '", s, "' is not ", digits, " hex digits");
  return s;
}

/// Empty when `file` is what `e` says, else what differs (size first: it is cheap).
inline std::string mismatch(const std::filesystem::path& file, const ExpectedFile& e) {
  const std::uint64_t size = size_or_zero(file);
  if (e.size != 0 && size != e.size)
    return "size " + std::to_string(size) + " bytes, expected " + std::to_string(e.size);
  if (!e.md5.empty())
    if (const auto got = digest_file<Md5>(file); got != e.md5) return "MD5 " + got + ", expected " + e.md5;
  if (!e.sha256.empty())
    if (const auto got = digest_file<Sha256>(file); got != e.sha256) return "SHA-256 " + got + ", expected " + e.sha256;
  if (!e.git_sha1.empty())
    if (const auto got = git_blob_sha1_file(file); got != e.git_sha1)
      return "git blob SHA-1 " + got + ", expected " + e.git_sha1;
  return "";
}

}  // namespace detail

/// Downloads `url` to `dest` (its directory is created) and returns dest; a file already at
/// dest with the expected size and digests is kept without fetching. The bytes go to
/// a file beside dest and are renamed to dest only once their size and digests are what
/// `expected` says; a mismatch removes them and is an error. With `resume`, that file is
/// `<dest>.part`, kept when the transfer fails (network, interrupt) and continued by the
/// next call; without, it is a fresh temporary removed on any failure. `fetch` empty: curl
/// (progress bar against expected.size, resuming when asked).
inline std::filesystem::path download_file(const std::string& url, ExpectedFile expected,
                                           const std::filesystem::path& dest, const Fetcher& fetch = {},
                                           bool resume = true) {
  expected.md5 = detail::lower_hex(expected.md5, 32, "MD5");
  expected.sha256 = detail::lower_hex(expected.sha256, 64, "SHA-256");
  expected.git_sha1 = detail::lower_hex(expected.git_sha1, 40, "git SHA-1");
  qnum::detail::require(!expected.md5.empty() || !expected.sha256.empty() || !expected.git_sha1.empty(), "download of ",
                        url, ": no checksum to verify it against");
  // Downloaded once: a file already at dest that checks out is kept as it is.
  if (std::filesystem::is_regular_file(dest) && detail::mismatch(dest, expected).empty()) return dest;
  std::error_code ec;
  std::filesystem::create_directories(dest.parent_path(), ec);
  qnum::detail::require(!ec, "download: cannot create directory '", dest.parent_path().string(), "': ", ec.message());
  const auto part = resume ? std::filesystem::path(dest.string() + ".part") : detail::temp_beside(dest, "part");
  const std::uint64_t have = detail::size_or_zero(part);
  if (expected.size != 0 && have > expected.size) std::filesystem::remove(part, ec);  // not a prefix of it
  auto get = [&](bool continue_part) {
    if (fetch) return fetch(url, part);
    CurlOptions o;
    o.total = expected.size;
    o.resume = continue_part;
    o.label = dest.filename().string();
    curl_download(url, part, o);
  };
  try {
    if (expected.size == 0 || detail::size_or_zero(part) != expected.size) {
      try {
        get(resume);
      } catch (const Error& e) {
        // A server that ignores ranges cannot continue the part (curl exit 33): start over.
        if (!resume || std::string_view(e.what()).find("curl exit 33") == std::string_view::npos) throw;
        std::filesystem::remove(part, ec);
        get(false);
      }
    }
    qnum::detail::require(std::filesystem::is_regular_file(part), "download of ", url, " produced no file");
    if (const std::string bad = detail::mismatch(part, expected); !bad.empty()) {
      std::filesystem::remove(part, ec);
      qnum::detail::fail("download of ", url, ": checksum mismatch (", bad, "); the file was discarded");
    }
    std::filesystem::rename(part, dest, ec);
    qnum::detail::require(!ec, "download: cannot move the file into '", dest.string(), "': ", ec.message());
  } catch (const Error& e) {
    if (!resume || detail::size_or_zero(part) == 0) {
      std::filesystem::remove(part, ec);
      throw;
    }
    qnum::detail::fail(e.what(), " (", detail::size_or_zero(part), " bytes kept in ", part.string(),
                       ": run the download again to resume)");
  }
  return dest;
}

/// Downloads `url` to `dest` checked against its MD5 (32 hex digits, any case), without
/// resuming: on any failure nothing is left at dest or beside it. Returns dest.
inline std::filesystem::path download_verified(const std::string& url, std::string md5,
                                               const std::filesystem::path& dest, const Fetcher& fetch = curl_fetch) {
  qnum::detail::require(!md5.empty(), "download: expected MD5 '' is not 32 hex digits");
  ExpectedFile e;
  e.md5 = std::move(md5);
  return download_file(url, e, dest, fetch, false);
}

// ---- JSC from OpenML ---------------------------------------------------------------------

/// Where the JSC file comes from: OpenML dataset 42468, whose JSON data description names
/// the ARFF file's URL and its MD5 (`url`, `md5_checksum`). Tests point these at file://
/// fixtures.
struct JscDownloadOptions {
  std::string description_url = "https://www.openml.org/api/v1/json/data/42468";
  /// The directory to put jsc/hls4ml_lhc_jets_hlf.arff in; empty: the cache, the last of
  /// data_search_dirs() ($XDG_CACHE_HOME/qnum or ~/.cache/qnum).
  std::filesystem::path dir;
};

/// The cache directory downloads go to (cache_dir(): $QNUM_CACHE_DIR, $XDG_CACHE_HOME/qnum
/// or ~/.cache/qnum); qnum::Error when none of those variables is set.
inline std::filesystem::path download_cache_dir() {
  const auto dir = cache_dir();
  qnum::detail::require(
      dir.has_value(),
      "download: no cache directory (set QNUM_CACHE_DIR, XDG_CACHE_HOME or HOME, or pass a directory)");
  return *dir;
}

/// Downloads the JSC ARFF into <dir>/jsc/hls4ml_lhc_jets_hlf.arff: reads OpenML's data
/// description, checks that it describes hls4ml_lhc_jets_hlf as an ARFF with an MD5, then
/// download_verified(url, md5_checksum). Any failure (no network, no curl, checksum) is a
/// qnum::Error that also says which file to put where by hand. Returns the file's path.
inline std::filesystem::path download_jsc(const JscDownloadOptions& o = {}, const Fetcher& fetch = curl_fetch) {
  const std::filesystem::path dir = o.dir.empty() ? download_cache_dir() : o.dir;
  const std::filesystem::path dest = dir / "jsc" / std::string(kJscFileNames[0]);
  const std::string by_hand =
      "; to install it by hand, download the ARFF of OpenML dataset 42468 "
      "'hls4ml_lhc_jets_hlf' (https://www.openml.org/d/42468) and put it at " +
      dest.string() + " (or in $QNUM_DATA_DIR/jsc/)";
  std::error_code ec;
  const bool made_dir = !std::filesystem::exists(dest.parent_path(), ec);
  try {
    std::filesystem::create_directories(dest.parent_path(), ec);
    qnum::detail::require(!ec, "cannot create directory '", dest.parent_path().string(), "': ", ec.message());
    const auto desc_path = detail::temp_beside(dest, "description");
    nlohmann::json desc;
    try {
      fetch(o.description_url, desc_path);
      desc = io::parse_json(read_file(desc_path), "the data description at " + o.description_url);
    } catch (const nlohmann::json::exception& e) {
      std::filesystem::remove(desc_path, ec);
      qnum::detail::fail("the data description at ", o.description_url, " is not JSON (", e.what(), ")");
    } catch (...) {
      std::filesystem::remove(desc_path, ec);
      throw;
    }
    std::filesystem::remove(desc_path, ec);
    const nlohmann::json d = desc.is_object() ? desc.value("data_set_description", nlohmann::json()) : nlohmann::json();
    auto field = [&](const char* key) {
      qnum::detail::require(d.is_object() && d.contains(key) && d[key].is_string(), "the data description at ",
                            o.description_url, " has no data_set_description.", key);
      return d[key].get<std::string>();
    };
    const std::string name = field("name"), format = field("format"), url = field("url"), md5 = field("md5_checksum");
    qnum::detail::require(name == "hls4ml_lhc_jets_hlf", "the data description at ", o.description_url,
                          " is for dataset '", name, "', not hls4ml_lhc_jets_hlf");
    qnum::detail::require(detail::lower(format) == "arff", "the data description at ", o.description_url,
                          " offers format '", format, "', not ARFF");
    return download_verified(url, md5, dest, fetch);
  } catch (const Error& e) {
    if (made_dir) std::filesystem::remove(dest.parent_path(), ec);  // only if still empty
    qnum::detail::fail("jsc: download failed: ", e.what(), by_hand);
  }
}

}  // namespace qnum::data
