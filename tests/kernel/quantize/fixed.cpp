// Kernel quantize tests: integer (fixed point), against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: integer, exact and mase, all roundings") {
  for (const char* spec :
       {"integer:width=8,frac_width=4", "integer:width=8,frac_width=0,is_signed=false", "integer:width=4,frac_width=2",
        "integer:width=16,frac_width=8", "integer:width=32,frac_width=0", "integer:width=32,frac_width=16",
        "integer:width=26,frac_width=3", "integer:width=25,frac_width=-5", "integer:width=1,frac_width=0",
        "integer:width=8,frac_width=-3", "integer:width=12,frac_width=64", "integer:width=8,frac_width=-64",
        "integer:width=32,frac_width=40,is_signed=false"}) {
    for (const char* r : {"nearest_even", "nearest_away", "floor", "ceil", "toward_zero", "stochastic"}) {
      const Format f = fmt(with(spec, std::string("rounding=") + r + ",seed=7"));
      if (std::string(r) == "nearest_even") CHECK(qnum::kernel::quantize_path(f) == qnum::kernel::QuantizePath::simd);
      check_format_full(f);
    }
    check_format_full(fmt(with(spec, "overflow=wrap")));
    check_format_full(fmt(spec, qnum::mase_compat));
    check_format_full(fmt(with(spec, "rounding=floor"), qnum::mase_compat));
  }
}
