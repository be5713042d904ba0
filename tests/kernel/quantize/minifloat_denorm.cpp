// Kernel quantize tests: minifloat_denorm, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: minifloat_denorm exact and mase") {
  for (const char* spec :
       {"minifloat_denorm", "minifloat_denorm:width=6,exponent_width=3", "minifloat_denorm:width=16,exponent_width=5",
        "minifloat_denorm:width=5,exponent_width=3,exponent_bias=2",
        "minifloat_denorm:width=16,exponent_width=8,exponent_bias=128", "minifloat_denorm:width=3,exponent_width=1"}) {
    check_format_full(fmt(spec));
    check_format_full(fmt(with(spec, "subnormals=flush")));
    check_format_full(fmt(with(spec, "rounding=ceil")));
    check_format_full(fmt(spec, qnum::mase_compat));
  }
  check_format_full(fmt("minifloat_denorm:width=4,exponent_width=3", qnum::mase_compat));  // M = 0
}
