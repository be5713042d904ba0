// block_fp on the device against the CPU's tensor quantize, bit for bit (any two NaNs equal).
#include <doctest/doctest.h>

#include "blocks.hpp"
#include "qnum/cuda/quantize/block_fp.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::blocks;

TEST_CASE("cuda: block_fp equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockFPSpec;
  for (const auto& s : {BlockFPSpec{8, 8, std::nullopt, {16}}, BlockFPSpec{4, 5, std::nullopt, {4, 4}},
                        BlockFPSpec{6, 4, std::nullopt, {2, 3, 5}}, BlockFPSpec{24, 8, 100, {-1}},
                        BlockFPSpec{3, 8, 140, {8}}, BlockFPSpec{2, 1, std::nullopt, {1, 7}}})
    check_family(s, "block_fp W" + std::to_string(s.width) + " E" + std::to_string(s.exponent_width) + " bias " +
                        std::to_string(s.bias()));
}
