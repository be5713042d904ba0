// safetensors bytes (io/safetensors.hpp): any header is parsed or refused; parsed tensors,
// written back, parse to the same tensors (F16/BF16 widen to F32 exactly).
#include <cstring>

#include "fuzz_input.hpp"
#include "qnum/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  qnum::fuzz::expect_clean([&] {
    const auto f = qnum::parse_safetensors(qnum::fuzz::as_text(data, size), "fuzz.safetensors");
    if (f.tensors.count("__metadata__")) return;  // reserved name: the writer refuses it
    const auto g = qnum::parse_safetensors(qnum::safetensors_bytes(f.tensors, f.metadata), "again.safetensors");
    qnum::fuzz::check(g.metadata == f.metadata && g.tensors.size() == f.tensors.size(), "safetensors round trip");
    for (const auto& [name, t] : f.tensors) {
      const auto& u = g.tensors.at(name);
      qnum::fuzz::check(u.shape() == t.shape(), "round trip shape");
      qnum::fuzz::check(t.numel() == 0 || std::memcmp(u.data(), t.data(), static_cast<std::size_t>(t.numel()) * 4) == 0,
                        "round trip values");
    }
  });
  return 0;
}
