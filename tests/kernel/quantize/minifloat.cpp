// Kernel quantize tests: minifloat_ieee, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: minifloat_ieee exact (OCP FP8 specials, overflow, flush) and mase") {
  for (const char* spec :
       {"minifloat_ieee", "fp8_e4m3", "fp8_e5m2", "minifloat_ieee:width=16,exponent_width=5",
        "minifloat_ieee:width=16,exponent_width=8,specials=ieee", "minifloat_ieee:width=6,exponent_width=3",
        "minifloat_ieee:width=4,exponent_width=2", "minifloat_ieee:width=12,exponent_width=4,exponent_bias=3",
        "minifloat_ieee:width=2,exponent_width=1", "minifloat_ieee:width=24,exponent_width=8,specials=ieee",
        "minifloat_ieee:width=32,exponent_width=8,specials=ieee",
        "minifloat_ieee:width=16,exponent_width=8,exponent_bias=128",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=-5",
        "minifloat_ieee:width=16,exponent_width=5,exponent_bias=130",
        "minifloat_ieee:width=10,exponent_width=5,specials=fn"}) {
    const Format f = fmt(spec);
    check_format_full(f);
    check_format_full(fmt(with(spec, "subnormals=flush")));
    check_format_full(fmt(with(spec, "rounding=toward_zero")));
  }
  check_format_full(fmt("fp8_e5m2:overflow=infinity"));
  using qnum::kernel::QuantizePath;
  CHECK(qnum::kernel::quantize_path(fmt("fp8_e4m3")) == QuantizePath::simd);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee", qnum::mase_compat)) == QuantizePath::simd);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee:rounding=floor")) == QuantizePath::scalar);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee:width=16,exponent_width=8,exponent_bias=128")) ==
        QuantizePath::scalar);
  for (const char* spec :
       {"minifloat_ieee", "minifloat_ieee:width=16,exponent_width=5", "minifloat_ieee:width=6,exponent_width=3",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=3", "minifloat_ieee:width=16,exponent_width=7",
        "minifloat_ieee:width=4,exponent_width=3", "minifloat_ieee:width=24,exponent_width=7,exponent_bias=126",
        "minifloat_ieee:width=16,exponent_width=8,exponent_bias=128",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=-8"}) {
    check_format_full(fmt(spec, qnum::mase_compat));
  }
}
