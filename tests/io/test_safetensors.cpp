// safetensors reading and writing: round trips, files written by Python's `safetensors`
// (tests/fixtures/safetensors, made by make_fixtures.py: F32, F16, BF16, metadata), and every
// kind of malformed file rejected with the file name and the reason.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include "qnum/core/bits.hpp"
#include "qnum/io/safetensors.hpp"

using namespace qnum;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(QNUM_TEST_FIXTURES_DIR) / "safetensors";

/// A file from a header text and a buffer (the header length is the text's size).
std::string file_bytes(const std::string& header, const std::string& buffer) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((std::uint64_t{header.size()} >> (8 * i)) & 0xff);
  return out + header + buffer;
}

std::vector<std::uint32_t> bits_of(const Tensor& t) {
  std::vector<std::uint32_t> b;
  for (float v : t.values()) b.push_back(detail::float_bits(v));
  return b;
}

/// Writes bytes to a temp file, reads it, and returns the error message (or "" on success).
std::string read_error(const std::string& bytes, const std::filesystem::path& path) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    read_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: round trip through bytes and files") {
  const std::map<std::string, Tensor> tensors{
      {"layer.weight", Tensor({2, 3}, {1.0f, -2.5f, 3e38f, -0.0f, 1e-45f, std::numeric_limits<float>::infinity()})},
      {"bias", Tensor({3}, {0.5f, 0.25f, -7.0f})},
      {"scalar", Tensor::scalar(42.0f)},
      {"empty", Tensor::zeros({0, 5})},
      {"r4", Tensor::randn({2, 1, 3, 2}, 7)},
  };
  const std::map<std::string, std::string> meta{{"model", "jsc-tiny"}, {"epoch", "12"}, {"quote\"d", "x\ny"}};
  const std::string bytes = safetensors_bytes(tensors, meta);

  std::uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  CHECK(header_len % 8 == 0);  // the buffer starts 8-byte aligned, as the reference writer does
  CHECK(bytes.size() == 8 + header_len + (6 + 3 + 1 + 0 + 12) * 4);
  // tensors are laid out by name: bias, empty, layer.weight, r4, scalar
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  CHECK(header["bias"]["data_offsets"] == nlohmann::json::array({0, 12}));
  CHECK(header["empty"]["data_offsets"] == nlohmann::json::array({12, 12}));
  CHECK(header["layer.weight"]["data_offsets"] == nlohmann::json::array({12, 36}));
  CHECK(header["r4"]["data_offsets"] == nlohmann::json::array({36, 84}));
  CHECK(header["scalar"]["data_offsets"] == nlohmann::json::array({84, 88}));
  CHECK(header["scalar"]["shape"] == nlohmann::json::array());
  CHECK(header["layer.weight"]["dtype"] == "F32");

  const auto back = parse_safetensors(bytes, "mem");
  CHECK(back.metadata == meta);
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    CAPTURE(name);
    REQUIRE(back.tensors.count(name) == 1);
    CHECK(back.tensors.at(name).shape() == t.shape());
    CHECK(bits_of(back.tensors.at(name)) == bits_of(t));
  }

  const auto path = std::filesystem::temp_directory_path() / "qnum_test_safetensors.safetensors";
  write_safetensors(path, tensors);
  const auto file = read_safetensors(path);
  CHECK(file.metadata.empty());
  CHECK(bits_of(file.tensors.at("r4")) == bits_of(tensors.at("r4")));
  std::filesystem::remove(path);

  const auto none = parse_safetensors(safetensors_bytes({}), "mem");
  CHECK(none.tensors.empty());
  CHECK(none.metadata.empty());
}

TEST_CASE("safetensors: files written by Python's safetensors (F32, F16, BF16, metadata)") {
  const auto f = read_safetensors(kFixtures / "mixed.safetensors");
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"model", "jsc-tiny"}, {"epoch", "3"}});
  REQUIRE(f.tensors.size() == 7);
  CHECK(f.tensors.at("weight").shape() == Shape{3, 4});
  for (int i = 0; i < 12; ++i) CHECK(f.tensors.at("weight").values()[i] == 0.5f * i - 2.0f);
  CHECK(f.tensors.at("bias").to_vector() == std::vector<float>{1.5f, -0.25f, 3e38f});
  CHECK(f.tensors.at("step").shape().empty());
  CHECK(f.tensors.at("step").item() == 7.0f);
  CHECK(f.tensors.at("empty").shape() == Shape{0, 3});
  CHECK(f.tensors.at("rank4").shape() == Shape{1, 2, 2, 4});
  CHECK(f.tensors.at("rank4").values()[15] == 15.0f);

  const auto& h = f.tensors.at("half");  // F16, widened exactly
  CHECK(h.shape() == Shape{10});
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want_h{0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0x1p-24f, 0x1p-14f, 0.333251953125f, inf, -inf};
  CHECK(bits_of(h) == bits_of(Tensor({10}, want_h)));

  const auto& b = f.tensors.at("brain");  // BF16
  CHECK(b.shape() == Shape{2, 3});
  const std::vector<float> want_b{1.0f, -3.0f, 0.0078125f, std::bit_cast<float>(0x7f7f0000u), 0x1p-133f, -0.0f};
  CHECK(bits_of(b) == bits_of(Tensor({2, 3}, want_b)));

  const auto n = read_safetensors(kFixtures / "nan_f16.safetensors");
  CHECK(n.metadata.empty());
  CHECK(std::isnan(n.tensors.at("x").values()[0]));
  CHECK(n.tensors.at("x").values()[1] == 1.0f);

  CHECK_THROWS_WITH_AS(read_safetensors(kFixtures / "rank5_f32.safetensors"),
                       ((kFixtures / "rank5_f32.safetensors").string() +
                        ": tensor 't': rank 5 (shape [1, 1, 1, 1, 2]) is above the 4 qnum tensors support")
                           .c_str(),
                       Error);
}

TEST_CASE("safetensors: every F16 code widens exactly") {
  int bad = 0;
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const auto h = static_cast<std::uint16_t>(c);
    const int e = (c >> 10) & 0x1f, m = c & 0x3ff;
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    const float got = detail::half_bits_to_float(h);
    if (e == 31) {
      bad += m == 0 ? !(std::isinf(got) && std::signbit(got) == bool(c >> 15)) : !std::isnan(got);
    } else {
      bad += got != static_cast<float>((c >> 15) ? -mag : mag) || std::signbit(got) != bool(c >> 15);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("safetensors: malformed files are rejected with the file and the reason") {
  const auto path = std::filesystem::temp_directory_path() / "qnum_bad.safetensors";
  const std::string p = path.string() + ": ";
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(read_error(file_bytes(f32x2, std::string(8, '\0')), path).empty());

  CHECK(read_error("abc", path) == p + "truncated safetensors file (3 bytes; the 8-byte header length is missing)");
  CHECK(read_error(std::string(8, '\0'), path) == p + "header is not a JSON object (it must start with '{')");
  {
    std::string b = file_bytes(f32x2, std::string(8, '\0'));
    b[0] = static_cast<char>(0xff);
    b[1] = static_cast<char>(0x7f);  // 0x7fff, far past the end
    CHECK(read_error(b, path) ==
          p + "header length 32767 runs past the end of the file (62 bytes follow the length field)");
    b = file_bytes(f32x2, "");
    b.resize(20);  // cut inside the header
    CHECK(read_error(b, path) ==
          p + "header length 54 runs past the end of the file (12 bytes follow the length field)");
    b = file_bytes(f32x2, "");
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(0xff);  // 2^64 - 1
    CHECK(read_error(b, path).find("header length 18446744073709551615 runs past the end") != std::string::npos);
  }
  CHECK(read_error(file_bytes(R"({"a": {"dtype": "F32",)", ""), path).rfind(p + "header is not valid JSON (", 0) == 0);
  CHECK(read_error(file_bytes("[1, 2]", ""), path) == p + "header is not a JSON object (it must start with '{')");
  CHECK(read_error(file_bytes(R"({"a": 1})", ""), path) ==
        p + "tensor 'a' is not an object with dtype, shape and data_offsets");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[0]}})", ""), path) ==
        p + "tensor 'a' has no 'data_offsets'");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': unknown dtype 'F17'");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': dtype I32 is not supported (qnum reads F32, F16 and BF16, and I8 and U8 as bytes)");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': shape must hold non-negative integers, got -2");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': shape must hold non-negative integers, got 2.5");
  CHECK(
      read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[1,1,1,1,2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 path) == p + "tensor 'a': rank 5 (shape [1, 1, 1, 1, 2]) is above the 4 qnum tensors support");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, '\0')), path) ==
        p + "tensor 'a': data_offsets must be [begin, end], got [0]");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': data_offsets [8, 0] end before they begin");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0')),
                   path) == p + "tensor 'a': data_offsets [0, 8] run past the data buffer (4 bytes)");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                   path) == p + "tensor 'a': data_offsets [0, 8] hold 8 bytes, but shape [2] of BF16 needs 4");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"( "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              std::string(12, '\0')),
                   path) == p + "tensors 'a' and 'b' overlap in the data buffer ([0, 8) and [4, 12))");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')),
                   path) == p + "4 unused bytes before tensor 'a' in the data buffer (offset 0)");
  CHECK(read_error(file_bytes(f32x2, std::string(10, '\0')), path) ==
        p + "2 bytes after the last tensor in the data buffer");
  CHECK(read_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"( "a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                              std::string(16, '\0')),
                   path) == p + "duplicate tensor name 'a' in the header");
  CHECK(read_error(file_bytes(R"({"__metadata__":{"k":3}})", ""), path) ==
        p + "__metadata__ value of 'k' is not a string (3)");
  CHECK(read_error(file_bytes(R"({"__metadata__":[]})", ""), path) == p + "__metadata__ must be an object of strings");
  // Nested objects may repeat keys that are not tensor names (only the top level is checked).
  CHECK(read_error(file_bytes(R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                              std::string(8, '\0')),
                   path)
            .empty());
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(read_safetensors("/nonexistent/x.safetensors"), "cannot open '/nonexistent/x.safetensors'",
                       Error);
}

TEST_CASE("safetensors: writes are atomic and reject bad input") {
  CHECK_THROWS_AS(write_safetensors("/nonexistent-dir/x.safetensors", {{"a", Tensor::zeros({1})}}), Error);
  CHECK_THROWS_WITH_AS(safetensors_bytes({{"__metadata__", Tensor::zeros({1})}}),
                       "safetensors: '__metadata__' is reserved and cannot name a tensor", Error);
  CHECK_THROWS_WITH_AS(safetensors_bytes({{"a", Tensor()}}), "safetensors: tensor 'a' is undefined", Error);
  // A failed write leaves the old file intact.
  const auto dir = std::filesystem::temp_directory_path() / "qnum_st_atomic";
  std::filesystem::create_directories(dir);
  write_safetensors(dir / "m.safetensors", {{"a", Tensor::ones({2})}});
  CHECK_THROWS_AS(write_safetensors(dir / "m.safetensors", {{"a", Tensor()}}), Error);
  CHECK(read_safetensors(dir / "m.safetensors").tensors.at("a").to_vector() == std::vector<float>{1.0f, 1.0f});
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);  // no temp file left behind
  std::filesystem::remove_all(dir);
}

TEST_CASE("safetensors: I8 and U8 tensors round-trip as bytes beside the float tensors") {
  std::map<std::string, qnum::Tensor> floats{{"bias", qnum::Tensor({3}, std::vector<float>{1.5f, -2.0f, 0.25f})}};
  std::map<std::string, qnum::ByteTensor> bytes{
      {"w.codes", {"I8", {2, 3}, {0x80, 0x7f, 0x00, 0x01, 0xff, 0x10}}},
      {"w.scales", {"U8", {2, 1}, {127, 3}}}};
  const std::string file = qnum::safetensors_bytes(floats, {{"k", "v"}}, bytes);
  const auto st = qnum::parse_safetensors(file, "mem");
  REQUIRE(st.tensors.size() == 1);
  CHECK(st.tensors.at("bias").values()[1] == -2.0f);
  REQUIRE(st.bytes.size() == 2);
  CHECK(st.bytes.at("w.codes").dtype == "I8");
  CHECK(st.bytes.at("w.codes").shape == qnum::Shape{2, 3});
  CHECK(st.bytes.at("w.codes").data == bytes.at("w.codes").data);
  CHECK(st.bytes.at("w.scales").data == std::vector<std::uint8_t>{127, 3});
  CHECK(st.metadata.at("k") == "v");
  // A byte tensor whose bytes do not fill its shape, of another dtype, or naming a float tensor.
  bytes["w.codes"].data.pop_back();
  CHECK_THROWS_WITH_AS(qnum::safetensors_bytes(floats, {}, bytes), doctest::Contains("holds 5 bytes for shape [2, 3]"),
                       qnum::Error);
  CHECK_THROWS_AS(qnum::safetensors_bytes(floats, {}, {{"x", {"I32", {1}, {1, 2, 3, 4}}}}), qnum::Error);
  CHECK_THROWS_AS(qnum::safetensors_bytes(floats, {}, {{"bias", {"U8", {1}, {1}}}}), qnum::Error);
}
