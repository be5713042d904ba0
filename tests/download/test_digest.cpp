// SHA-1 and SHA-256 (include/qnum/io/digest.hpp) against FIPS 180's examples (empty, "abc",
// the 448-bit message, a million 'a' fed in uneven chunks), and git blob ids as the hub
// lists them (`git hash-object` of "hello world\n").
#include <doctest/doctest.h>

#include <string>

#include "download/helpers.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/digest.hpp"

using namespace qnum;
using namespace qnum_test;

namespace {

template <class H>
std::string million_a_in_chunks() {
  H h;
  const std::string a(1000000, 'a');
  std::size_t done = 0, step = 1;
  while (done < a.size()) {
    const std::size_t n = std::min(step, a.size() - done);
    h.update(std::string_view(a).substr(done, n));
    done += n;
    step = step * 3 + 1;  // 1, 4, 13, ...: chunks that straddle block boundaries
  }
  return h.hex();
}

const std::string k448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

}  // namespace

TEST_CASE("sha256 matches FIPS 180-4's examples") {
  CHECK(digest_hex<Sha256>("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(digest_hex<Sha256>("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(digest_hex<Sha256>(k448) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(million_a_in_chunks<Sha256>() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha1 matches FIPS 180's examples") {
  CHECK(digest_hex<Sha1>("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(digest_hex<Sha1>("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(digest_hex<Sha1>(k448) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(million_a_in_chunks<Sha1>() == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST_CASE("file digests and git blob ids") {
  TempDir t;
  const auto f = t.path / "hello.txt";
  write_file_atomic(f, "hello world\n");
  CHECK(git_blob_sha1_file(f) == "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
  CHECK(digest_file<Sha256>(f) == digest_hex<Sha256>("hello world\n"));
  CHECK(digest_file<Md5>(f) == "6f5902ac237024bdd0c176cb93063dc4");
  CHECK(contains(error_of([&] { digest_file<Sha256>(t.path / "missing"); }), "checksum: cannot open"));
}
