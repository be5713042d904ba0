// Compile-time value and block types: std::numeric_limits agree with the runtime specs'
// info(), and packed blocks round-trip through the runtime Format.
#include <doctest/doctest.h>

#include <limits>
#include <random>

#include "qnum/qnum.hpp"

using namespace qnum;

TEST_CASE("value types: numeric_limits agree with runtime info") {
  CHECK(double(float(std::numeric_limits<Fixed<8, 4>>::max())) ==
        Format::parse("integer:width=8,frac_width=4").info().max);
  CHECK(double(float(std::numeric_limits<FP8E4M3>::max())) == Format::parse("fp8_e4m3").info().max);
  CHECK(double(float(std::numeric_limits<FP8E5M2>::max())) == Format::parse("fp8_e5m2").info().max);
  CHECK(std::numeric_limits<FP8E5M2>::has_infinity);
  CHECK(!std::numeric_limits<FP8E4M3>::has_infinity);
  CHECK(double(float(std::numeric_limits<Log<8>>::max())) == Format::parse("log:width=8").info().max);
  CHECK(std::numeric_limits<BlockFP<7, 8, 16>>::is_specialized);
  CHECK(double(std::numeric_limits<BlockFP<7, 8, 16>>::max()) ==
        Format::parse("block_fp:width=8,exponent_width=8,block_size=16").info().max);
  CHECK(std::numeric_limits<BlockLog<8, 4, 16>>::min() == std::ldexp(1.0f, -15));
  CHECK(std::numeric_limits<MXInt8>::max() == Format::parse("mxint8").info().max);
  CHECK(std::numeric_limits<MXFP4>::max() == Format::parse("mxfp4_e2m1").info().max);
  static_assert(sizeof(MXInt8) == 33 && sizeof(MXFP4) == 17 && sizeof(BlockFP<7, 8, 16>) == 17);
}

TEST_CASE("value types: packed blocks equal the runtime Format on random blocks") {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::array<float, 32> x{};
    const float scale = std::ldexp(1.0f, trial % 40 - 20);
    for (auto& v : x) v = d(rng) * scale;
    const auto mx = MXInt8::from_floats(x).to_floats();
    const auto mf = MXFP4::from_floats(x).to_floats();
    const auto ref_mx = Format::parse("mxint8").quantize(x, {32});
    const auto ref_mf = Format::parse("mxfp4_e2m1").quantize(x, {32});
    std::array<float, 16> h{};
    std::copy(x.begin(), x.begin() + 16, h.begin());
    const auto bf = BlockFP<7, 8, 16>::from_floats(h).to_floats();
    const auto ref_bf = Format::parse("block_fp:width=8,exponent_width=8,block_size=16").quantize(h, {16});
    const auto bl = BlockLog<8, 8, 16>::from_floats(h).to_floats();
    const auto ref_bl = Format::parse("block_log:width=8,exponent_bias_width=8,block_size=16").quantize(h, {16});
    for (int i = 0; i < 32; ++i) {
      CHECK(mx[i] == ref_mx[i]);
      CHECK(mf[i] == ref_mf[i]);
    }
    for (int i = 0; i < 16; ++i) {
      CHECK(bf[i] == ref_bf[i]);
      CHECK(bl[i] == ref_bl[i]);
    }
  }
}
