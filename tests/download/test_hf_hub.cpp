// BERT checkpoints by name from a loopback "hub": the model API's JSON (sha, siblings with
// blobId/size, LFS sha256/size for the weights) and the files under /<repo>/resolve/<sha>/,
// made from committed fixtures (tests/fixtures/bert, tests/fixtures/torch_state_dict). Checked:
// files land in <cache>/hf/<owner>/<name>/, a second call fetches only the description,
// a wrong published SHA-256 leaves no weights, offline errors say what to put where, and
// resolve_pretrained turns folders, stems and names into a weights file.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "download/helpers.hpp"
#include "download/loopback_http.hpp"
#include "qnum/data/hf_hub.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/torch_state_dict.hpp"

using namespace qnum;
using namespace qnum::data;
using namespace qnum_test;

namespace {

const fs::path kData = fs::path(QNUM_TEST_SOURCE_DIR) / "fixtures";
const std::string kSha = "0123456789abcdef0123456789abcdef01234567";

/// The files of a tiny BERT repository and the hub's description of them.
struct FakeRepo {
  std::string config = read_file(kData / "bert" / "config.json");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n";
  std::string weights = read_file(kData / "torch_state_dict" / "bert_random.bin");

  nlohmann::json info(const std::string& weights_sha256) const {
    auto blob = [](const std::string& s) {
      return digest_hex<Sha1>("blob " + std::to_string(s.size()) + std::string(1, '\0') + s);
    };
    return {{"id", "owner/tiny-bert"},
            {"sha", kSha},
            {"siblings",
             {{{"rfilename", ".gitattributes"}, {"blobId", blob("*.bin filter=lfs")}, {"size", 16}},
              {{"rfilename", "config.json"}, {"blobId", blob(config)}, {"size", config.size()}},
              {{"rfilename", "pytorch_model.bin"},
               {"blobId", std::string(40, 'e')},
               {"size", weights.size()},
               {"lfs", {{"sha256", weights_sha256}, {"size", weights.size()}, {"pointerSize", 134}}}},
              {{"rfilename", "vocab.txt"}, {"blobId", blob(vocab)}, {"size", vocab.size()}}}}};
  }

  std::map<std::string, LoopbackHttp::Route> routes(const std::string& weights_sha256) const {
    const std::string base = "/owner/tiny-bert/resolve/" + kSha + "/";
    return {{"/api/models/owner/tiny-bert/revision/main?blobs=true", {info(weights_sha256).dump()}},
            {base + "config.json", {config}},
            {base + "vocab.txt", {vocab}},
            {base + "pytorch_model.bin", {weights}}};
  }
};

}  // namespace

TEST_CASE("download_hf_model: config, vocab and weights checked against the hub's description") {
  if (!have_curl()) return;
  TempDir t;
  FakeRepo repo;
  LoopbackHttp hub(repo.routes(digest_hex<Sha256>(repo.weights)));
  HubOptions o;
  o.endpoint = hub.url("");
  o.dir = t.path;
  const auto folder = download_hf_model("owner/tiny-bert", o);
  CHECK(folder == t.path / "hf" / "owner" / "tiny-bert");
  CHECK(files_in(folder) ==
        std::vector<std::string>{".qnum-revision", "config.json", "pytorch_model.bin", "vocab.txt"});
  CHECK(read_file(folder / "pytorch_model.bin") == repo.weights);
  CHECK(read_file(folder / ".qnum-revision") == kSha + "\n");
  CHECK(hub.requests().size() == 4);

  // Again: only the description is fetched.
  download_hf_model("owner/tiny-bert", o);
  CHECK(hub.requests().size() == 5);

  // --load by name resolves to the cached weights without the network; by folder too.
  CHECK(resolve_pretrained("owner/tiny-bert", o) == folder / "pytorch_model.bin");
  CHECK(resolve_pretrained(folder.string()) == folder / "pytorch_model.bin");
  CHECK(hub.requests().size() == 5);
  CHECK(read_weights_file(resolve_pretrained(folder.string())).tensors.count("bert.pooler.dense.weight") == 1);
}

TEST_CASE("download_hf_model: a wrong published SHA-256 leaves no weights in the cache") {
  if (!have_curl()) return;
  TempDir t;
  FakeRepo repo;
  LoopbackHttp hub(repo.routes(std::string(64, 'a')));
  HubOptions o;
  o.endpoint = hub.url("");
  o.dir = t.path;
  const auto msg = error_of([&] { download_hf_model("owner/tiny-bert", o); });
  CHECK(contains(msg, "owner/tiny-bert: download failed: download of " + hub.url("/owner/tiny-bert/resolve/")));
  CHECK(contains(msg, "checksum mismatch (SHA-256 " + digest_hex<Sha256>(repo.weights)));
  CHECK(contains(msg, "to install it by hand, download config.json, vocab.txt and model.safetensors"));
  const auto left = files_in(t.path);
  CHECK(std::find(left.begin(), left.end(), "hf/owner/tiny-bert/pytorch_model.bin") == left.end());
  CHECK(std::find(left.begin(), left.end(), "hf/owner/tiny-bert/pytorch_model.bin.part") == left.end());
  CHECK(std::find(left.begin(), left.end(), "hf/owner/tiny-bert/.qnum-revision") == left.end());
}

TEST_CASE("download_hf_model offline and bad names: one line each") {
  TempDir t;
  HubOptions o;
  o.dir = t.path;
  if (have_curl()) {
    o.endpoint = "http://127.0.0.1:9";
    const auto msg = error_of([&] { download_hf_model("bert-tiny", o); });
    CHECK(contains(msg,
                   "prajjwal1/bert-tiny: download failed: download of http://127.0.0.1:9/api/models/"
                   "prajjwal1/bert-tiny/revision/main?blobs=true failed (curl exit 7"));
    CHECK(contains(msg, "from http://127.0.0.1:9/prajjwal1/bert-tiny/tree/main into " +
                            (t.path / "hf" / "prajjwal1" / "bert-tiny").string()));
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(!fs::exists(t.path / "hf" / "prajjwal1"));  // no empty folders left behind
  }
  CHECK(hub_repo_of("bert-tiny") == "prajjwal1/bert-tiny");
  CHECK(hub_repo_of("google/bert_uncased_L-2_H-128_A-2") == "google/bert_uncased_L-2_H-128_A-2");
  for (const char* bad : {"tiny", "a/b/c", "/abs", "owner/", "owner/../x", "own er/x"})
    CHECK(contains(error_of([&] { hub_repo_of(bad); }), "is not a Hugging Face model name"));
  CHECK(contains(error_of([&] { resolve_pretrained("runs/x/best", o); }),
                 "--load runs/x/best: no such file, folder or checkpoint, and not a Hugging Face model name"));
  fs::create_directories(t.path / "empty");
  CHECK(contains(error_of([&] { resolve_pretrained((t.path / "empty").string(), o); }),
                 "has neither model.safetensors nor pytorch_model.bin"));
  write_file_atomic(t.path / "best.safetensors", "x");
  CHECK(resolve_pretrained((t.path / "best").string(), o) == t.path / "best");
}

TEST_CASE("hub_bert_files: the description's shape is checked") {
  std::string sha;
  nlohmann::json j = {{"sha", kSha}, {"siblings", nlohmann::json::array()}};
  CHECK(contains(error_of([&] { hub_bert_files(j, "o/n", sha); }), "o/n has no config.json"));
  j["siblings"] = {{{"rfilename", "config.json"}, {"size", 3}},
                   {{"rfilename", "vocab.txt"}, {"blobId", std::string(40, 'a')}, {"size", 3}}};
  CHECK(contains(error_of([&] { hub_bert_files(j, "o/n", sha); }), "config.json has neither lfs.sha256 nor blobId"));
  j["siblings"][0]["blobId"] = std::string(40, 'b');
  CHECK(contains(error_of([&] { hub_bert_files(j, "o/n", sha); }),
                 "o/n has neither model.safetensors nor pytorch_model.bin"));
  j["siblings"].push_back(
      {{"rfilename", "model.safetensors"}, {"size", 10}, {"lfs", {{"sha256", std::string(64, 'c')}, {"size", 10}}}});
  j["siblings"].push_back({{"rfilename", "pytorch_model.bin"}, {"size", 10}, {"blobId", std::string(40, 'd')}});
  const auto files = hub_bert_files(j, "o/n", sha);
  REQUIRE(files.size() == 3);
  CHECK(files[2].name == "model.safetensors");  // preferred over the .bin
  CHECK(files[2].expected.sha256 == std::string(64, 'c'));
  CHECK(files[0].expected.git_sha1 == std::string(40, 'b'));
  j["sha"] = "main";
  CHECK(contains(error_of([&] { hub_bert_files(j, "o/n", sha); }), "commit 'main' is not 40 hex digits"));
}
