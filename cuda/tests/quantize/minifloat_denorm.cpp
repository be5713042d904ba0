// minifloat_denorm on the device against the CPU reference, bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elementwise.hpp"
#include "qnum/cuda/quantize/minifloat_denorm.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::elementwise;

TEST_CASE("cuda: minifloat_denorm quantize equals the CPU reference") {
  for (const qnum::MinifloatDenormSpec s :
       {qnum::MinifloatDenormSpec{8, 4, std::nullopt}, qnum::MinifloatDenormSpec{6, 3, 2},
        qnum::MinifloatDenormSpec{16, 5, std::nullopt}})
    for (const auto& p : policies())
      check_elementwise(s, p, "minifloat_denorm E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width));
}

TEST_CASE("cuda: every code of <= 16-bit minifloat_denorm formats decodes as on the CPU") {
  for (const qnum::MinifloatDenormSpec s :
       {qnum::MinifloatDenormSpec{8, 4, std::nullopt}, qnum::MinifloatDenormSpec{16, 5, std::nullopt}})
    check_decode_codes(s, "minifloat_denorm decode W" + std::to_string(s.width));
}
