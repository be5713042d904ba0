// `qnum download NAME [--dir DIR]`: fetches a dataset or a pretrained BERT into the cache
// ($QNUM_CACHE_DIR, else ~/.cache/qnum) or DIR, checksum-verified, resumable and written
// atomically (qnum/data/download.hpp), then prints where it is. Known: jsc (OpenML 42468,
// ARFF), imdb (Stanford's aclImdb_v1.tar.gz, unpacked), and BERT checkpoints by name:
// bert-tiny (prajjwal1/bert-tiny, the labs' model), bert-mini/-small/-medium/-base, or any
// Hugging Face `owner/name` (data/hf_hub.hpp). jsc-synthetic / text-synthetic need none.
#pragma once

#include <CLI/CLI.hpp>

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

/// `qnum download NAME [--dir DIR]`.
class DownloadCommand {
 public:
  explicit DownloadCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("download", "Download a dataset or pretrained BERT into the cache (checksum-verified)");
    cmd_->add_option("NAME", name_, "jsc, imdb, bert-tiny (or another preset), or a Hugging Face owner/name")
        ->required();
    cmd_->add_option("--dir", dir_, "put it in DIR/<dataset>/ instead of the cache (e.g. $QNUM_DATA_DIR)");
  }
  DownloadCommand(const DownloadCommand&) = delete;  // CLI11 holds pointers to the members
  DownloadCommand& operator=(const DownloadCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }
  void run() const { download_dataset(name_, dir_); }

 private:
  CLI::App* cmd_ = nullptr;
  std::string name_, dir_;
};

}  // namespace qnum::cli
