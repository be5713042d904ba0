// The restricted torch.save reader (include/qnum/io/torch_state_dict.hpp) on fixtures that
// torch wrote (tests/fixtures/torch_state_dict/make_fixture.py): a BERT state dict in the zip and
// the legacy layout equals the safetensors file it came from bit for bit; views (transposed,
// offset, shared storage), float16/bfloat16/float64/bool and Parameters read as torch
// reads them; a pickle that calls os.system is refused, and nothing runs; hand-made pickles
// with other opcodes or globals, containers inside themselves or nested deeper than a state
// dict could be, are refused by name.
#include <doctest/doctest.h>

#include <bit>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "download/helpers.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/io/torch_state_dict.hpp"

using namespace qnum;
using namespace qnum_test;

namespace {

const fs::path kDir = fs::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "torch_state_dict";

void check_same_bits(const Tensor& a, const Tensor& b, const std::string& name) {
  INFO(name);
  REQUIRE(a.shape() == b.shape());
  const auto x = a.data(), y = b.data();
  std::size_t differ = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    differ += std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]);
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("torch.save state dicts (zip and legacy) equal the safetensors file bit for bit") {
  const auto st = read_safetensors(kDir.parent_path() / "bert" / "model.safetensors");
  for (const std::string file : {"bert_random.bin", "bert_random_legacy.bin"}) {
    INFO(file);
    const auto sd = read_torch_state_dict(kDir / file);
    CHECK(sd.size() == st.tensors.size() + 1);
    for (const auto& [name, t] : st.tensors) {
      REQUIRE(sd.count(name) == 1);
      check_same_bits(sd.at(name), t, name);
    }
    const auto& pos = sd.at("bert.embeddings.position_ids");  // int64 buffer, exact in float32
    CHECK(pos.shape() == Shape{1, 40});
    for (std::size_t i = 0; i < 40; ++i) CHECK(pos.data()[i] == static_cast<float>(i));
  }
  CHECK(read_weights_file(kDir / "bert_random.bin").tensors.size() == st.tensors.size() + 1);
}

TEST_CASE("a torch.save file's bytes in memory read as the file does (parse_torch_state_dict)") {
  for (const std::string file : {"bert_random.bin", "bert_random_legacy.bin", "views.bin"}) {
    INFO(file);
    const auto from_file = read_torch_state_dict(kDir / file);
    const auto from_bytes = parse_torch_state_dict(read_file(kDir / file), file);
    REQUIRE(from_bytes.size() == from_file.size());
    for (const auto& [name, t] : from_file) {
      REQUIRE(from_bytes.count(name) == 1);
      check_same_bits(from_bytes.at(name), t, name);
    }
  }
  CHECK(error_of([] { parse_torch_state_dict("", "empty.bin"); }) ==
        "empty.bin: not a torch.save file (neither a zip nor a pickle)");
  CHECK(error_of([] { parse_torch_state_dict(std::string("PK\x03\x04junk", 8), "junk.bin"); })
            .starts_with("archive 'junk.bin': "));
}

TEST_CASE("views, shared storages and dtypes read as torch reads them") {
  const auto sd = read_torch_state_dict(kDir / "views.bin");
  const auto expected = nlohmann::json::parse(read_file(kDir / "views.json"));
  CHECK(sd.size() == expected.size());
  for (const auto& [name, e] : expected.items()) {
    INFO(name);
    REQUIRE(sd.count(name) == 1);
    const Tensor& t = sd.at(name);
    CHECK(Shape(t.shape().begin(), t.shape().end()) == e["shape"].get<std::vector<std::int64_t>>());
    const auto values = e["values"].get<std::vector<double>>();
    REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < values.size(); ++i) differ += static_cast<double>(t.data()[i]) != values[i];
    CHECK(differ == 0);
  }
}

TEST_CASE("a pickle that calls os.system is refused and does not run") {
  TempDir t;
  const auto cwd = fs::current_path();
  fs::current_path(t.path);  // the payload would write qnum-test-pickle-ran.txt here
  const auto msg = error_of([] { read_torch_state_dict(kDir / "evil.bin"); });
  fs::current_path(cwd);
  CHECK(contains(msg, "pickle global 'posix.system'"));
  CHECK(contains(msg, "is not allowed in a state dict"));
  CHECK(files_in(t.path).empty());
}

TEST_CASE("hand-made pickles: other opcodes and globals are refused by name") {
  using namespace std::string_literals;
  TempDir t;
  auto run = [&](const std::string& pickle) {
    // A legacy-layout file: magic, protocol, system info, the pickle, an empty key list.
    const std::string head =
        "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."s + "\x80\x02M\xe9\x03."s + "\x80\x02}."s;
    write_file_atomic(t.path / "x.bin", head + pickle + "\x80\x02]."s);
    return error_of([&] { read_torch_state_dict(t.path / "x.bin"); });
  };
  CHECK(contains(run("\x80\x02"s + "cbuiltins\neval\nq\x00."s), "pickle global 'builtins.eval'"));
  CHECK(contains(run("\x80\x02"s + "i__main__\nX\n."s), "pickle opcode 0x69"));  // INST
  CHECK(contains(run("\x80\x02"s + "ctorch._utils\n_rebuild_tensor_v2\n)R."s), "_rebuild_tensor_v2 without a storage"));
  CHECK(contains(run("\x80\x02"s + "]."s), "the pickle is not a dict"));
  CHECK(contains(run("\x80\x02"s + "}"s), "pickle ends without STOP"));
  CHECK(run("\x80\x02"s + "}."s).empty());  // an empty state dict is fine
  // containers put inside themselves through the memo (a shared_ptr cycle, found leaking by
  // the fuzz_torch_state_dict harness): a list in itself, a dict in itself, two lists in each other
  const std::string self_list = "]q\x00"s + "h\x00"s + "a."s;
  const std::string self_dict = "}q\x00"s + "X\x01\x00\x00\x00k"s + "h\x00"s + "s."s;
  const std::string two_lists = "]q\x00"s + "]q\x01"s + "h\x00"s + "aa."s;
  for (const auto& pickle : {self_list, self_dict, two_lists})
    CHECK(contains(run("\x80\x02"s + pickle), "pickle puts a container inside itself"));
  // a list filled after it was placed in a tuple (torch.save fills each container first)
  CHECK(contains(run("\x80\x02"s + "]q\x00\x85h\x00K\x01"s + "a."s), "fills one already placed in another"));
  // nesting: one level per TUPLE1 byte (fuzz_torch_state_dict: 56 KB of them overflowed the
  // stack when the values were destroyed); 100 levels read on, 101 or a million are refused
  auto nested = [](std::size_t levels) { return "\x80\x02]"s + std::string(levels, '\x85') + "."s; };
  CHECK(contains(run(nested(100)), "the pickle is not a dict"));
  CHECK(contains(run(nested(101)), "pickle nests containers more than 100 deep at byte 103"));
  CHECK(contains(run(nested(1'000'000)), "pickle nests containers more than 100 deep"));
  // lists appended into lists: refused at the same depth, without walking what they hold
  CHECK(contains(run("\x80\x02"s + std::string(200'000, ']') + std::string(199'999, 'a') + "."s),
                 "pickle nests containers more than 100 deep"));
  CHECK(contains(error_of([] { read_torch_state_dict(kDir / "views.json"); }), "not a torch.save file"));
}
