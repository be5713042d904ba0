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

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
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

extern char** environ;

namespace qnum::data {

/// Fetches `url` into the file `out` (created or truncated); throws qnum::Error on failure.
using Fetcher = std::function<void(const std::string& url, const std::filesystem::path& out)>;

// ---- MD5 (RFC 1321) ------------------------------------------------------------------------

/// Incremental MD5: update() with any chunks, then hex() once.
class Md5 {
 public:
  void update(std::span<const std::uint8_t> data) {
    for (std::uint8_t b : data) {
      block_[fill_++] = b;
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
    bytes_ += data.size();
  }
  void update(std::string_view s) { update({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}); }

  /// The digest as 32 lowercase hex digits (finishes the hash: call once).
  std::string hex() {
    const std::uint64_t bits = bytes_ * 8;
    const std::uint8_t one = 0x80, zero = 0;
    update({&one, 1});
    while (fill_ != 56) update({&zero, 1});
    std::array<std::uint8_t, 8> len{};
    for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(bits >> (8 * i));
    update(len);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : state_)
      for (int i = 0; i < 4; ++i) {
        const auto byte = (w >> (8 * i)) & 0xFF;
        out += digits[byte >> 4];
        out += digits[byte & 15];
      }
    return out;
  }

 private:
  static std::uint32_t rotl(std::uint32_t x, int c) { return (x << c) | (x >> (32 - c)); }
  void compress() {
    static constexpr std::array<std::uint32_t, 64> k = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
    static constexpr std::array<int, 16> r = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
    std::array<std::uint32_t, 16> m{};
    for (std::size_t i = 0; i < 16; ++i)
      m[i] = std::uint32_t{block_[4 * i]} | (std::uint32_t{block_[4 * i + 1]} << 8) |
             (std::uint32_t{block_[4 * i + 2]} << 16) | (std::uint32_t{block_[4 * i + 3]} << 24);
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    for (std::size_t i = 0; i < 64; ++i) {
      std::uint32_t f = 0;
      std::size_t g = 0;
      if (i < 16) {
        f = (b & c) | (~b & d), g = i;
      } else if (i < 32) {
        f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
      } else if (i < 48) {
        f = b ^ c ^ d, g = (3 * i + 5) % 16;
      } else {
        f = c ^ (b | ~d), g = (7 * i) % 16;
      }
      const std::uint32_t t = d;
      d = c;
      c = b;
      b = b + rotl(a + f + k[i] + m[g], r[(i / 16) * 4 + i % 4]);
      a = t;
    }
    state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d;
  }

  std::array<std::uint32_t, 4> state_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  std::array<std::uint8_t, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t bytes_ = 0;
};

/// MD5 of a string as 32 lowercase hex digits.
inline std::string md5_hex(std::string_view s) {
  Md5 h;
  h.update(s);
  return h.hex();
}

/// MD5 of a file's bytes as 32 lowercase hex digits; qnum::Error if it cannot be read.
inline std::string md5_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  qnum::detail::require(static_cast<bool>(in), "md5: cannot open '", path.string(), "'");
  Md5 h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update({reinterpret_cast<const std::uint8_t*>(buf.data()), static_cast<std::size_t>(in.gcount())});
  }
  qnum::detail::require(in.eof(), "md5: read error on '", path.string(), "'");
  return h.hex();
}

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

/// Runs `curl` (found on PATH) to fetch `url` into `out`: fails on HTTP errors, follows
/// redirects, gives up connecting after 30 s and retries transient failures twice. file://
/// URLs work too. qnum::Error with curl's own message when it fails or is not installed.
inline void curl_fetch(const std::string& url, const std::filesystem::path& out) {
  const std::filesystem::path err = out.string() + ".stderr";
  std::vector<std::string> args = {"curl", "--fail",  "--silent", "--show-error", "--location", "--connect-timeout",
                                   "30",   "--retry", "2",        "--output",     out.string(), "--",
                                   url};
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
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string message = detail::last_line_of(err);
  std::filesystem::remove(err, ec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    qnum::detail::fail("download of ", url, " failed (curl ",
                       WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : std::string("killed"),
                       message.empty() ? "" : ": " + message, ")");
}

/// Downloads `url` to `dest` (its directory is created): the bytes go to a temporary file
/// beside dest, their MD5 must equal `md5` (32 hex digits, any case), and only then is the
/// file renamed to dest. On any failure nothing is left at dest or beside it and the
/// qnum::Error says what went wrong. Returns dest.
inline std::filesystem::path download_verified(const std::string& url, std::string md5,
                                               const std::filesystem::path& dest, const Fetcher& fetch = curl_fetch) {
  for (auto& c : md5) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  qnum::detail::require(md5.size() == 32 && md5.find_first_not_of("0123456789abcdef") == std::string::npos,
                        "download: expected MD5 '", md5, "' is not 32 hex digits");
  std::error_code ec;
  std::filesystem::create_directories(dest.parent_path(), ec);
  qnum::detail::require(!ec, "download: cannot create directory '", dest.parent_path().string(), "': ", ec.message());
  const auto tmp = detail::temp_beside(dest, "part");
  try {
    fetch(url, tmp);
    qnum::detail::require(std::filesystem::is_regular_file(tmp), "download of ", url, " produced no file");
    const std::string got = md5_file(tmp);
    qnum::detail::require(got == md5, "download of ", url, ": checksum mismatch (MD5 ", got, ", expected ", md5,
                          "); the file was discarded");
    std::filesystem::rename(tmp, dest, ec);
    qnum::detail::require(!ec, "download: cannot move the file into '", dest.string(), "': ", ec.message());
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
  return dest;
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

/// The cache directory downloads go to (the last of data_search_dirs()); qnum::Error when
/// neither XDG_CACHE_HOME nor HOME is set.
inline std::filesystem::path download_cache_dir() {
  const auto dirs = data_search_dirs();
  const bool have_cache = (std::getenv("XDG_CACHE_HOME") && *std::getenv("XDG_CACHE_HOME")) ||
                          (std::getenv("HOME") && *std::getenv("HOME"));
  qnum::detail::require(have_cache && !dirs.empty(),
                        "download: no cache directory (set XDG_CACHE_HOME or HOME, or pass a directory)");
  return dirs.back();
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
      desc = nlohmann::json::parse(read_file(desc_path));
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
