// Dataset downloads without a network: MD5 against RFC 1321's test suite, download_verified
// through curl on file:// URLs (checksum ok, checksum mismatch, missing file, refused
// connection: errors say so and nothing is left behind), through an in-process fetcher (the
// same rules without curl), and download_jsc from a file:// OpenML data description whose
// failure message says which file to put where.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "download/helpers.hpp"
#include "qnum/data/download.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/io/atomic_file.hpp"

using namespace qnum;
using namespace qnum::data;
using namespace qnum_test;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "datasets";
const std::string kPayload = "qnum download test payload\n";
const std::string kPayloadMd5 = "d5113fff62a79451898e07de29becb37";  // md5sum of kPayload

}  // namespace

TEST_CASE("md5 matches RFC 1321's test suite, in one piece and in chunks") {
  CHECK(md5_hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(md5_hex("a") == "0cc175b9c0f1b6a831c399e269772661");
  CHECK(md5_hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(md5_hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(md5_hex("abcdefghijklmnopqrstuvwxyz") == "c3fcd3d76192e4007dfb496cca67e13b");
  CHECK(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") ==
        "d174ab98d277d9f5a5611c2c9f419d9f");
  CHECK(md5_hex("1234567890123456789012345678901234567890123456789012345678901234567890123456789"
                "0") == "57edf4a22be3c955ac49da2e2107b67a");
  Md5 h;  // a million 'a' in uneven chunks crosses every block boundary case
  const std::string chunk(977, 'a');
  std::size_t left = 1000000;
  while (left > 0) {
    const std::size_t n = std::min(left, chunk.size());
    h.update(std::string_view(chunk).substr(0, n));
    left -= n;
  }
  CHECK(h.hex() == "7707d6ae4e027c70eea2a935c2296f21");
  TempDir t;
  write_file_atomic(t.path / "p.txt", kPayload);
  CHECK(md5_file(t.path / "p.txt") == kPayloadMd5);
}

TEST_CASE("download_verified with an in-process fetcher: ok, mismatch, fetch failure") {
  TempDir t;
  const fs::path dest = t.path / "cache" / "jsc" / "data.arff";
  const Fetcher serve = [](const std::string&, const fs::path& out) { write_file_atomic(out, kPayload); };

  SUBCASE("checksum ok: the file is in place, nothing else is left") {
    CHECK(download_verified("mem://payload", "D5113FFF62A79451898E07DE29BECB37", dest, serve) == dest);
    CHECK(read_file(dest) == kPayload);
    CHECK(files_in(t.path) == std::vector<std::string>{"cache/jsc/data.arff"});
  }
  SUBCASE("checksum mismatch: error, no file at dest, no temporary left") {
    const auto e = error_of([&] { download_verified("mem://payload", std::string(32, '0'), dest, serve); });
    CHECK(contains(e, "checksum mismatch (MD5 " + kPayloadMd5 + ", expected 00000000000000000000000000000000)"));
    CHECK(!fs::exists(dest));
    CHECK(files_in(t.path).empty());
  }
  SUBCASE("an existing good file is not replaced by a bad download") {
    fs::create_directories(dest.parent_path());
    write_file_atomic(dest, "old contents");
    CHECK(contains(error_of([&] { download_verified("mem://payload", std::string(32, 'f'), dest, serve); }),
                   "checksum mismatch"));
    CHECK(read_file(dest) == "old contents");
    CHECK(files_in(t.path).size() == 1);
  }
  SUBCASE("the fetcher fails half way: its error, no partial file") {
    const Fetcher broken = [](const std::string& url, const fs::path& out) {
      write_file_atomic(out, "partial");
      qnum::detail::fail("connection reset while fetching ", url);
    };
    CHECK(contains(error_of([&] { download_verified("mem://x", kPayloadMd5, dest, broken); }),
                   "connection reset while fetching mem://x"));
    CHECK(files_in(t.path).empty());
  }
  SUBCASE("a malformed expected checksum is rejected before fetching") {
    CHECK(contains(error_of([&] { download_verified("mem://x", "abc", dest, serve); }), "is not 32 hex digits"));
  }
}

TEST_CASE("download_verified through curl on file:// URLs and a refused connection") {
  if (!have_curl()) return;
  TempDir t;
  const fs::path src = t.path / "remote" / "payload.txt";
  fs::create_directories(src.parent_path());
  write_file_atomic(src, kPayload);
  const fs::path dest = t.path / "cache" / "jsc" / "payload.txt";

  SUBCASE("checksum ok") {
    download_verified(file_url(src), kPayloadMd5, dest);
    CHECK(read_file(dest) == kPayload);
    CHECK(files_in(dest.parent_path()) == std::vector<std::string>{"payload.txt"});
  }
  SUBCASE("checksum mismatch: error and no file left in the cache") {
    CHECK(
        contains(error_of([&] { download_verified(file_url(src), std::string(32, 'a'), dest); }), "checksum mismatch"));
    CHECK(files_in(dest.parent_path()).empty());
  }
  SUBCASE("missing remote file: curl's error, nothing left") {
    const auto e = error_of([&] { download_verified(file_url(t.path / "remote" / "nope.txt"), kPayloadMd5, dest); });
    CHECK(contains(e, "download of file://"));
    CHECK(contains(e, "failed (curl exit 37"));
    CHECK(files_in(dest.parent_path()).empty());
  }
  SUBCASE("no network (connection refused): curl's error, nothing left") {
    const auto e = error_of([&] { download_verified("http://127.0.0.1:9/x.arff", kPayloadMd5, dest); });
    CHECK(contains(e, "download of http://127.0.0.1:9/x.arff failed (curl exit 7"));
    CHECK(files_in(dest.parent_path()).empty());
  }
  SUBCASE("curl missing from PATH: the error says to install it") {
    EnvGuard path("PATH", "/nonexistent-qnum-test-dir");
    CHECK(contains(error_of([&] { download_verified(file_url(src), kPayloadMd5, dest); }), "curl is not installed"));
    CHECK(files_in(dest.parent_path()).empty());
  }
}

TEST_CASE("download_jsc: OpenML's data description names the file and its MD5") {
  if (!have_curl()) return;
  TempDir t;
  const fs::path arff = kFixtures / "jsc_small.arff";
  auto description = [&](const std::string& name, const std::string& format, const std::string& md5) {
    nlohmann::json d = {{"data_set_description",
                         {{"id", "42468"},
                          {"name", name},
                          {"format", format},
                          {"file_id", "1"},
                          {"url", file_url(arff)},
                          {"md5_checksum", md5}}}};
    const fs::path p = t.path / "remote" / (name + format + md5 + ".json");
    fs::create_directories(p.parent_path());
    write_file_atomic(p, d.dump());
    return file_url(p);
  };
  const fs::path cache = t.path / "cache";
  const fs::path dest = cache / "jsc" / "hls4ml_lhc_jets_hlf.arff";

  SUBCASE("verified download, then found and read like a user's file") {
    const auto got = download_jsc({description("hls4ml_lhc_jets_hlf", "ARFF", md5_file(arff)), cache});
    CHECK(got == dest);
    CHECK(read_file(dest) == read_file(arff));
    CHECK(files_in(cache) == std::vector<std::string>{"jsc/hls4ml_lhc_jets_hlf.arff"});
    EnvGuard data_dir("QNUM_DATA_DIR", cache.c_str());
    CHECK(locate_jsc() == dest);
    CHECK(read_jsc_file(dest).labels.size() == read_jsc_file(arff).labels.size());
  }
  SUBCASE("checksum mismatch: nothing in the cache; the message says what to put where") {
    const auto e = error_of([&] {
      download_jsc({description("hls4ml_lhc_jets_hlf", "ARFF", std::string(32, 'b')), cache});
    });
    CHECK(contains(e, "jsc: download failed: "));
    CHECK(contains(e, "checksum mismatch"));
    CHECK(contains(e, "put it at " + dest.string()));
    CHECK(files_in(cache).empty());
  }
  SUBCASE("a description of another dataset or format is refused") {
    CHECK(contains(error_of([&] {
                     download_jsc({description("iris", "ARFF", md5_file(arff)), cache});
                   }),
                   "is for dataset 'iris', not hls4ml_lhc_jets_hlf"));
    CHECK(contains(error_of([&] {
                     download_jsc({description("hls4ml_lhc_jets_hlf", "Sparse_ARFF", md5_file(arff)), cache});
                   }),
                   "offers format 'Sparse_ARFF', not ARFF"));
    CHECK(files_in(cache).empty());
  }
  SUBCASE("no network: curl's error and where to put the file by hand") {
    const auto e = error_of([&] { download_jsc({"http://127.0.0.1:9/api/v1/json/data/42468", cache}); });
    CHECK(contains(e, "failed (curl exit 7"));
    CHECK(contains(e, "https://www.openml.org/d/42468"));
    CHECK(contains(e, "put it at " + dest.string() + " (or in $QNUM_DATA_DIR/jsc/)"));
    CHECK(e.find('\n') == std::string::npos);  // one line, however often curl retried
    CHECK(!fs::exists(cache / "jsc"));         // the directory it made is gone again
  }
  SUBCASE("a description that is not JSON") {
    const fs::path p = t.path / "remote" / "bad.json";
    fs::create_directories(p.parent_path());
    write_file_atomic(p, "<html>rate limited</html>");
    CHECK(contains(error_of([&] { download_jsc({file_url(p), cache}); }), "is not JSON"));
    CHECK(files_in(cache).empty());
  }
}
