// block_log on the device against the CPU's tensor quantize, bit for bit (any two NaNs equal).
#include <doctest/doctest.h>

#include "blocks.hpp"
#include "qnum/cuda/quantize/block_log.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::blocks;

TEST_CASE("cuda: block_log equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockLogSpec;
  for (const auto& s : {BlockLogSpec{8, 8, {16}}, BlockLogSpec{4, 4, {4, 4}}, BlockLogSpec{9, 8, {-1}},
                        BlockLogSpec{2, 1, {3, 5}}, BlockLogSpec{6, 3, {2, 3, 5}}})
    check_family(s, "block_log W" + std::to_string(s.width) + " bw " + std::to_string(s.exponent_bias_width));
}
