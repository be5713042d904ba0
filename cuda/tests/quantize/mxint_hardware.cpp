// mxint_hardware on the device against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "qnum/cuda/quantize/mxint_hardware.hpp"
#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

TEST_CASE("cuda: mxint_hardware tiles equal the CPU reference") {
  std::uint32_t seed = 400;
  const auto check = [&](int width, int ew, std::vector<int> parallelism, const std::vector<qnum::Shape>& shapes) {
    qnum::MXIntHardwareSpec s;
    s.width = width;
    s.exponent_width = ew;
    s.parallelism = std::move(parallelism);
    for (const auto& p : {qnum::mase_compat, qnum::exact})
      check_shapes(s, p, shapes, "mxint_hardware W" + std::to_string(width) + " ew" + std::to_string(ew), seed++);
  };
  check(8, 4, {1, 16}, {{64}, {4, 32}, {3, 8, 16}});
  check(4, 3, {2, 8}, {{4, 16}, {3, 6, 24}});
  check(12, 8, {16}, {{160}, {2, 5, 48}});
  check(8, 2, {4, 4}, {{8, 8}, {2, 4, 12}});
  check(24, 8, {8, 64}, {{16, 128}});  // 512-element tiles: sixteen lanes' strides
  check(2, 1, {1, 1}, {{5, 3}});
}
