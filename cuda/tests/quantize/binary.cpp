// binary on the device against the CPU's tensor quantize, bit for bit, both bundles, every mode.
#include <doctest/doctest.h>

#include "binary_family.hpp"
#include "qnum/cuda/quantize/binary.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::binary_family;

TEST_CASE("cuda: binary bipolar (deterministic and stochastic, exact and mase) equals the CPU reference") {
  for (const bool stochastic : {false, true})
    for (const auto& p : both_bundles()) {
      const qnum::BinarySpec s{stochastic, true};
      check_shapes(s, p, any_rank_shapes(), binary_text(s) + " " + policy_text(p));
    }
}

TEST_CASE("cuda: binary scaled per output channel (exact, any rank) equals the CPU reference") {
  for (const bool stochastic : {false, true})
    for (const auto& p : {qnum::exact, qnum::exact.with_seed(42)}) {
      const qnum::BinarySpec s{stochastic, false};
      check_shapes(s, p, any_rank_shapes(), binary_text(s) + " " + policy_text(p));
      check_shapes(s, p, mase_4d_shapes(), binary_text(s) + " " + policy_text(p));
    }
}

TEST_CASE("cuda: binary scaled (mase, 4-D, torch's float32 sum order) equals the CPU reference") {
  for (const bool stochastic : {false, true})
    for (const auto& p : {qnum::mase_compat, qnum::mase_compat.with_seed(7)}) {
      const qnum::BinarySpec s{stochastic, false};
      check_shapes(s, p, mase_4d_shapes(), binary_text(s) + " " + policy_text(p));
    }
}

TEST_CASE("cuda: binary with explicit uniforms equals the CPU reference") {
  for (const bool stochastic : {false, true})
    for (const bool bipolar : {true, false})
      for (const auto& p : both_bundles()) {
        const qnum::BinarySpec s{stochastic, bipolar};
        const auto& shapes = !bipolar && p.is_mase() ? mase_4d_shapes() : any_rank_shapes();
        check_shapes(s, p, shapes, binary_text(s) + " explicit u " + policy_text(p), true);
      }
}
