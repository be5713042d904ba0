// PyTorch `.bin` checkpoints (io/torch_state_dict.hpp, the restricted unpickler): the bytes as
// a file, zip (read through libarchive) or legacy pickle layout. Returned tensors hold as
// many values as their shape says.
#include "fuzz_input.hpp"
#include "qnum/io/torch_state_dict.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static qnum::fuzz::InputFile file(".bin");
  const auto& path = file.write(data, size);
  qnum::fuzz::expect_clean([&] {
    for (const auto& [name, t] : qnum::read_torch_state_dict(path))
      qnum::fuzz::check(static_cast<std::int64_t>(t.values().size()) == t.numel(), "values match the shape");
  });
  return 0;
}
