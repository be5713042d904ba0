// minifloat_ieee on the device against the CPU reference, bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elementwise.hpp"
#include "qnum/cuda/quantize/minifloat.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::elementwise;

TEST_CASE("cuda: minifloat_ieee (OCP FP8 included) quantize equals the CPU reference") {
  const qnum::MinifloatSpec specs[] = {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
                                       qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
                                       qnum::MinifloatSpec{4, 2, std::nullopt, qnum::Specials::none},
                                       qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee}};
  for (const auto& s : specs)
    for (const auto& p : policies()) {
      if (p.is_mase() && s.specials != qnum::Specials::none) continue;  // MASE's grid has no specials
      check_elementwise(s, p, "minifloat E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width));
      if (s.specials == qnum::Specials::ieee && !p.is_mase())
        check_elementwise(s, p.with(qnum::Overflow::infinity), "minifloat overflow=infinity");
    }
}

TEST_CASE("cuda: minifloat_ieee fast exact path equals the reference on every float32 input") {
  for (const auto& s :
       {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
        qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{4, 2, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{16, 8, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{6, 3, std::nullopt, qnum::Specials::fn},
        qnum::MinifloatSpec{8, 4, -2, qnum::Specials::none}, qnum::MinifloatSpec{8, 5, 30, qnum::Specials::ieee}})
    check_fast_path_exhaustively(s, "minifloat E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width) +
                                        " bias " + std::to_string(s.bias()));
}

TEST_CASE("cuda: MASE minifloat with log2 looked up equals the reference on every float32 input") {
  // The lookup tables come from the CPU's log2 (glibc); the reference kernel evaluates CUDA's
  // log2. Equal on all 2^32 inputs also shows the two log2s agree wherever it matters.
  for (const auto& s : {qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
                        qnum::MinifloatSpec{8, 3, std::nullopt, qnum::Specials::none},
                        qnum::MinifloatSpec{6, 2, 5, qnum::Specials::none},
                        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::none}})
    check_fast_path_exhaustively(
        s, "minifloat mase E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width), qnum::mase_compat);
}

TEST_CASE("cuda: every code of <= 16-bit minifloat_ieee formats decodes as on the CPU") {
  // the last: bias 128, so 8 exponent bits without specials stay in float32
  for (const auto& s : {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
                        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee},
                        qnum::MinifloatSpec{16, 8, 128, qnum::Specials::none}})
    check_decode_codes(s, "minifloat decode W" + std::to_string(s.width));
}
