// Hostile sizes: shapes whose element count leaves int64, and headers that announce more data
// than the bytes present, are refused by name before anything is allocated.
#include <doctest/doctest.h>

#include <string>

#include <zlib.h>

#include "qnum/core/shape.hpp"
#include "qnum/io/gzip.hpp"
#include "qnum/io/npy.hpp"
#include "qnum/io/safetensors.hpp"

using namespace qnum;

namespace {
std::string npy_header(const std::string& shape, const std::string& descr = "'<f4'") {
  std::string d = "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t total = 10 + d.size() + 1;
  d.append((64 - total % 64) % 64, ' ');
  d += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(d.size() & 0xff);
  out += static_cast<char>(d.size() >> 8);
  return out + d;
}

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

TEST_CASE("npy: the fuzzer's overflowing shape is refused naming the dimension") {
  // Found by fuzz/fuzz_npy.cpp: this product overflowed int64 (undefined behaviour) and the
  // CLI reported a negative byte count.
  const auto bytes = npy_header("(4, 1615, 20000, 2056353930, 205635393)");
  CHECK_THROWS_WITH_AS(parse_npy(bytes, "x.npy"),
                       "x.npy: shape [4, 1615, 20000, 2056353930, 205635393] has too many elements (the count "
                       "overflows 64 bits at dimension 4, of size 205635393)",
                       Error);
}

TEST_CASE("npy: a count that fits int64 but not in bytes is truncated, not wrapped") {
  // 2^40 * 2^22 = 2^62 values: n * 4 = 2^64 wraps to 0 in 64-bit arithmetic.
  const auto bytes = npy_header("(1099511627775, 4194304)");
  CHECK_THROWS_WITH_AS(parse_npy(bytes, "x.npy"),
                       "x.npy: truncated .npy data (0 bytes, shape [1099511627775, 4194304] needs "
                       "4611686018423193600 x 4)",
                       Error);
  CHECK_THROWS_WITH_AS(parse_npy(npy_header("(1000000000,)") + std::string(8, '\0'), "x.npy"),
                       "x.npy: truncated .npy data (8 bytes, shape [1000000000] needs 4000000000)", Error);
}

TEST_CASE("safetensors: huge shapes and offsets are checked against the bytes present") {
  CHECK_THROWS_WITH_AS(
      parse_safetensors(safetensors_with_header(
                            R"({"w":{"dtype":"F32","shape":[1073741824,1073741824,1024],"data_offsets":[0,0]}})"),
                        "f"),
      "f: tensor 'w': shape [1073741824,1073741824,1024] is too large", Error);
  CHECK_THROWS_WITH_AS(
      parse_safetensors(
          safetensors_with_header(R"({"w":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}})"),
          "f"),
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
  CHECK_THROWS_WITH_AS(gunzip(gz, "g.gz", 100000), "gzip: g.gz: decompresses to more than 100000 bytes; refused (a gzip bomb, or raise the limit)", Error);
}

TEST_CASE("npy: bytes of the file quoted in a message are escaped and cut (one line)") {
  // Found by fuzz/fuzz_npy.cpp: a dtype running into the header's newline and NULs.
  const auto h = npy_header("(3,)", "'<f\n\x01" + std::string(60, 'x'));
  CHECK_THROWS_WITH_AS(parse_npy(h, "x.npy"),
                       "x.npy: dtype '<f\\n\\x01xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is not little-endian float32 "
                       "('<f4'); convert with x.astype(np.float32)",
                       Error);
}
