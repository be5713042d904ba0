// fixed point on the device against the CPU reference, bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "elementwise.hpp"
#include "qnum/cuda/quantize/fixed.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::elementwise;

TEST_CASE("cuda: fixed point quantize equals the CPU reference") {
  for (const qnum::FixedSpec s : {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{4, 0, false},
                                  qnum::FixedSpec{16, 10, true}, qnum::FixedSpec{32, 8, true}})
    for (const auto& p : policies()) {
      check_elementwise(s, p, "integer " + std::to_string(s.width) + "/" + std::to_string(s.frac_width));
      if (!p.is_mase()) check_elementwise(s, p.with(qnum::Overflow::wrap), "integer wrap");
    }
}

TEST_CASE("cuda: fixed point fast exact path equals the reference on every float32 input") {
  for (const qnum::FixedSpec s :
       {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{4, 0, false}, qnum::FixedSpec{16, 10, true},
        qnum::FixedSpec{24, 12, true}, qnum::FixedSpec{8, -3, true}, qnum::FixedSpec{24, 0, false},
        qnum::FixedSpec{1, 0, true}, qnum::FixedSpec{12, 60, true}, qnum::FixedSpec{8, -64, true}})
    check_fast_path_exhaustively(s, "integer " + std::to_string(s.width) + "/" + std::to_string(s.frac_width) +
                                        (s.is_signed ? "" : " unsigned"));
}

TEST_CASE("cuda: every code of <= 16-bit fixed point formats decodes as on the CPU") {
  for (const qnum::FixedSpec s : {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{16, 3, false}})
    check_decode_codes(s, "fixed decode W" + std::to_string(s.width));
}
