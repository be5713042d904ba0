// mxint (MASE's blocks) on the device against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "qnum/cuda/quantize/mxint.hpp"
#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

TEST_CASE("cuda: MASE mxint blocks equal mase_mxint_quantize (and the exact bundle the OCP path)") {
  struct Case {
    qnum::MXIntSpec s;
    std::vector<qnum::Shape> shapes;
  };
  const std::vector<Case> cases = {
      {{8, 32, -1, 8}, {{64}, {4, 96}, {3, 4, 32}, {2048}}},
      {{4, 16, -1, 8}, {{6, 7, 16}, {160}}},
      {{8, 16, 1, 8}, {{6, 7, 16}, {4, 12}}},  // blocks along a middle axis, straddling fibers in MASE
      {{6, 32, 0, 5}, {{32, 3}, {64, 2, 3}}},  // 5-bit scale, blocks along the first axis
      {{8, 7, -1, 8}, {{5, 14}, {2, 3, 21}}},  // a block size that is no power of two
      {{3, 1, -1, 8}, {{9}, {2, 5}}},          // one element per block
      {{16, 128, -1, 8}, {{4, 256}}},          // four warp strides per block
  };
  std::uint32_t seed = 100;
  for (const auto& c : cases) {
    const std::string what = "mxint W" + std::to_string(c.s.width) + " B" + std::to_string(c.s.block_size) + " dim " +
                             std::to_string(c.s.block_dim) + " sbits " + std::to_string(c.s.scale_bits);
    check_shapes(c.s, qnum::mase_compat, c.shapes, what, seed);
    check_shapes(c.s, qnum::exact, c.shapes, what, seed);
    seed += 10;
  }
}
