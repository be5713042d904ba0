// Kernel quantize tests: block_fp and the MX blocks (exact in vector registers; mase block_fp and mxint on every MASE
// tile), against the scalar reference bit for bit (tests/kernel/quantize/check.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel/quantize/check.hpp"

using namespace kernel_check;

TEST_CASE("kernel quantize: block_fp and MX exact (OCP), blocks along the last axis") {
  std::vector<float> in = random_inputs(11);
  std::mt19937 gen(5);
  std::vector<float> shuffled = in;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  std::vector<float> finite;
  for (float v : shuffled)
    if (std::isfinite(v)) finite.push_back(v);
  for (const char* spec : {"block_fp", "block_fp:block_size=32", "block_fp:width=4,exponent_width=3",
                           "block_fp:block_size=1x16", "block_fp:block_size=7", "block_fp:width=16,exponent_width=8",
                           "block_fp:width=8,exponent_width=5,block_size=-1", "mxint8", "mxint:width=4",
                           "mxint:block_size=5", "mxint:scale_bits=4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2",
                           "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=2,frac_width=1,subnormals=flush"}) {
    const Format f = fmt(spec);
    for (std::int64_t cols : {32, 37, 100, 1})
      for (const auto* data : {&in, &shuffled, &finite}) check_blocked(f, *data, cols, true);
  }
  for (const char* spec : {"block_fp:block_size=4x8", "mxint:width=8,block_dim=0", "mxint:width=8,quantile_search=true",
                           "block_fp:rounding=stochastic", "mxint:width=8,quantile_search=true,mode=mase_compat"})
    check_blocked(fmt(spec), finite, 32, false);
  for (const char* spec :
       {"mxint8", "mxint:width=4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"}) {
    const Format f = fmt(spec);
    const auto e = std::visit(
        [](const auto& s) -> qnum::MXElement {
          if constexpr (requires { s.element(); })
            return s.element();
          else
            return {};
        },
        f.spec);
    check_blocked(f, mx_neighbourhood(e, 32), 32, true);
    check_blocked(f, mx_neighbourhood(e, 32), 64, true);
  }
}

TEST_CASE("kernel quantize: block_fp ties, carries and shared-exponent boundaries") {
  for (const char* spec : {"block_fp", "block_fp:width=4,exponent_width=3", "block_fp:width=16,exponent_width=8",
                           "block_fp:width=8,exponent_width=5,block_size=32"}) {
    const Format f = fmt(spec);
    const auto& s = std::get<qnum::BlockFPSpec>(f.spec);
    const int M = s.mantissa_bits();
    const int bs = s.block_size.back();
    std::vector<float> in;
    for (int lg : {-140, -120, -3, 0, 5, 100, 126}) {
      const double top = std::ldexp(2.0 - std::ldexp(1.0, -M), lg);  // rounds up to 2^(lg+1): the carry tie
      for (double anchor0 :
           {top, std::ldexp(1.0, lg), std::ldexp(1.5, lg), std::ldexp(2.0 - std::ldexp(1.0, -M - 1), lg)}) {
        std::vector<float> anchors;
        add_with_neighbours(anchors, static_cast<float>(anchor0), 1);
        for (float anchor : anchors) {
          std::vector<float> elems;
          const double half = std::ldexp(1.0, lg - M);  // half a step at e = lg + 1
          const std::int64_t steps = std::int64_t{1} << (M + 1);
          for (std::int64_t j = 0; j < steps; ++j)
            if (j < 64 || j > steps - 64) add_with_neighbours(elems, static_cast<float>(j * half), 1);
          for (std::size_t k = 0; k < elems.size();) {
            in.push_back(anchor);
            for (int t = 1; t < bs && k < elems.size(); ++t, ++k) in.push_back(k % 2 ? -elems[k] : elems[k]);
            while (in.size() % static_cast<std::size_t>(bs)) in.push_back(0.0f);
          }
        }
      }
    }
    check_blocked(f, in, bs, true);
    check_blocked(f, in, 4 * bs, true);
  }
}

TEST_CASE("kernel quantize: mase block_fp and mxint in vector registers, every MASE tile") {
  using qnum::Role;
  for (const char* spec : {"block_fp", "block_fp:block_size=16", "block_fp:block_size=4x8", "block_fp:block_size=7",
                           "block_fp:width=4,exponent_width=3", "block_fp:width=16,exponent_width=8,block_size=1x16",
                           "block_fp:width=8,exponent_width=5,block_size=-1"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_mase_tiles(f, specials);
      check_in_place(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight);
      check_in_place(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation);
    }
    // all-zero tensor (every block takes max 1) and MASE's errors through the reference
    check_shaped(f, std::vector<float>(64, 0.0f), {8, 8}, Role::weight, true);
    std::vector<float> out(1000);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(1000, 5, false), out, {1000}, Role::activation),
                    qnum::Error);
  }
  for (const char* spec : {"mxint:width=8", "mxint:width=4", "mxint:width=8,block_size=5",
                           "mxint:width=8,block_size=16", "mxint:width=6,scale_bits=4", "mxint:width=8,block_dim=1"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(64 * 80, 6, specials), {64, 80}, Role::weight, true);
      check_shaped(f, mase_block_inputs(2 * 5 * 80, 7, specials), {2, 5, 80}, Role::activation,
                   f.to_string().find("block_dim") == std::string::npos);
    }
    // the element count not divisible by the block size: MASE's assert, from the reference
    std::vector<float> out(33);
    CHECK(qnum::kernel::quantize_path(f, {33}) == qnum::kernel::QuantizePath::reference);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(33, 8, false), out, {33}), qnum::Error);
  }
  check_shaped(fmt("mxint:width=8,quantile_search=true", qnum::mase_compat), mase_block_inputs(64 * 32, 9, false),
               {64, 32}, Role::weight, false);
}
