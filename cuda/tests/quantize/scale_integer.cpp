// scale_integer on the device against the CPU, bit for bit.
#include <doctest/doctest.h>

#include "qnum/cuda/quantize/scale_integer.hpp"
#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

TEST_CASE("cuda: scale_integer rows equal the CPU reference (exact roundings and mase_compat)") {
  using qnum::Rounding;
  const std::vector<qnum::Policy> policies = {qnum::exact, qnum::exact.with(Rounding::floor),
                                              qnum::exact.with(Rounding::nearest_away),
                                              qnum::exact.with(Rounding::stochastic).with_seed(7), qnum::mase_compat};
  // rank 0..3; a 9000-long row is split over three warps (atomicMax merge); one whole-tensor row
  const std::vector<qnum::Shape> shapes = {{}, {1}, {37}, {1000}, {7, 33}, {3, 5, 17}, {2, 9000}, {100003}};
  for (const auto& s : {si(8, true), si(4, true), si(8, false), si(2, true), si(16, true), si(24, false)})
    for (const auto& p : policies)
      check_shapes(
          s, p, shapes,
          "scale_integer W" + std::to_string(s.width) + (s.is_signed ? " signed " : " unsigned ") + rounding_text(p),
          static_cast<std::uint32_t>(s.width));
}

TEST_CASE("cuda: scale_integer special rows: all zero, NaN, Inf, one element, empty") {
  std::vector<float> in(6 * 8, 0.0f);
  for (std::size_t i = 0; i < 8; ++i) in[i] = (i % 2) ? -0.0f : 0.0f;       // row 0: signed zeros
  for (std::size_t i = 8; i < 48; ++i) in[i] = static_cast<float>(i) - 20;  // rows 1..5: ramps
  in[17] = qnum::detail::kNaN;                                              // row 2
  in[26] = -qnum::detail::kInf;                                             // row 3
  in[33] = 3e38f;                                                           // row 4: huge
  in[40] = 1e-45f;                                                          // row 5: tiny beside
  for (const auto& s : {si(8, true), si(8, false)})
    for (const auto& p : {qnum::exact, qnum::mase_compat}) {
      check_tensor(s, p, in, {6, 8}, "scale_integer special rows");
      check_tensor(s, p, in, {48, 1}, "scale_integer one-element rows");
      check_tensor(s, p, {}, {3, 0}, "scale_integer empty rows");
      check_tensor(s, p, {}, {0, 4}, "scale_integer no rows");
    }
}
