// download_file through curl against a loopback HTTP server (127.0.0.1 only): a transfer cut
// short keeps its .part and the next call continues it with a Range request; a server that
// ignores ranges makes the download start over; a wrong size or digest is rejected with
// nothing left in the cache; file:// parts resume too.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "download/helpers.hpp"
#include "download/loopback_http.hpp"
#include "qnum/data/download.hpp"
#include "qnum/io/atomic_file.hpp"

using namespace qnum;
using namespace qnum::data;
using namespace qnum_test;

namespace {

/// 100 kB of bytes that differ from position to position (a shifted or repeated block shows).
std::string payload() {
  std::string s(100000, '\0');
  std::uint32_t x = 27;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

ExpectedFile expected_of(const std::string& body) {
  ExpectedFile e;
  e.size = body.size();
  e.sha256 = digest_hex<Sha256>(body);
  return e;
}

}  // namespace

TEST_CASE("download_file over HTTP: interrupted, then resumed with a Range request") {
  if (!have_curl()) return;
  TempDir t;
  const std::string body = payload();
  LoopbackHttp server({{"/w.bin", {body, 30000, true}}});
  const auto dest = t.path / "cache" / "w.bin";

  const auto first = error_of([&] { download_file(server.url("/w.bin"), expected_of(body), dest); });
  CHECK(contains(first, "failed (curl exit 18"));  // transfer closed with bytes remaining
  CHECK(contains(first, "30000 bytes kept in " + dest.string() + ".part: run the download again to resume"));
  CHECK(files_in(t.path / "cache") == std::vector<std::string>{"w.bin.part"});
  CHECK(!fs::exists(dest));

  CHECK(download_file(server.url("/w.bin"), expected_of(body), dest) == dest);
  CHECK(read_file(dest) == body);
  CHECK(files_in(t.path / "cache") == std::vector<std::string>{"w.bin"});
  const auto log = server.requests();
  REQUIRE(log.size() == 2);
  CHECK(log[0] == "GET /w.bin");
  CHECK(log[1] == "GET /w.bin Range: bytes=30000-");

  // Downloaded once: a third call finds the file in place and fetches nothing.
  CHECK(download_file(server.url("/w.bin"), expected_of(body), dest) == dest);
  CHECK(server.requests().size() == 2);
}

TEST_CASE("download_file over HTTP: a server that ignores ranges makes it start over") {
  if (!have_curl()) return;
  TempDir t;
  const std::string body = payload();
  LoopbackHttp server({{"/w.bin", {body, std::string::npos, false}}});
  const auto dest = t.path / "w.bin";
  write_file_atomic(t.path / "w.bin.part", body.substr(0, 1000));
  download_file(server.url("/w.bin"), expected_of(body), dest);
  CHECK(read_file(dest) == body);
  CHECK(files_in(t.path) == std::vector<std::string>{"w.bin"});
  CHECK(server.requests().size() == 2);  // the refused resume, then the whole file
}

TEST_CASE("download_file: wrong checksums and sizes leave nothing in the cache") {
  if (!have_curl()) return;
  TempDir t;
  const std::string body = payload();
  LoopbackHttp server({{"/w.bin", {body, std::string::npos, true}}});
  const auto dest = t.path / "cache" / "w.bin";
  SUBCASE("wrong SHA-256") {
    ExpectedFile e = expected_of(body);
    e.sha256 = std::string(64, 'a');
    const auto msg = error_of([&] { download_file(server.url("/w.bin"), e, dest); });
    CHECK(contains(msg, "checksum mismatch (SHA-256 " + digest_hex<Sha256>(body) + ", expected " + e.sha256));
    CHECK(contains(msg, "the file was discarded"));
  }
  SUBCASE("wrong size") {
    ExpectedFile e = expected_of(body);
    e.size = body.size() + 1;
    CHECK(contains(error_of([&] { download_file(server.url("/w.bin"), e, dest); }),
                   "checksum mismatch (size 100000 bytes, expected 100001)"));
  }
  SUBCASE("wrong git blob id") {
    ExpectedFile e;
    e.git_sha1 = std::string(40, '0');
    CHECK(contains(error_of([&] { download_file(server.url("/w.bin"), e, dest); }), "git blob SHA-1"));
  }
  SUBCASE("404") {
    CHECK(contains(error_of([&] { download_file(server.url("/nope"), expected_of(body), dest); }),
                   "failed (curl exit 22"));
  }
  CHECK(files_in(t.path).empty());
  SUBCASE("no checksum at all is refused before fetching") {
    CHECK(contains(error_of([&] { download_file(server.url("/w.bin"), ExpectedFile{}, dest); }),
                   "no checksum to verify it against"));
    CHECK(server.requests().empty());
  }
}

TEST_CASE("download_file on file:// URLs continues a partial file, and skips a complete one") {
  if (!have_curl()) return;
  TempDir t;
  const std::string body = payload();
  write_file_atomic(t.path / "src.bin", body);
  const auto dest = t.path / "cache" / "w.bin";
  fs::create_directories(dest.parent_path());
  SUBCASE("partial") { write_file_atomic(dest.string() + ".part", body.substr(0, 4096)); }
  SUBCASE("complete, fetched by a run killed before the rename") { write_file_atomic(dest.string() + ".part", body); }
  SUBCASE("a part longer than the file is not a prefix of it: dropped") {
    write_file_atomic(dest.string() + ".part", body + "extra");
  }
  download_file(file_url(t.path / "src.bin"), expected_of(body), dest);
  CHECK(read_file(dest) == body);
  CHECK(files_in(dest.parent_path()) == std::vector<std::string>{"w.bin"});
}

TEST_CASE("download_file with a fetcher: a part that is corrupt is discarded, not kept") {
  TempDir t;
  const auto dest = t.path / "w.bin";
  const std::string body = "abcdef";
  write_file_atomic(dest.string() + ".part", "abX");  // a prefix that is wrong
  const Fetcher append = [&](const std::string&, const fs::path& out) {
    const auto have = fs::exists(out) ? read_file(out) : std::string();
    write_file_atomic(out, have + body.substr(have.size()));
  };
  CHECK(contains(error_of([&] { download_file("mem://w", expected_of(body), dest, append); }), "checksum mismatch"));
  CHECK(files_in(t.path).empty());
  download_file("mem://w", expected_of(body), dest, append);  // the next run starts clean
  CHECK(read_file(dest) == body);
}
