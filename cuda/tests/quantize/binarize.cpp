// binarize on the device against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "binary_family.hpp"
#include "qnum/cuda/quantize/binarize.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::binary_family;

TEST_CASE("cuda: binarize equals the CPU reference") {
  for (const auto& p : both_bundles()) check_shapes(qnum::BinarizeSpec{}, p, any_rank_shapes(), "binarize");
}
