// residual_sign on the device against the CPU's tensor quantize, bit for bit, both bundles.
#include <doctest/doctest.h>

#include "binary_family.hpp"
#include "qnum/cuda/quantize/residual_sign.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::binary_family;

TEST_CASE("cuda: residual_sign (levels 1..8 exact, 1..3 mase, stacked [L, ...]) equals the CPU reference") {
  std::vector<qnum::ResidualSignSpec> exact_specs;
  for (int L = 1; L <= 8; ++L) exact_specs.push_back({L, {}});
  exact_specs.push_back({3, {0.7, 0.2, 0.1}});
  exact_specs.push_back({2, {-0.5, 0.1}});
  for (const auto& s : exact_specs)
    check_shapes(s, qnum::exact, any_rank_shapes(), "residual_sign exact L " + std::to_string(s.levels));
  const std::vector<qnum::ResidualSignSpec> mase_specs{
      {1, {}}, {2, {}}, {3, {}}, {2, {0.1, 0.3}}, {3, {-0.3, 0.2, 0.7}}};
  for (const auto& s : mase_specs)
    check_shapes(s, qnum::mase_compat, any_rank_shapes(), "residual_sign mase L " + std::to_string(s.levels));
}
