// .npy reading and writing: round trip, and each kind of malformed file rejected by name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>

#include "qnum/core/bits.hpp"
#include "qnum/io/npy.hpp"

using namespace qnum;

namespace {
std::string header(const std::string& dict) {
  std::string d = dict;
  const std::size_t total = 10 + d.size() + 1;
  d.append((64 - total % 64) % 64, ' ');
  d += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(d.size() & 0xff);
  out += static_cast<char>(d.size() >> 8);
  return out + d;
}
}  // namespace

TEST_CASE("npy: round trip through bytes and files") {
  const std::vector<float> v{1.0f, -2.5f, 3e38f, -0.0f, 1e-45f, 7.0f};
  for (const Shape& shape : {Shape{6}, Shape{2, 3}, Shape{1, 2, 3}, Shape{3, 1, 2, 1}}) {
    const auto bytes = npy_bytes(shape, v.data());
    CHECK(bytes.size() % 64 == 24 % 64);  // 64-byte aligned header + 24 data bytes
    const auto a = parse_npy(bytes, "mem");
    CHECK(a.shape == shape);
    CHECK(a.data.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(detail::float_bits(a.data[i]) == detail::float_bits(v[i]));
  }
  const auto empty = parse_npy(npy_bytes({0, 4}, nullptr), "mem");
  CHECK(empty.shape == Shape{0, 4});
  const auto scalar =
      parse_npy(header("{'descr': '<f4', 'fortran_order': False, 'shape': (), }") + std::string(4, '\0'), "mem");
  CHECK(scalar.shape.empty());
  CHECK(scalar.data.size() == 1);

  const auto path = std::filesystem::temp_directory_path() / "qnum_test_npy.npy";
  write_npy(path, {2, 3}, v);
  CHECK(read_npy(path).data == parse_npy(npy_bytes({2, 3}, v.data()), "x").data);
  std::filesystem::remove(path);
}

TEST_CASE("npy: malformed files are rejected with the reason") {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  CHECK_THROWS_WITH_AS(parse_npy("hello", "f"), "f: not a .npy file (missing \\x93NUMPY magic)", Error);
  CHECK_THROWS_WITH_AS(parse_npy(header(ok) + std::string(15, '\0'), "f"),
                       "f: truncated .npy data (15 bytes, shape [2, 2] needs 16)", Error);
  CHECK_THROWS_WITH_AS(parse_npy(header(ok) + std::string(17, '\0'), "f"),
                       "f: .npy has 1 trailing bytes after the data", Error);
  CHECK_THROWS_WITH_AS(
      parse_npy(header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }") + std::string(16, '\0'), "f"),
      "f: dtype '<f8' is not little-endian float32 ('<f4'); convert with x.astype(np.float32)", Error);
  CHECK_THROWS_WITH_AS(
      parse_npy(header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") + std::string(16, '\0'), "f"),
      "f: Fortran-ordered array; save a C-ordered copy (np.ascontiguousarray)", Error);
  CHECK_THROWS_AS(parse_npy(header(ok).substr(0, 30), "f"), Error);
  CHECK_THROWS_AS(parse_npy(header("{'descr': '<f4', 'shape': (2, 2), }") + std::string(16, '\0'), "f"), Error);
  CHECK_THROWS_WITH_AS(read_npy("/nonexistent/x.npy"), "cannot open '/nonexistent/x.npy'", Error);
}

TEST_CASE("npy: writes are atomic and never clobber on failure") {
  CHECK_THROWS_AS(write_npy("/nonexistent-dir/x.npy", {1}, {1.0f}), Error);
  // An existing file survives a write that fails (shape and data disagree), byte for byte,
  // and no temporary file is left beside it.
  const auto dir = std::filesystem::temp_directory_path() / ("qnum-npy-clobber-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "x.npy";
  write_npy(path, {3}, {1.0f, 2.0f, 3.0f});
  const auto before = read_npy(path);
  CHECK_THROWS_AS(write_npy(path, {2}, {1.0f}), Error);
  const auto after = read_npy(path);
  CHECK(after.shape == before.shape);
  CHECK(after.data == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}) == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: the fuzzer's overflowing shape is refused naming the dimension") {
  // Found by fuzz/fuzz_npy.cpp: this product overflowed int64 (undefined behaviour) and the
  // CLI reported a negative byte count.
  const auto bytes =
      header("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 1615, 20000, 2056353930, 205635393), }");
  CHECK_THROWS_WITH_AS(parse_npy(bytes, "x.npy"),
                       "x.npy: shape [4, 1615, 20000, 2056353930, 205635393] has too many elements (the count "
                       "overflows 64 bits at dimension 4, of size 205635393)",
                       Error);
}

TEST_CASE("npy: a count that fits int64 but not in bytes is truncated, not wrapped") {
  // 2^40 * 2^22 = 2^62 values: n * 4 = 2^64 wraps to 0 in 64-bit arithmetic.
  const auto bytes = header("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627775, 4194304), }");
  CHECK_THROWS_WITH_AS(parse_npy(bytes, "x.npy"),
                       "x.npy: truncated .npy data (0 bytes, shape [1099511627775, 4194304] needs "
                       "4611686018423193600 x 4)",
                       Error);
  CHECK_THROWS_WITH_AS(
      parse_npy(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }") + std::string(8, '\0'),
                "x.npy"),
      "x.npy: truncated .npy data (8 bytes, shape [1000000000] needs 4000000000)", Error);
}

TEST_CASE("npy: bytes of the file quoted in a message are escaped and cut (one line)") {
  // Found by fuzz/fuzz_npy.cpp: a dtype running into the header's newline and NULs.
  const auto h = header("{'descr': '<f\n\x01" + std::string(60, 'x') + ", 'fortran_order': False, 'shape': (3,), }");
  CHECK_THROWS_WITH_AS(parse_npy(h, "x.npy"),
                       "x.npy: dtype '<f\\n\\x01xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is not little-endian float32 "
                       "('<f4'); convert with x.astype(np.float32)",
                       Error);
}
