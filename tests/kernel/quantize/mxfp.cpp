// Kernel quantize tests: mase mxfp, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: mase mxfp (MASE's codec and its quirks), threaded per block") {
  using qnum::Role;
  for (const char* spec :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=1,frac_width=2",
        "mxfp:exponent_width=4,frac_width=3,block_size=16", "mxfp:exponent_width=4,frac_width=3,block_dim=0",
        "mxfp:exponent_width=3,frac_width=2,block_size=4", "mxfp:exponent_width=2,frac_width=1,quantile_search=true",
        "mxfp:exponent_width=4,frac_width=3,quantile_search=true,block_dim=0"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    const auto& ms = std::get<qnum::MXFPSpec>(f.spec);
    const bool vec = !ms.quantile_search && ms.block_dim != 0;  // last-axis blocks: vector lanes
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(64 * 80, 14, specials), {64, 80}, Role::weight, vec);
      check_shaped(f, mase_block_inputs(2 * 8 * 64, 15, specials), {2, 8, 64}, Role::activation, vec);
    }
    auto nb = mx_neighbourhood(ms.element(), 32);
    nb.resize(nb.size() / 64 * 64);
    check_shaped(f, nb, {static_cast<std::int64_t>(nb.size()) / 64, 64}, Role::weight, vec);
    std::vector<float> big = mase_block_inputs(300 * 128, 16, true);
    check_threads(f, big, {300, 128}, Role::weight);
    // in place, against the reference in place (with quantile search and a permuted block
    // order the reference's error term reads inputs it already overwrote: kept identical)
    std::vector<float> x = mase_block_inputs(64 * 80, 17, true);
    std::vector<float> ref = x;
    f.quantize(ref, ref, {64, 80});
    qnum::kernel::quantize(f, x, x, {64, 80});
    CHECK(count_mismatch(f, ref, ref, x, "in place") == 0);
    // not divisible by the block size: MASE's assert
    std::vector<float> out(33);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, std::vector<float>(33, 1.0f), out, {33}), qnum::Error);
  }
}

TEST_CASE("kernel quantize: mase mxfp vector lanes on a sweep of float32 bit patterns") {
  // Every 4099th bit pattern (both signs, every exponent field, zeros, subnormals, Inf and NaN)
  // in the order of their bits (blocks of neighbouring magnitudes: the block max's own carry,
  // the single subnormal binade) and shuffled (blocks spanning many binades: underflow).
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099)
    x.push_back(qnum::detail::bits_float(static_cast<std::uint32_t>(b)));
  x.resize(x.size() / 32 * 32);
  std::vector<float> shuffled = x;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  const auto n = static_cast<std::int64_t>(x.size());
  // finite values only, shuffled: a NaN or Inf sends its block to the reference, so these are
  // the blocks where x · 2^-shared underflows in the vector lanes (to -0 for negative x, which
  // MASE's sign test turns into +0)
  std::vector<float> finite;
  for (float v : shuffled)
    if (std::isfinite(v)) finite.push_back(v);
  finite.resize(finite.size() / 32 * 32);
  const auto nf = static_cast<std::int64_t>(finite.size());
  for (const char* spec :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=1,frac_width=2"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    check_shaped(f, x, {n / 32, 32}, qnum::Role::weight, true);
    check_shaped(f, shuffled, {n}, qnum::Role::weight, true);
    check_shaped(f, finite, {nf}, qnum::Role::weight, true);
  }
}
