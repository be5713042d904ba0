// block_minifloat on the device against the CPU's tensor quantize, bit for bit (any two NaNs equal).
#include <doctest/doctest.h>

#include "blocks.hpp"
#include "qnum/cuda/quantize/block_minifloat.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::blocks;

TEST_CASE("cuda: block_minifloat equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockMinifloatSpec;
  for (const auto& s :
       {BlockMinifloatSpec{8, 4, 8, {16}}, BlockMinifloatSpec{6, 2, 4, {4, 4}}, BlockMinifloatSpec{5, 3, 3, {3, -1}},
        BlockMinifloatSpec{16, 6, 8, {32}}, BlockMinifloatSpec{3, 1, 2, {2, 3, 5}}, BlockMinifloatSpec{2, 1, 1, {7}}})
    check_family(s, "block_minifloat W" + std::to_string(s.width) + " E" + std::to_string(s.exponent_width) + " bw " +
                        std::to_string(s.exponent_bias_width));
}
