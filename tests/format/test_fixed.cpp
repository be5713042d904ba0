// Fixed point (`integer`): exhaustive conformance for every width up to 16 bits, policies,
// the value type, and MASE's float32 quirks.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "format/conformance.hpp"
#include "qnum/format/fixed.hpp"

using namespace qnum;

namespace {
std::vector<double> fixed_values(const FixedSpec& s) {
  std::vector<double> v;
  for (std::int64_t k = s.kmin(); k <= s.kmax(); ++k) v.push_back(std::ldexp(static_cast<double>(k), -s.frac_width));
  return qnum_test::sorted_unique(v);
}
}  // namespace

TEST_CASE("fixed: exhaustive codes and nearest-even for every width <= 16") {
  for (bool is_signed : {true, false})
    for (int w = 1; w <= 16; ++w)
      for (int f : {-3, 0, w / 2, w, w + 5}) {
        const FixedSpec s{w, f, is_signed};
        CAPTURE(w);
        CAPTURE(f);
        CAPTURE(is_signed);
        const auto values = fixed_values(s);
        qnum_test::check_codes(s, values, w);
        if (w <= 12 || f == w / 2) qnum_test::check_nearest_even(s, values);
      }
}

TEST_CASE("fixed: spec examples (W8 F4)") {
  const FixedSpec s{8, 4, true};
  CHECK(quantize(s, exact, 0.03125f) == 0.0f);
  CHECK(quantize(s, exact, 0.09375f) == 0.125f);
  CHECK(quantize(s, exact, 100.0f) == 7.9375f);
  CHECK(quantize(s, exact, -8.5f) == -8.0f);
  CHECK(quantize(s, exact, 7.99f) == 7.9375f);
  CHECK(quantize(s, mase_compat, 0.09375f) == 0.125f);
  CHECK(std::isnan(quantize(s, exact, NAN)));
  CHECK(quantize(s, exact, INFINITY) == 7.9375f);
  CHECK(quantize(s, exact, -INFINITY) == -8.0f);
}

TEST_CASE("fixed: rounding modes and overflow") {
  const FixedSpec s{8, 0, true};
  CHECK(quantize(s, exact.with(Rounding::nearest_away), 2.5f) == 3.0f);
  CHECK(quantize(s, exact.with(Rounding::nearest_away), -2.5f) == -3.0f);
  CHECK(quantize(s, exact.with(Rounding::nearest_even), 2.5f) == 2.0f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), -2.7f) == -2.0f);
  CHECK(quantize(s, exact.with(Rounding::floor), -2.2f) == -3.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 2.2f) == 3.0f);
  CHECK(quantize(s, exact.with(Overflow::wrap), 128.0f) == -128.0f);
  CHECK(quantize(s, exact.with(Overflow::wrap), 129.0f) == -127.0f);
  CHECK(quantize(s, exact.with(Overflow::wrap), -129.0f) == 127.0f);
  CHECK(quantize(s, exact, 1000.0f) == 127.0f);
}

TEST_CASE("fixed: stochastic rounding is seeded, unbiased and index-keyed") {
  const FixedSpec s{8, 0, true};
  const Policy p = exact.with(Rounding::stochastic).with_seed(42);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float q = quantize(s, p, 2.25f, static_cast<std::uint64_t>(i));
    CHECK((q == 2.0f || q == 3.0f));
    sum += q;
    CHECK(q == quantize(s, p, 2.25f, static_cast<std::uint64_t>(i)));  // deterministic
  }
  CHECK(sum / n == doctest::Approx(2.25).epsilon(0.01));
}

TEST_CASE("fixed: MASE float32 quirks") {
  // W=32: the clamp bound 2^31-1 becomes 2^31 in float32.
  const FixedSpec s{32, 0, true};
  CHECK(quantize(s, mase_compat, 1e10f) == 2147483648.0f);
  CHECK(quantize(s, mase_compat, -1e10f) == -2147483648.0f);
  CHECK(std::isnan(quantize(s, mase_compat, NAN)));
  CHECK(std::signbit(quantize(FixedSpec{8, 4, true}, mase_compat, -0.01f)));  // torch.round(-0.16) = -0
}

TEST_CASE("fixed: validation messages") {
  CHECK_THROWS_WITH_AS(FixedSpec({0, 0, true}).validate(), "integer: width 0 must be in [1, 32]", Error);
  CHECK_THROWS_WITH_AS(FixedSpec({33, 0, true}).validate(), "integer: width 33 must be in [1, 32]", Error);
  CHECK_THROWS_WITH_AS(FixedSpec({8, 65, true}).validate(), "integer: frac_width 65 must be in [-64, 64]", Error);
}

TEST_CASE("fixed: value type Fixed<8,4> agrees with the runtime spec") {
  using F = Fixed<8, 4>;
  CHECK(float(F(0.09375f)) == 0.125f);
  CHECK(float(F(100.0f)) == 7.9375f);
  CHECK(float(F(1.5f) + F(0.25f)) == 1.75f);
  CHECK(float(F(7.0f) + F(7.0f)) == 7.9375f);  // saturating
  CHECK(float(std::numeric_limits<F>::max()) == 7.9375f);
  CHECK(float(std::numeric_limits<F>::lowest()) == -8.0f);
  CHECK(float(std::numeric_limits<F>::min()) == 0.0625f);
  CHECK(to_binary(F(1.5f)) == "0b0001.1000");
  CHECK(to_binary(F(-1.0f)) == "0b1111.0000");
  using W = Fixed<8, 0, true, exact.with(Overflow::wrap)>;
  CHECK(float(W(100.0f) + W(100.0f)) == -56.0f);
  CHECK(std::numeric_limits<W>::is_modulo);
  for (std::uint32_t c = 0; c < 256; ++c) CHECK(F::from_code(c).value() == decode(F::spec, c));
}
