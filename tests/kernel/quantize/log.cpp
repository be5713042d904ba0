// Kernel quantize tests: log, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: log exact and mase") {
  for (const char* spec : {"log", "log:width=4", "log:width=6,exponent_bias=0", "log:width=8,exponent_bias=126",
                           "log:width=9,exponent_bias=140", "log:width=9,exponent_bias=128", "log:width=3",
                           "log:width=7,exponent_bias=-40"}) {
    check_format_full(fmt(spec));
    check_format_full(fmt(with(spec, "rounding=nearest_away")));
    check_format_full(fmt(with(spec, "rounding=stochastic,seed=3")));
    check_format_full(fmt(spec, qnum::mase_compat));
    // MASE's sign(x + c), c = 2^emin·0.1f: x = -c gives sign 0 and the value +0 (lanes of vectors)
    const Format m = fmt(spec, qnum::mase_compat);
    const float c = static_cast<float>(std::ldexp(1.0, std::get<qnum::LogSpec>(m.spec).emin()) * 0.1);
    std::vector<float> x;
    for (int i = 0; i < 64; ++i) x.push_back(i % 3 == 0 ? -c : (i % 3 == 1 ? std::nextafter(-c, 0.0f) : -2.0f * c));
    check_format(m, x);
  }
}
