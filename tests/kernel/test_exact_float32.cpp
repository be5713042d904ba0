// The float32 fast paths of the exact bundle (kernel/exact_float32.hpp, the CUDA backend's)
// against the scalar references on the CPU: every 1021st float32 bit pattern (4.2 M inputs
// spread over all exponents, signs, NaN and Inf), every bfloat16 pattern, and each grid
// point's neighbourhood (ties included) for the 8-bit formats. The GPU tests run every input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "qnum/kernel/exact_float32.hpp"

namespace {

using qnum::detail::bits_float;
using qnum::detail::float_bits;

std::vector<float> sample_inputs() {
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 1021)
    x.push_back(bits_float(static_cast<std::uint32_t>(b)));
  for (std::uint32_t b = 0; b < 65536; ++b) x.push_back(bits_float(b << 16));
  return x;
}

template <class Spec, class Fast>
void check_same(const Spec& s, const Fast& fast, const std::vector<float>& in, const std::string& what) {
  int bad = 0;
  for (const float x : in) {
    const float want = qnum::quantize(s, qnum::exact, x), got = fast(x);
    if (float_bits(want) != float_bits(got) && !(want != want && got != got) && bad++ < 5)
      FAIL_CHECK(what << ": input 0x" << std::hex << float_bits(x) << std::dec << " (" << x << ") reference " << want
                      << " fast " << got);
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << in.size() << " inputs differ");
}

/// Each decoded value of a <= 8-bit code and its float32 neighbours, plus the midpoints
/// between consecutive grid values and their neighbours (the ties).
template <class Spec>
std::vector<float> grid_neighbourhood(const Spec& s) {
  std::vector<float> grid, x;
  for (std::uint32_t c = 0; c < (1u << s.width); ++c) {
    const float v = qnum::decode(s, c);
    if (v == v) grid.push_back(v);
  }
  std::sort(grid.begin(), grid.end());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    std::vector<float> centres{grid[i]};
    if (i + 1 < grid.size()) centres.push_back(static_cast<float>((static_cast<double>(grid[i]) + grid[i + 1]) / 2));
    for (const float c : centres)
      for (int d = -2; d <= 2; ++d) x.push_back(bits_float(float_bits(c) + static_cast<std::uint32_t>(d)));
  }
  return x;
}

}  // namespace

TEST_CASE("exact_float32: fixed point fast path equals the reference") {
  const auto in = sample_inputs();
  for (const qnum::FixedSpec s :
       {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{4, 0, false}, qnum::FixedSpec{16, 10, true},
        qnum::FixedSpec{24, 12, true}, qnum::FixedSpec{8, -3, true}, qnum::FixedSpec{24, 0, false},
        qnum::FixedSpec{1, 0, true}, qnum::FixedSpec{12, 60, true}, qnum::FixedSpec{8, -64, true}}) {
    const std::string what = "integer " + std::to_string(s.width) + "/" + std::to_string(s.frac_width);
    CAPTURE(what);
    const auto fast = qnum::detail::FixedExactF32::make(s, qnum::exact);
    REQUIRE(fast);
    check_same(s, *fast, in, what);
    if (s.width <= 8) check_same(s, *fast, grid_neighbourhood(s), what + " grid");
  }
  // Outside the argument: no fast path.
  CHECK_FALSE(qnum::detail::FixedExactF32::make(qnum::FixedSpec{25, 4, true}, qnum::exact));
  CHECK_FALSE(qnum::detail::FixedExactF32::make(qnum::FixedSpec{8, 4, true}, qnum::mase_compat));
  CHECK_FALSE(qnum::detail::FixedExactF32::make(qnum::FixedSpec{8, 4, true}, qnum::exact.with(qnum::Rounding::floor)));
}

TEST_CASE("exact_float32: minifloat_ieee fast path equals the reference") {
  const auto in = sample_inputs();
  for (const auto& s :
       {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
        qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{4, 2, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{16, 8, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{6, 3, std::nullopt, qnum::Specials::fn},
        qnum::MinifloatSpec{8, 4, -2, qnum::Specials::none}, qnum::MinifloatSpec{8, 5, 30, qnum::Specials::ieee}}) {
    const std::string what = "minifloat E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width) +
                             " bias " + std::to_string(s.bias());
    CAPTURE(what);
    const auto fast = qnum::detail::MinifloatExactF32::make(s, qnum::exact);
    REQUIRE(fast);
    check_same(s, *fast, in, what);
    if (s.width <= 8) check_same(s, *fast, grid_neighbourhood(s), what + " grid");
  }
  CHECK_FALSE(qnum::detail::MinifloatExactF32::make(qnum::MinifloatSpec::fp8_e4m3(),
                                                    qnum::exact.with(qnum::Overflow::infinity)));
}
