// .npy bytes (io/npy.hpp): any header is parsed or refused; a parsed array's data matches
// its shape, and writing it back gives bytes that parse to the same array.
#include "fuzz_input.hpp"
#include "qnum/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  qnum::fuzz::expect_clean([&] {
    const auto a = qnum::parse_npy(qnum::fuzz::as_text(data, size), "fuzz.npy");
    qnum::fuzz::check(static_cast<std::int64_t>(a.data.size()) == qnum::numel(a.shape), "data matches shape");
    const auto b = qnum::parse_npy(qnum::npy_bytes(a.shape, a.data.data()), "again.npy");
    qnum::fuzz::check(b.shape == a.shape && std::equal(a.data.begin(), a.data.end(), b.data.begin(),
                                                       [](float x, float y) { return std::memcmp(&x, &y, 4) == 0; }),
                      "npy round trip");
  });
  return 0;
}
