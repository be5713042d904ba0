// `qnum download imdb`: Stanford's aclImdb_v1.tar.gz (size and MD5 as published with the
// dataset), downloaded resumably into the cache and unpacked with libarchive into
// <cache>/imdb/aclImdb — the layout read_aclimdb reads, so `imdb` resolves to it when
// QNUM_DATA_DIR is not set (data_search_dirs()).
#pragma once

#include <filesystem>
#include <string>

#include "qnum/core/error.hpp"
#include "qnum/data/download.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/io/archive.hpp"

namespace qnum::data {

/// Where the IMDb archive comes from and what it must be (tests point these at fixtures).
struct ImdbDownloadOptions {
  std::string url = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz";
  ExpectedFile expected{84125825, "7c2ac02c03563afcf9b574c7e56c153a", "", ""};
  /// The data directory to fill (<dir>/imdb/aclImdb); empty: download_cache_dir().
  std::filesystem::path dir;
  bool keep_archive = false;  ///< keep <dir>/imdb/aclImdb_v1.tar.gz after unpacking
};

/// Downloads and unpacks IMDb unless <dir>/imdb/aclImdb is already there; returns that
/// folder. The archive is checked before anything is unpacked, and unpacked into a
/// temporary folder renamed into place, so an interrupted run leaves either nothing or a
/// resumable <dir>/imdb/aclImdb_v1.tar.gz.part. Errors say what to put where by hand.
inline std::filesystem::path download_imdb(const ImdbDownloadOptions& o = {}, const Fetcher& fetch = {}) {
  namespace fs = std::filesystem;
  const fs::path dir = (o.dir.empty() ? download_cache_dir() : o.dir) / "imdb";
  const fs::path dest = dir / "aclImdb";
  if (fs::is_directory(dest / "train" / "pos") && fs::is_directory(dest / "test" / "pos")) return dest;
  const fs::path archive = dir / "aclImdb_v1.tar.gz";
  try {
    download_file(o.url, o.expected, archive, fetch);
    const fs::path staging = dir / ".unpacking";
    std::error_code ec;
    fs::remove_all(staging, ec);  // a previous run killed while unpacking
    try {
      extract_archive(archive, staging);
      qnum::detail::require(fs::is_directory(staging / "aclImdb" / "train" / "pos"), "the archive ", o.url,
                            " has no aclImdb/train/pos folder");
      fs::remove_all(dest, ec);  // an incomplete folder left by hand
      fs::rename(staging / "aclImdb", dest, ec);
      qnum::detail::require(!ec, "cannot move the unpacked files into '", dest.string(), "': ", ec.message());
    } catch (...) {
      fs::remove_all(staging, ec);
      throw;
    }
    fs::remove_all(staging, ec);
    if (!o.keep_archive) fs::remove(archive, ec);
  } catch (const Error& e) {
    std::error_code ec;
    fs::remove(dir, ec);  // only when empty: a kept .part stays resumable
    qnum::detail::fail("imdb: download failed: ", e.what(), "; to install it by hand, download ", o.url,
                       " and unpack it so that ", dest.string(), "/train/pos exists (or set QNUM_DATA_DIR)");
  }
  return dest;
}

}  // namespace qnum::data
