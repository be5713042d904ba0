// The runtime Format: text form parse/to_string round trip for every family and preset,
// policy keys, and one clear qnum::Error per kind of invalid spec.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "qnum/format/format.hpp"

using namespace qnum;

TEST_CASE("format: parse/to_string round trip") {
  const std::vector<std::string> texts = {
      "integer:width=8,frac_width=4",
      "integer:width=8,frac_width=4,is_signed=false",
      "integer_floor:width=6,frac_width=-2",
      "fixed:width=16,frac_width=20",
      "integer:width=8,frac_width=4,rounding=stochastic,seed=7",
      "integer:width=8,frac_width=0,overflow=wrap",
      "minifloat_denorm:width=8,exponent_width=4",
      "minifloat_denorm:width=8,exponent_width=4,exponent_bias=-1",
      "minifloat_ieee:width=8,exponent_width=4,exponent_bias=none",
      "minifloat_ieee:width=6,exponent_width=3,exponent_bias=6,subnormals=flush",
      "minifloat_ieee:width=8,exponent_width=5,exponent_bias=15,specials=ieee,overflow=infinity",
      "fp8_e4m3",
      "fp8_e5m2",
      "log:width=8",
      "log:width=5,exponent_bias=0,rounding=floor",
      "block_fp:width=8,exponent_width=8,block_size=1x16",
      "block_fp:width=4,exponent_width=8,exponent_bias=127,block_size=16",
      "block_minifloat:width=8,exponent_width=4,exponent_bias_width=8,block_size=16",
      "block_log:width=8,exponent_bias_width=4,block_size=8x8",
      "binary:bipolar=false",
      "binary:stochastic=true,bipolar=true",
      "residual_sign:levels=3,means=0.5x0.3x0.2",
      "binarize",
      "ternary:scaling_factor=true,threshold=0.05",
      "scale_integer:width=4,is_signed=false",
      "mxint:width=8,block_size=32",
      "mxint8",
      "mxint:width=6,block_size=16,block_dim=0",
      "mxfp:exponent_width=2,frac_width=1,block_size=32",
      "mxfp8_e4m3",
      "mxfp4_e2m1",
      "integer:width=8,frac_width=4,mode=mase_compat",
      "mxint_hardware:width=8,exponent_width=4,parallelism=1x8,mode=mase_compat",
  };
  for (const auto& t : texts) {
    CAPTURE(t);
    const auto f = Format::parse(t);
    const auto canonical = f.to_string();
    CAPTURE(canonical);
    const auto g = Format::parse(canonical);
    CHECK(f == g);
    CHECK(g.to_string() == canonical);
  }
}

TEST_CASE("format: names, aliases and policies") {
  CHECK(Format::parse("integer_floor:width=8,frac_width=4").policy.rounding == Rounding::floor);
  CHECK(Format::parse("integer:width=8,frac_width=4,floor=true").policy.rounding == Rounding::floor);
  CHECK(Format::parse("integer:width=8").to_string() == "integer:width=8,frac_width=4");
  CHECK(Format::parse("integer:width=8", mase_compat).policy == mase_compat);
  CHECK(Format::parse("minifloat_ieee:width=8,exponent_width=4,exponent_bias=7,specials=fn").to_string() == "fp8_e4m3");
  CHECK(Format::parse("mxint:element_bits=8,block_size=32").to_string() == "mxint8");
  CHECK(Format::parse("mxfp:element_exp_bits=2,element_frac_bits=1,block_size=32").to_string() == "mxfp4_e2m1");
  CHECK(Format::parse("integer:width=8,rounding=AC_RND_CONV,overflow=AC_WRAP").policy.overflow == Overflow::wrap);
  CHECK(Format::parse(" integer : width = 8 , frac_width = 2 ").to_string() == "integer:width=8,frac_width=2");
  CHECK(Format::parse("residual_sign:levels=2,x_quantizer=none,means=0.7x0.3").to_string() ==
        "residual_sign:levels=2,means=0.7x0.3");
}

TEST_CASE("format: invalid specs are rejected with a message naming the problem") {
  struct Bad {
    std::string text, message;
  };
  const std::vector<Bad> bad = {
      {"integer:width=0", "integer: width 0 must be in [1, 32]"},
      {"integer:width=33", "integer: width 33 must be in [1, 32]"},
      {"integer:width=8,frac_width=99", "integer: frac_width 99 must be in [-64, 64]"},
      {"integer:widht=8", "integer: unknown key 'widht' (allowed: width, frac_width, is_signed, floor)"},
      {"integer:width=abc", "integer: width must be an integer, got 'abc'"},
      {"integer:width", "integer: malformed item 'width' (expected key=value)"},
      {"integer:width=8,width=8", "integer: key 'width' given twice"},
      {"integer:", "format spec 'integer:': nothing after ':'"},
      {":width=8", "format spec ':width=8': missing format name before ':'"},
      {"Integer:width=8", "format spec 'Integer:width=8': malformed name 'Integer'"},
      {"integer:is_signed=maybe", "integer: is_signed must be true or false, got 'maybe'"},
      {"minifloat_ieee:width=8,exponent_width=8", "minifloat_ieee: exponent_width 8 must be in [1, width-1] (width 8)"},
      {"minifloat_ieee:width=8,exponent_width=9", "minifloat_ieee: exponent_width 9 must be in [1, width-1] (width 8)"},
      {"minifloat_denorm:width=8,exponent_width=7",
       "minifloat_denorm: exponent_width 7 must be in [1, width-2] (width 8; at least one mantissa bit)"},
      {"block_fp:block_size=0", "block_fp: block_size 0 must be >= 1 (or -1 for a whole dim)"},
      {"mxint:block_size=0", "mxint: block_size 0 must be in [1, 4096]"},
      {"integer:width=8,overflow=infinity",
       "integer: overflow=infinity needs a format with an Inf code (minifloat_ieee with specials=ieee)"},
      {"fp8_e4m3:overflow=wrap", "minifloat_ieee: overflow=wrap is only defined for fixed point (integer)"},
      {"integer:width=8,rounding=up",
       "unknown rounding 'up' (allowed: nearest_even, nearest_away, toward_zero, "
       "floor, ceil, stochastic)"},
      {"integer:width=8,rounding=stochastic,mode=mase",
       "integer: mase_compat rounds to nearest even (integer also floor); rounding=stochastic is exact-mode only"},
      {"block_fp:width=8,skip_first_dim=true",
       "block_fp: skip_first_dim is not a format key; pass the operand role instead (--role activation means "
       "skip_first_dim=true)"},
      {"mxint_hardware:width=8",
       "mxint_hardware: mxint_hardware is MASE's format and exists only in mase_compat "
       "mode (--mode mase)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.text);
    CHECK_THROWS_WITH_AS(Format::parse(b.text), b.message.c_str(), Error);
  }
  CHECK_THROWS_AS(Format::parse("nosuch:width=8"), Error);
}

TEST_CASE("format: tensor quantize checks sizes") {
  const auto f = Format::parse("integer:width=8,frac_width=4");
  std::vector<float> in(6, 0.1f), out(5);
  CHECK_THROWS_WITH_AS(f.quantize(in, out, {2, 3}), "integer: output has 5 elements, input has 6", Error);
  CHECK_THROWS_WITH_AS(f.quantize(in, {2, 2}), "integer: input has 6 elements but shape [2, 2] needs 4", Error);
  const auto q = f.quantize(in, {2, 3});
  CHECK(q[0] == 0.125f);
}
