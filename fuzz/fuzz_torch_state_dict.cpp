// PyTorch `.bin` checkpoints (io/torch_state_dict.hpp, the restricted unpickler): the bytes
// read from memory (parse_torch_state_dict: the zip through libarchive's memory reader, or the
// legacy pickle layout; read_torch_state_dict shares every step after the file is opened).
// Returned tensors hold as many values as their shape says.
#include "fuzz_input.hpp"
#include "qnum/io/torch_state_dict.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  qnum::fuzz::expect_clean([&] {
    for (const auto& [name, t] : qnum::parse_torch_state_dict(qnum::fuzz::as_text(data, size), "fuzz.bin"))
      qnum::fuzz::check(static_cast<std::int64_t>(t.values().size()) == t.numel(), "values match the shape");
  });
  return 0;
}
