// Hostile sizes: shapes whose element count leaves int64, headers that announce more data than
// the bytes present, gzip output past its cap, and text files with a 1 GB line, a huge size
// or too many rows are refused by name before allocating (the .npy cases are in
// test_npy.cpp), and JSON nested deeper than 128 levels is refused. Large files are sparse: they take neither disk nor
// memory.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <zlib.h>

#include "error_of.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/data/wordpiece.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/gzip.hpp"
#include "qnum/io/json.hpp"
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

// A file of `size` bytes: `head`, then a hole of zero bytes (no disk, no page cache).
struct SparseFile {
  std::filesystem::path path;
  SparseFile(const std::string& name, const std::string& head, std::uintmax_t size)
      : path(std::filesystem::temp_directory_path() / ("qnum-hostile-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path, std::ios::binary) << head;
    std::filesystem::resize_file(path, size);
  }
  ~SparseFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

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

TEST_CASE("JSON nested deeper than 128 levels is refused before anything copies it") {
  // fuzz_pass_config: a config nested a million deep parsed (nlohmann parses without
  // recursion), then overflowed the stack where it was copied.
  auto nested = [](int levels, char open, const std::string& inner, char close) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += open == '{' ? std::string("{\"k\":") : std::string(1, open);
    s += inner;
    return s + std::string(static_cast<std::size_t>(levels), close);
  };
  CHECK(io::parse_json(nested(128, '[', "1", ']'), "j").is_array());
  CHECK(io::parse_json(nested(128, '{', "1", '}'), "j").is_object());
  CHECK_THROWS_WITH_AS(io::parse_json(nested(129, '[', "1", ']'), "j"), "j: nests deeper than 128 levels", Error);
  CHECK_THROWS_WITH_AS(io::parse_json(nested(129, '{', "1", '}'), "j", false), "j: nests deeper than 128 levels",
                       Error);
  CHECK_THROWS_WITH_AS(io::parse_json(std::string(1'000'000, '['), "j", false), "j: nests deeper than 128 levels",
                       Error);
  CHECK(io::parse_json("[", "j", false).is_discarded());  // other errors as nlohmann reports them
  int keys = 0;                                           // a caller's parser callback still sees every event
  io::parse_json(R"({"a":{"b":1},"c":2})", "j", true, [&](int, nlohmann::json::parse_event_t e, nlohmann::json&) {
    keys += e == nlohmann::json::parse_event_t::key;
    return true;
  });
  CHECK(keys == 3);
  CHECK_THROWS_WITH_AS(
      parse_safetensors(safetensors_with_header("{\"__metadata__\":" + nested(200, '[', "1", ']') + "}"), "f"),
      "f: header: nests deeper than 128 levels", Error);
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

TEST_CASE("read_file and read_line: a size limit is checked before the bytes are held") {
  const SparseFile big("big.txt", "x", std::uintmax_t{3} << 30);  // 3 GiB
  CHECK(qnum_test::error_of([&] { (void)read_file(big.path, 1 << 20); }) ==
        "'" + big.path.string() + "' is larger than 1048576 bytes; refused (not the file expected?)");
  std::istringstream in(std::string(5000, 'y') + "\nshort\n");
  std::string line;
  CHECK(qnum_test::error_of([&] { (void)read_line(in, line, 4096, "f.csv:1"); }) ==
        "f.csv:1: line longer than 4096 bytes; refused (not the file expected?)");
  std::istringstream ok("a\n\nb");
  CHECK((read_line(ok, line, 1, "f") && line == "a"));
  CHECK((read_line(ok, line, 1, "f") && line.empty()));
  CHECK((read_line(ok, line, 1, "f") && line == "b"));
  CHECK(!read_line(ok, line, 1, "f"));
}

TEST_CASE("text readers: a 1 GB line, a file beyond the limits, too many rows or columns are refused") {
  // JSC: a 1 GB line is refused after 1 MiB of it.
  const SparseFile jsc("line.csv", "j_zlogZ,", std::uintmax_t{1} << 30);
  CHECK(qnum_test::error_of([&] { (void)data::read_jsc_csv(jsc.path); }) ==
        jsc.path.string() + ":1: line longer than 1048576 bytes; refused (not the file expected?)");
  const SparseFile arff("line.arff", "@relation jsc\n", std::uintmax_t{1} << 30);
  CHECK(qnum_test::error_of([&] { (void)data::read_jsc_arff(arff.path); }) ==
        arff.path.string() + ":2: line longer than 1048576 bytes; refused (not the file expected?)");
  // IMDb: a 3 GiB file is refused before reading; rows and columns have limits.
  const SparseFile tsv("big.tsv", "label\ttext\n1\t", std::uintmax_t{3} << 30);
  CHECK(qnum_test::error_of([&] {
          (void)data::read_imdb_tsv(tsv.path);
        }).find("is larger than 2147483648 bytes; refused") != std::string::npos);
  CHECK(qnum_test::error_of([&] { (void)data::parse_imdb_tsv("label\ttext\n1\ta\n0\tb\n1\tc\n", "f.tsv", 2); }) ==
        "f.tsv:4: more than 2 reviews; refused");
  CHECK(qnum_test::error_of([&] {
          (void)data::parse_imdb_csv("review,sentiment\na,pos\nb,neg\nc,pos\n", "f.csv", 2);
        }) == "f.csv:4: more than 2 reviews; refused");
  std::string wide = "label";
  for (int i = 0; i < 100; ++i) wide += "\tc" + std::to_string(i);
  CHECK(qnum_test::error_of([&] { (void)data::parse_imdb_tsv(wide + "\ttext\n", "f.tsv"); }) ==
        "f.tsv:1: more than 64 columns in the header; refused");
  CHECK(qnum_test::error_of([&] {
          (void)data::parse_imdb_csv("review,sentiment\n" + std::string(1000, ',') + "\n", "f.csv");
        }) == "f.csv:2: more than 64 fields; refused");
  // A gzip file whose content passes the limit: refused while decompressing.
  const std::string plain(1 << 20, 'a');
  const auto gz_path = std::filesystem::temp_directory_path() / ("qnum-hostile-" + std::to_string(::getpid()) + ".gz");
  std::ofstream(gz_path, std::ios::binary) << gzip_bytes(plain);
  CHECK(read_maybe_gzip(gz_path) == plain);
  CHECK(qnum_test::error_of([&] {
          (void)read_maybe_gzip(gz_path, 4096);
        }).find("decompresses to more than 4096 bytes") != std::string::npos);
  std::filesystem::remove(gz_path);
  // vocab.txt: a 100 MB file is refused before reading.
  const SparseFile vocab("vocab.txt", "[PAD]\n", std::uintmax_t{100} << 20);
  CHECK(qnum_test::error_of([&] {
          (void)data::WordPieceTokenizer::from_file(vocab.path);
        }).find("is larger than 67108864 bytes") != std::string::npos);
}
