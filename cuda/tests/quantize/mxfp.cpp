// mxfp (MASE's blocks) on the device against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "qnum/cuda/quantize/mxfp.hpp"
#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

TEST_CASE("cuda: MASE mxfp blocks equal mase_mxfp_quantize for every element type (E1M2 included)") {
  const int em[][2] = {{4, 3}, {5, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 2}};
  std::uint32_t seed = 200;
  for (const auto& [E, M] : em)
    for (const int B : {32, 16, 8})
      for (const int dim : {-1, 0}) {
        qnum::MXFPSpec s;
        s.exponent_width = E;
        s.frac_width = M;
        s.block_size = B;
        s.block_dim = dim;
        const std::string what = "mase mxfp E" + std::to_string(E) + "M" + std::to_string(M) + " B" +
                                 std::to_string(B) + " dim " + std::to_string(dim);
        check_shapes(s, qnum::mase_compat, {{256}, {6, 32}, {4, 3, 16}, {2048}}, what, seed++);
      }
}

TEST_CASE("cuda: MASE mxfp blocks holding Inf or NaN payloads equal the CPU (x86 NaN division)") {
  // Inf / 2^128 and NaN inputs reach MASE's codec, which reads the NaN's mantissa bits.
  const float specials[] = {qnum::detail::kInf,     -qnum::detail::kInf,    from_bits(0x7FC00000u),
                            from_bits(0xFFC00000u), from_bits(0x7FA12345u), from_bits(0xFF800001u),
                            from_bits(0x7FFFFFFFu), from_bits(0x7FE00000u)};
  std::vector<float> in;
  for (const float sp : specials)
    for (int b = 0; b < 4; ++b) {  // each special among zeros, among normals, alone, twice
      for (int j = 0; j < 8; ++j) in.push_back(b == 0 ? 0.0f : (b == 1 ? 1.5f * static_cast<float>(j - 4) : sp));
      in[in.size() - 8 + static_cast<std::size_t>(b + 1)] = sp;
    }
  const int em[][2] = {{4, 3}, {5, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 2}};
  for (const auto& [E, M] : em) {
    qnum::MXFPSpec s;
    s.exponent_width = E;
    s.frac_width = M;
    s.block_size = 8;
    check_tensor(s, qnum::mase_compat, in, {static_cast<std::int64_t>(in.size())},
                 "mase mxfp specials E" + std::to_string(E) + "M" + std::to_string(M));
  }
  qnum::MXIntSpec si;
  si.block_size = 8;
  check_tensor(si, qnum::mase_compat, in, {static_cast<std::int64_t>(in.size())}, "mase mxint specials");
}
