// Hostile sizes: shapes whose element count leaves int64, headers that announce more data than
// the bytes present, and gzip output past its cap are refused by name before allocating
// (the .npy cases are in test_npy.cpp).
#include <doctest/doctest.h>

#include <string>

#include <zlib.h>

#include "qnum/core/shape.hpp"
#include "qnum/io/gzip.hpp"
#include "qnum/io/safetensors.hpp"

using namespace qnum;

namespace {
std::string gzip_bytes(const std::string& plain) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, plain.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string safetensors_with_header(const std::string& json) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json;
}
}  // namespace

TEST_CASE("shape: element counts are overflow-checked and name the dimension") {
  CHECK(numel({}) == 1);
  CHECK(numel({0, std::int64_t{1} << 62, 4}) == 0);
  CHECK(numel({std::int64_t{1} << 31, std::int64_t{1} << 31}) == std::int64_t{1} << 62);
  CHECK_THROWS_WITH_AS(numel({std::int64_t{1} << 32, std::int64_t{1} << 31}, "t"),
                       "t: shape [4294967296, 2147483648] has too many elements (the count overflows 64 bits at "
                       "dimension 1, of size 2147483648)",
                       Error);
  CHECK_THROWS_AS(numel({INT64_MAX, 2}), Error);
  CHECK_THROWS_AS(numel({-(std::int64_t{1} << 62), 4}), Error);
}

TEST_CASE("safetensors: huge shapes and offsets are checked against the bytes present") {
  CHECK_THROWS_WITH_AS(
      parse_safetensors(
          safetensors_with_header(R"({"w":{"dtype":"F32","shape":[1073741824,1073741824,1024],"data_offsets":[0,0]}})"),
          "f"),
      "f: tensor 'w': shape [1073741824,1073741824,1024] is too large", Error);
  CHECK_THROWS_WITH_AS(
      parse_safetensors(
          safetensors_with_header(R"({"w":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}})"), "f"),
      "f: tensor 'w': data_offsets [0, 4000000000] run past the data buffer (0 bytes)", Error);
  std::string huge_len(8, '\xff');
  CHECK_THROWS_AS(parse_safetensors(huge_len + "{}", "f"), Error);
}

TEST_CASE("gzip: output beyond the limit is refused, not allocated") {
  const std::string plain(1 << 20, 'a');
  const auto gz = gzip_bytes(plain);
  CHECK(gz.size() < 4096);  // ~1000:1, the shape of a gzip bomb
  CHECK(gunzip(gz, "g.gz") == plain);
  CHECK(gunzip(gz, "g.gz", plain.size()) == plain);
  CHECK_THROWS_WITH_AS(gunzip(gz, "g.gz", 100000),
                       "gzip: g.gz: decompresses to more than 100000 bytes; refused (a gzip bomb, or raise the limit)",
                       Error);
}

TEST_CASE("safetensors: metadata that is not UTF-8 is refused by the writer with qnum::Error") {
  // fuzz_checkpoint_meta: nlohmann's type_error 316 escaped from safetensors_bytes.
  CHECK_THROWS_AS(safetensors_bytes({}, {{"k", "bad \xe3\" utf-8"}}), Error);
}
