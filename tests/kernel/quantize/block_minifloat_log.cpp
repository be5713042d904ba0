// Kernel quantize tests: block_minifloat and block_log, against the scalar reference bit for bit
// (tests/kernel/quantize/check.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel/quantize/check.hpp"

using namespace kernel_check;

TEST_CASE("kernel quantize: block_minifloat and block_log, exact and mase, threaded per block") {
  using qnum::Role;
  std::vector<float> rnd = random_inputs(21);
  for (const char* spec : {"block_minifloat",
                           "block_minifloat:block_size=7",
                           "block_minifloat:block_size=4x8",
                           "block_minifloat:width=6,exponent_width=3,exponent_bias_width=4",
                           "block_minifloat:block_size=2x3x5",
                           "block_minifloat:width=8,exponent_width=4,rounding=stochastic,seed=3",
                           "block_minifloat:rounding=toward_zero",
                           "block_minifloat:block_size=-1",
                           "block_minifloat:subnormals=flush",
                           "block_minifloat:width=3,exponent_width=1",
                           "block_minifloat:width=12,exponent_width=6,exponent_bias_width=2,block_size=32",
                           "block_log",
                           "block_log:block_size=5",
                           "block_log:block_size=3x16",
                           "block_log:width=4,exponent_bias_width=4",
                           "block_log:width=9,exponent_bias_width=8,block_size=1x32",
                           "block_log:width=9,exponent_bias_width=1",
                           "block_log:width=2,exponent_bias_width=3",
                           "block_log:rounding=nearest_away",
                           "block_log:rounding=stochastic,seed=4",
                           "block_log:rounding=floor",
                           "block_log:rounding=ceil"}) {
    const Format f = fmt(spec);
    // every code's neighbourhood for several biases, ties, specials: 1-D and 2-D
    std::vector<float> in = shared_bias_neighbourhood(f, 16);
    in.insert(in.end(), rnd.begin(), rnd.end());
    const std::int64_t cols = 48, rows = static_cast<std::int64_t>(in.size()) / cols;
    in.resize(static_cast<std::size_t>(rows * cols));
    check_shaped(f, in, {rows * cols}, Role::weight, expect_row_simd(spec, 1));
    check_shaped(f, in, {rows, cols}, Role::weight, expect_row_simd(spec, 2));
    const std::vector<float> in3(in.begin(), in.begin() + rows / 3 * 3 * cols);
    check_shaped(f, in3, {rows / 3, 3, cols}, Role::activation, expect_row_simd(spec, 3));
    CHECK(qnum::kernel::quantize_path(f, {rows, cols}) ==
          (expect_row_simd(spec, 2) ? qnum::kernel::QuantizePath::simd : qnum::kernel::QuantizePath::scalar));
    check_threads(f, in, {rows, cols}, Role::weight);
    check_threads(f, in, {rows * cols}, Role::weight);
    const auto w = weight_scale_inputs(64 * 48, 22);
    check_shaped(f, w, {64 * 48}, Role::weight, expect_row_simd(spec, 1));
    check_shaped(f, w, {64, 48}, Role::weight, expect_row_simd(spec, 2));
  }
  for (const char* spec :
       {"block_minifloat", "block_minifloat:block_size=16", "block_minifloat:block_size=4x8",
        "block_minifloat:block_size=7", "block_minifloat:width=6,exponent_width=3", "block_minifloat:block_size=-1",
        "block_log", "block_log:block_size=16", "block_log:block_size=4x8", "block_log:width=4,exponent_bias_width=4",
        "block_log:block_size=1x16", "block_log:width=9,exponent_bias_width=8",
        "block_log:width=3,exponent_bias_width=2", "block_minifloat:exponent_bias_width=4",
        "block_minifloat:width=12,exponent_width=6"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_mase_tiles(f, specials);
      check_threads(f, mase_block_inputs(301 * 77, 5, specials), {301, 77}, Role::weight);
      check_threads(f, mase_block_inputs(20 * 30 * 41, 6, specials), {20, 30, 41}, Role::activation);
      // in place: the zero-block rule's smallest max cannot be re-read from the input then
      check_in_place(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight);
      check_in_place(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation);
    }
    const auto w = weight_scale_inputs(64 * 48, 23);
    check_shaped(f, w, {64 * 48}, Role::weight, true);
    check_shaped(f, w, {64, 48}, Role::weight, true);
    check_shaped(f, w, {8, 8, 48}, Role::activation, true);
    auto nb = shared_bias_neighbourhood(fmt(spec), 16);
    nb.resize(nb.size() / 16 * 16);
    check_shaped(f, nb, {static_cast<std::int64_t>(nb.size()) / 16, 16}, Role::weight, true);
    check_shaped(f, std::vector<float>(64, 0.0f), {8, 8}, Role::weight, true);  // every block max 1
    check_shaped(f, std::vector<float>(64, -0.0f), {64}, Role::weight, true);   // the same, one pass
    // log2 decision points, tiny blocks (biases above 126: the element function's tail)
    auto lp = log2_points();
    lp.resize(lp.size() / 16 * 16);
    check_shaped(f, lp, {static_cast<std::int64_t>(lp.size()) / 16, 16}, Role::weight, true);
    std::vector<float> tiny(32 * 16);
    for (std::size_t i = 0; i < tiny.size(); ++i)
      tiny[i] = std::ldexp(static_cast<float>(i % 13) - 6.0f, -150 + static_cast<int>(i % 40));
    check_shaped(f, tiny, {32, 16}, Role::weight, true);
    // MASE's errors (1-D activation, 3-D weight) come from the reference
    std::vector<float> out(60);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(60, 5, false), out, {60}, Role::activation),
                    qnum::Error);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(60, 5, false), out, {3, 4, 5}, Role::weight),
                    qnum::Error);
  }
  // in place, zero-sized, rank 0
  const Format f = fmt("block_log:block_size=4x4");
  std::vector<float> x = mase_block_inputs(24 * 10, 9, true);
  const auto ref = f.quantize(x, {24, 10});
  qnum::kernel::quantize(f, x, x, {24, 10});
  CHECK(count_mismatch(f, ref, ref, x, "in place") == 0);
  std::vector<float> none;
  qnum::kernel::quantize(f, none, none, {0, 4});
  std::vector<float> one{3.0f}, o1{0.0f};
  qnum::kernel::quantize(f, one, o1, {});
  CHECK(same_bits(o1[0], f.quantize(one, {})[0]));
}
