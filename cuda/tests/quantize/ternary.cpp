// ternary on the device against the CPU's tensor quantize, bit for bit, both bundles.
#include <doctest/doctest.h>

#include "binary_family.hpp"
#include "qnum/cuda/quantize/ternary.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::binary_family;

TEST_CASE("cuda: ternary (exact, per output channel, threshold and scaling) equals the CPU reference") {
  std::vector<qnum::TernarySpec> specs(5);
  specs[1].scaling_factor = true;
  specs[2].threshold = 0.5;
  specs[3].scaling_factor = true, specs[3].threshold = 0.0;
  specs[4].scaling_factor = true, specs[4].threshold = 1e-3;
  for (const auto& s : specs) {
    const std::string what = std::string("ternary exact scaling ") + (s.scaling_factor ? "1" : "0") + " threshold " +
                             (s.threshold ? std::to_string(*s.threshold) : "none");
    check_shapes(s, qnum::exact, any_rank_shapes(), what);
    check_shapes(s, qnum::exact, mase_4d_shapes(), what);
  }
}

TEST_CASE("cuda: ternary (mase, 4-D, torch's float32 sum order) equals the CPU reference") {
  std::vector<qnum::TernarySpec> specs(3);
  specs[1].scaling_factor = true;
  specs[2].scaling_factor = true, specs[2].threshold = 0.5;  // MASE ignores the threshold
  for (const auto& s : specs)
    check_shapes(s, qnum::mase_compat, mase_4d_shapes(),
                 std::string("ternary mase scaling ") + (s.scaling_factor ? "1" : "0"));
}
