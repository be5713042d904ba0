// `qnum download NAME [--dir DIR]`: fetches a dataset or a pretrained BERT into the cache
// ($QNUM_CACHE_DIR, else ~/.cache/qnum) or DIR, checksum-verified, resumable and written
// atomically (qnum/data/download.hpp), then prints where it is. Known: jsc (OpenML 42468,
// ARFF), imdb (Stanford's aclImdb_v1.tar.gz, unpacked), and BERT checkpoints by name:
// bert-tiny (prajjwal1/bert-tiny, the labs' model), bert-mini/-small/-medium/-base, or any
// Hugging Face `owner/name` (data/hf_hub.hpp). jsc-synthetic / text-synthetic need none.
#pragma once

#include <filesystem>
#include <iostream>
#include <string>

#include "qnum/core/error.hpp"
#include "qnum/data/download.hpp"
#include "qnum/data/hf_hub.hpp"
#include "qnum/data/imdb_download.hpp"

namespace qnum::cli {

/// Downloads `name` into `dir` (empty: the cache) and prints the file's or folder's path.
inline void download_dataset(const std::string& name, const std::string& dir) {
  if (name == "jsc-synthetic" || name == "text-synthetic")
    qnum::detail::fail("dataset '", name, "' is generated, not downloaded (use it directly)");
  std::filesystem::path path;
  if (name == "jsc") {
    data::JscDownloadOptions o;
    o.dir = dir;
    path = data::download_jsc(o);
  } else if (name == "imdb") {
    data::ImdbDownloadOptions o;
    o.dir = dir;
    path = data::download_imdb(o);
  } else if (name.starts_with("bert-") || name.find('/') != std::string::npos) {
    data::HubOptions o;
    o.dir = dir;
    path = data::download_hf_model(name, o);
  } else {
    qnum::detail::fail("download: unknown name '", name,
                       "' (known: jsc, imdb, bert-tiny, bert-mini, bert-small, bert-medium, bert-base, or a Hugging "
                       "Face model as owner/name)");
  }
  std::cout << path.string() << "\n";
}

}  // namespace qnum::cli
