// Reading gzip files (zlib): the whole decompressed content, concatenated members included,
// with errors that name the file. Plain (uncompressed) files are returned as they are, so a
// reader can take `data.tsv` or `data.tsv.gz` alike.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"

namespace qnum {

/// True if `bytes` start with the gzip magic number.
inline bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1F &&
         static_cast<unsigned char>(bytes[1]) == 0x8B;
}

/// Largest decompressed size gunzip accepts by default: 4 GiB, well above IMDb's ~130 MB,
/// far below what a few-MB "gzip bomb" (ratio ~1000:1) would otherwise make us allocate.
inline constexpr std::size_t kMaxGunzipBytes = std::size_t{4} << 30;

/// Decompresses gzip data (one or more members); `what` names the source in errors. Output
/// beyond `max_bytes` is refused rather than allocated.
inline std::string gunzip(std::string_view gz, std::string_view what = "gzip data",
                          std::size_t max_bytes = kMaxGunzipBytes) {
  std::string out;
  out.reserve(std::min(gz.size() * 3, max_bytes));
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) detail::fail("gzip: ", what, ": cannot initialise zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());  // files > 4 GiB are not expected here
  detail::require(gz.size() == zs.avail_in, "gzip: ", what, ": file too large (", gz.size(), " bytes)");
  char buf[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (out.size() + (sizeof(buf) - zs.avail_out) > max_bytes) {
      inflateEnd(&zs);
      detail::fail("gzip: ", what, ": decompresses to more than ", max_bytes,
                   " bytes; refused (a gzip bomb, or raise the limit)");
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // Another member follows (gzip allows concatenation); trailing zero padding ends it.
      bool padding = true;
      for (uInt i = 0; i < zs.avail_in; ++i) padding = padding && zs.next_in[i] == 0;
      if (padding) break;
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // truncated: reported below
    const std::string msg = zs.msg ? zs.msg : "corrupt data";
    inflateEnd(&zs);
    detail::fail("gzip: ", what, ": ", msg, " (after ", out.size(), " decompressed bytes)");
  }
  inflateEnd(&zs);
  detail::require(rc == Z_STREAM_END, "gzip: ", what, ": truncated file (ends inside the compressed stream after ",
                  out.size(), " decompressed bytes)");
  return out;
}

/// The content of `path`, decompressed if it is gzip; more than `max_bytes` (on disk or
/// decompressed) is refused before it is allocated.
inline std::string read_maybe_gzip(const std::filesystem::path& path, std::size_t max_bytes = kMaxGunzipBytes) {
  std::string bytes = read_file(path, max_bytes);
  if (!is_gzip(bytes)) return bytes;
  return gunzip(bytes, path.string(), max_bytes);
}

}  // namespace qnum
