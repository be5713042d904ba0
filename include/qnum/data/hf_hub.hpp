// BERT checkpoints by name from the Hugging Face hub (`qnum download bert-tiny`,
// `qnum download owner/name`, `--load owner/name`): config.json, vocab.txt and the weights
// (model.safetensors, else pytorch_model.bin, read by io/torch_state_dict.hpp) go to
// <cache>/hf/<owner>/<name>/, each checked against what the hub publishes for it.
//
// The hub's model API (GET <endpoint>/api/models/<repo>/revision/<rev>?blobs=true) gives
// the commit `sha` and, per file ("siblings"), its `size` and git `blobId`; files kept in
// Git LFS (the weights) also carry `lfs.sha256` and `lfs.size`. LFS files are checked
// against that SHA-256 and size, the others against the git blob id (a SHA-1 of the bytes)
// and size. Files are fetched from <endpoint>/<repo>/resolve/<sha>/<file>, so all three come
// from one commit; each is resumable and atomic (download_file). $HF_ENDPOINT replaces
// https://huggingface.co, as in huggingface_hub.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/download.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"

namespace qnum::data {

/// The hub repository a model name means: a preset short name (bert-tiny -> the labs'
/// prajjwal1/bert-tiny; bert-mini/-small/-medium likewise; bert-base -> bert-base-uncased)
/// or `owner/name` as it is. qnum::Error for anything else.
inline std::string hub_repo_of(const std::string& name) {
  if (name == "bert-tiny" || name == "bert-mini" || name == "bert-small" || name == "bert-medium")
    return "prajjwal1/" + name;
  if (name == "bert-base") return "google-bert/bert-base-uncased";
  const auto slash = name.find('/');
  const bool ok = slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
                  name.find('/', slash + 1) == std::string::npos &&
                  name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/") ==
                      std::string::npos &&
                  name.find("..") == std::string::npos;
  qnum::detail::require(ok, "'", name,
                        "' is not a Hugging Face model name (owner/name) nor a preset (bert-tiny, bert-mini, "
                        "bert-small, bert-medium, bert-base)");
  return name;
}

/// Where to fetch from and put models (tests point these at a loopback server).
struct HubOptions {
  std::string endpoint;           ///< empty: $HF_ENDPOINT, else https://huggingface.co
  std::string revision = "main";  ///< branch, tag or commit
  std::filesystem::path dir;      ///< the cache root; empty: download_cache_dir()
};

/// One file of a model repository and what it must be.
struct HubFile {
  std::string name;
  ExpectedFile expected;
};

/// The folder a hub model lives in under the cache root `dir`.
inline std::filesystem::path hub_model_dir(const std::string& repo, const std::filesystem::path& dir) {
  return dir / "hf" / repo;
}

/// The weights file of a model folder (model.safetensors, else pytorch_model.bin); empty if neither.
inline std::filesystem::path hub_weights_in(const std::filesystem::path& folder) {
  for (const char* f : {"model.safetensors", "pytorch_model.bin"})
    if (std::filesystem::is_regular_file(folder / f)) return folder / f;
  return {};
}

/// From the model API's JSON: the commit and the files a BERT needs, with their checks.
inline std::vector<HubFile> hub_bert_files(const nlohmann::json& info, const std::string& repo, std::string& sha) {
  const std::string what = "the hub's description of " + repo;
  qnum::detail::require(info.is_object() && info.contains("sha") && info["sha"].is_string() &&
                            info.contains("siblings") && info["siblings"].is_array(),
                        what, " has no sha/siblings");
  sha = info["sha"].get<std::string>();
  qnum::detail::require(sha.size() == 40 && sha.find_first_not_of("0123456789abcdef") == std::string::npos, what,
                        ": commit '", sha, "' is not 40 hex digits");
  auto find = [&](const std::string& name) -> const nlohmann::json* {
    for (const auto& s : info["siblings"])
      if (s.is_object() && s.value("rfilename", "") == name) return &s;
    return nullptr;
  };
  auto entry = [&](const std::string& name, const nlohmann::json& s) {
    HubFile f{name, {}};
    auto uint_of = [&](const nlohmann::json& v, const char* key) {
      qnum::detail::require(v.contains(key) && v[key].is_number_integer() && v[key].get<std::int64_t>() >= 0, what,
                            ": ", name, " has no ", key);
      return v[key].get<std::uint64_t>();
    };
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const auto& l = s["lfs"];
      qnum::detail::require(l.contains("sha256") && l["sha256"].is_string(), what, ": ", name, " has no lfs.sha256");
      f.expected.sha256 = l["sha256"].get<std::string>();
      f.expected.size = uint_of(l, "size");
    } else {
      qnum::detail::require(s.contains("blobId") && s["blobId"].is_string(), what, ": ", name,
                            " has neither lfs.sha256 nor blobId (was ?blobs=true honoured?)");
      f.expected.git_sha1 = s["blobId"].get<std::string>();
      f.expected.size = uint_of(s, "size");
    }
    return f;
  };
  std::vector<HubFile> files;
  for (const char* name : {"config.json", "vocab.txt"}) {
    const auto* s = find(name);
    qnum::detail::require(s != nullptr, repo, " has no ", name,
                          " (not a BERT checkpoint with a WordPiece vocabulary?)");
    files.push_back(entry(name, *s));
  }
  const auto* w = find("model.safetensors");
  const std::string weights = w ? "model.safetensors" : "pytorch_model.bin";
  if (!w) w = find(weights);
  qnum::detail::require(w != nullptr, repo, " has neither model.safetensors nor pytorch_model.bin");
  files.push_back(entry(weights, *w));
  return files;
}

/// Downloads a BERT checkpoint by name (hub_repo_of) into its folder under the cache and
/// returns the folder; files already there that match the hub's checksums are not fetched
/// again (`.qnum-revision` records the commit the files were checked against). Errors
/// (offline, checksum) say which files to put where by hand.
inline std::filesystem::path download_hf_model(const std::string& name, const HubOptions& o = {},
                                               const Fetcher& fetch = {}) {
  namespace fs = std::filesystem;
  const std::string repo = hub_repo_of(name);
  std::string endpoint = o.endpoint;
  if (endpoint.empty()) {
    const char* e = std::getenv("HF_ENDPOINT");
    endpoint = e && *e ? e : "https://huggingface.co";
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const fs::path folder = hub_model_dir(repo, o.dir.empty() ? download_cache_dir() : o.dir);
  const std::string by_hand =
      "; to install it by hand, download config.json, vocab.txt and model.safetensors (or "
      "pytorch_model.bin) from " +
      endpoint + "/" + repo + "/tree/" + o.revision + " into " + folder.string();
  try {
    std::error_code ec;
    fs::create_directories(folder, ec);
    qnum::detail::require(!ec, "cannot create '", folder.string(), "': ", ec.message());
    const std::string info_url = endpoint + "/api/models/" + repo + "/revision/" + o.revision + "?blobs=true";
    const auto info_path = detail::temp_beside(folder / "info.json", "api");
    nlohmann::json info;
    try {
      fetch ? fetch(info_url, info_path) : curl_fetch(info_url, info_path);
      info = io::parse_json(read_file(info_path), "the hub's answer at " + info_url, false);
    } catch (...) {
      fs::remove(info_path, ec);
      throw;
    }
    fs::remove(info_path, ec);
    qnum::detail::require(!info.is_discarded(), "the hub's answer at ", info_url, " is not JSON");
    std::string sha;
    const auto files = hub_bert_files(info, repo, sha);
    for (const auto& f : files)  // a file already there that checks out is not fetched again
      download_file(endpoint + "/" + repo + "/resolve/" + sha + "/" + f.name, f.expected, folder / f.name, fetch);
    write_file_atomic(folder / ".qnum-revision", sha + "\n");
  } catch (const Error& e) {
    std::error_code ec;
    if (fs::remove(folder, ec)) fs::remove(folder.parent_path(), ec);  // only when empty (parts stay)
    qnum::detail::fail(repo, ": download failed: ", e.what(), by_hand);
  }
  return folder;
}

/// What `--load X` names, as a weights file: an existing file (or qnum checkpoint stem) as
/// it is; an existing folder's
/// model.safetensors or pytorch_model.bin; else a hub model name, downloaded into the cache
/// when not there yet (download_hf_model).
inline std::filesystem::path resolve_pretrained(const std::string& load, const HubOptions& o = {},
                                                const Fetcher& fetch = {}) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(load)) return load;
  if (fs::is_regular_file(load + ".safetensors")) return load;  // a qnum checkpoint stem (runs/x/best)
  if (fs::is_directory(load)) {
    const auto w = hub_weights_in(load);
    qnum::detail::require(!w.empty(), "--load ", load,
                          ": the folder has neither model.safetensors nor pytorch_model.bin");
    return w;
  }
  std::string repo;
  try {
    repo = hub_repo_of(load);
  } catch (const Error&) {
    qnum::detail::fail("--load ", load, ": no such file, folder or checkpoint, and not a Hugging Face model name ",
                       "(owner/name, or bert-tiny, bert-mini, bert-small, bert-medium, bert-base)");
  }
  const fs::path folder = hub_model_dir(repo, o.dir.empty() ? download_cache_dir() : o.dir);
  if (auto w = hub_weights_in(folder); !w.empty() && fs::is_regular_file(folder / "config.json")) return w;
  return hub_weights_in(download_hf_model(load, o, fetch));
}

}  // namespace qnum::data
