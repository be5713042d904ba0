// The OCP MX tensor path and the clip search mxint and mxfp share (cuda/src/quantize/mx.cuh,
// mx_block.cu) against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

TEST_CASE("cuda: OCP MX tensors (exact bundle) along any block_dim equal mx_exact_quantize") {
  using qnum::Rounding;
  const std::vector<qnum::Policy> policies = {qnum::exact, qnum::exact.with(Rounding::floor),
                                              qnum::exact.with(Rounding::stochastic).with_seed(5)};
  // fibers whose length is no multiple of the block size: each fiber's last block is short
  const std::vector<qnum::Shape> shapes = {{}, {100}, {3, 45}, {2, 5, 37}, {33, 4}, {7, 9, 2}};
  std::uint32_t seed = 300;
  for (const int dim : {-1, 0, 1})
    for (const auto& p : policies) {
      std::vector<qnum::Shape> ok;  // block_dim 1 needs rank >= 2
      for (const auto& sh : shapes)
        if (dim < 1 || sh.size() >= 2) ok.push_back(sh);
      for (const auto& [E, M] : {std::pair{4, 3}, std::pair{5, 2}, std::pair{2, 1}, std::pair{3, 2}}) {
        qnum::MXFPSpec s;
        s.exponent_width = E;
        s.frac_width = M;
        s.block_size = 16;
        s.block_dim = dim;
        check_shapes(s, p, ok,
                     "ocp mxfp E" + std::to_string(E) + "M" + std::to_string(M) + " dim " + std::to_string(dim) + " " +
                         rounding_text(p),
                     seed++);
      }
      for (const auto& s : {qnum::MXIntSpec{8, 32, dim, 8}, qnum::MXIntSpec{4, 16, dim, 6}})
        check_shapes(s, p, ok,
                     "ocp mxint W" + std::to_string(s.width) + " dim " + std::to_string(dim) + " " + rounding_text(p),
                     seed++);
    }
}

TEST_CASE("cuda: MX clip search (quantile_search) equals the CPU under mase_compat and exact") {
  std::uint32_t seed = 500;
  const std::vector<qnum::Shape> mase_shapes = {{128}, {4, 96}, {6, 7, 16}, {2, 3, 32}};
  const std::vector<qnum::Shape> exact_shapes = {{100}, {3, 45}, {2, 5, 37}, {1}};
  for (const int dim : {-1, 0, 1})
    for (const auto& s : {qnum::MXIntSpec{8, 32, dim, 8, true}, qnum::MXIntSpec{4, 16, dim, 8, true},
                          qnum::MXIntSpec{6, 8, dim, 5, true}}) {
      const std::string what = "mxint search W" + std::to_string(s.width) + " B" + std::to_string(s.block_size) +
                               " dim " + std::to_string(dim);
      std::vector<qnum::Shape> ms, es;  // block_dim 1 needs rank >= 2; mase needs numel % B == 0
      for (const auto& sh : mase_shapes)
        if ((dim < 1 || sh.size() >= 2) && qnum::numel(sh) % s.block_size == 0) ms.push_back(sh);
      for (const auto& sh : exact_shapes)
        if (dim < 1 || sh.size() >= 2) es.push_back(sh);
      check_shapes(s, qnum::mase_compat, ms, what, seed++);
      check_shapes(s, qnum::exact, es, what, seed++);
      check_shapes(s, qnum::exact.with(qnum::Rounding::stochastic).with_seed(3), es, what + " stochastic", seed++);
    }
  const int em[][2] = {{4, 3}, {5, 2}, {2, 1}, {1, 2}};
  for (const auto& [E, M] : em)
    for (const int B : {32, 16}) {
      qnum::MXFPSpec s;
      s.exponent_width = E;
      s.frac_width = M;
      s.block_size = B;
      s.block_dim = E == 2 ? 0 : -1;
      s.quantile_search = true;
      const std::string what = "mxfp search E" + std::to_string(E) + "M" + std::to_string(M) + " B" + std::to_string(B);
      check_shapes(s, qnum::mase_compat, {{128}, {4, 96}, {2, 3, 32}}, what, seed++);
      if (E != 1) check_shapes(s, qnum::exact, {{100}, {3, 45}, {2, 5, 37}}, what, seed++);
    }
}
