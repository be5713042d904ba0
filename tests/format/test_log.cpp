// Base-2 logarithmic format (`log`): exhaustive codes for every width and several biases,
// nearest in the log domain, policies, MASE's float32 quirks, the value type,
// numeric_limits and printing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/log.hpp"

using namespace qnum;
using qnum_test::describe;
using qnum_test::FailureLog;

namespace {

std::vector<double> log_values(const LogSpec& s) {
  std::vector<double> v;
  for (int e = -s.bias(); e <= (1 << (s.width - 1)) - 1 - s.bias(); ++e) {
    v.push_back(std::ldexp(1.0, e));
    v.push_back(-std::ldexp(1.0, e));
  }
  return qnum_test::sorted_unique(v);
}

/// Expected exact result from long-double log2 (independent of the implementation's
/// (v/2^k)^2 >= 2 test): nearest exponent in the log domain, clamped, sign of x.
float expected_log(const LogSpec& s, float x) {
  const long double mag = std::fabs(static_cast<long double>(x));
  int e = mag == 0 ? -s.bias() : static_cast<int>(std::lround(std::log2(mag)));
  e = std::max(-s.bias(), std::min((1 << (s.width - 1)) - 1 - s.bias(), e));
  return std::copysign(std::ldexp(1.0f, e), x);
}

/// Probes around every log-domain midpoint 2^(k+0.5) (the float nearest and its neighbours),
/// at the powers of two, and beyond the range.
void check_nearest_log(const LogSpec& s) {
  FailureLog log;
  std::vector<float> xs;
  for (int k = -s.bias() - 3; k <= (1 << (s.width - 1)) - s.bias() + 2; ++k) {
    if (k < -149 || k > 126) continue;
    const auto mid = static_cast<float>(std::ldexp(std::sqrt(2.0L), k));
    const float p = std::ldexp(1.0f, k);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), p, std::nextafter(p, 0.0f),
                    std::nextafter(p, INFINITY), p * 1.2f, p * 1.7f})
      if (x != 0 && !std::isinf(x)) {
        xs.push_back(x);
        xs.push_back(-x);
      }
  }
  xs.insert(xs.end(), {3e38f, -3e38f, 1e-45f, -1e-45f, 0.0f});
  for (float x : xs) {
    const float q = quantize(s, exact, x);
    if (!qnum_test::same_bits(q, expected_log(s, x))) log.fail(describe(x) + " -> " + describe(q));
  }
  log.check("quantize(x) == nearest power of two in the log domain");
}

}  // namespace

TEST_CASE("log: exhaustive codes and log-domain nearest for every width and several biases") {
  int formats = 0;
  for (int w = 2; w <= 9; ++w)
    for (int b : {(1 << (w - 2)) - 1, 0, -3, 5, (1 << (w - 1)), 140}) {
      const LogSpec s{w, b};
      try {
        s.validate();
      } catch (const Error&) {
        continue;
      }
      CAPTURE(w);
      CAPTURE(b);
      const auto values = log_values(s);
      qnum_test::check_codes(s, values, w);
      check_nearest_log(s);
      qnum_test::check_sign_symmetry(s, exact);
      CHECK(info(s, exact).distinct_values == static_cast<double>(values.size()));
      ++formats;
    }
  CHECK(formats > 30);
}

TEST_CASE("log: spec 6.1 examples in mase mode and exact mode (W8, b 63)") {
  const LogSpec s{8, std::nullopt};
  for (const Policy& p : {mase_compat, exact}) {
    CAPTURE(to_string(p.semantics));
    CHECK(quantize(s, p, 0.0f) == std::ldexp(1.0f, -63));
    CHECK(quantize(s, p, 1.4f) == 1.0f);
    CHECK(quantize(s, p, 1.42f) == 2.0f);
    CHECK(quantize(s, p, -0.3f) == -0.25f);
    CHECK(quantize(s, p, 1e30f) == std::ldexp(1.0f, 64));
    CHECK(quantize(s, p, INFINITY) == std::ldexp(1.0f, 64));
    CHECK(quantize(s, p, -INFINITY) == -std::ldexp(1.0f, 64));
    CHECK(std::isnan(quantize(s, p, NAN)));
  }
  // MASE takes the sign of x + 0.1 * 2^emin: zero and tiny negatives come out positive.
  CHECK(quantize(s, mase_compat, -0.0f) == std::ldexp(1.0f, -63));
  CHECK(quantize(s, mase_compat, -1e-30f) == std::ldexp(1.0f, -63));
  CHECK(quantize(s, exact, -0.0f) == -std::ldexp(1.0f, -63));  // exact: sign bit of x
  CHECK(quantize(s, exact, -1e-30f) == -std::ldexp(1.0f, -63));
  const LogSpec t{8, 128};  // MASE's own test config: exponents [-128, -1]
  CHECK(quantize(t, mase_compat, 3.0f) == 0.5f);
  CHECK(quantize(t, exact, 3.0f) == 0.5f);
  CHECK(quantize(t, mase_compat, 0.0f) == std::ldexp(1.0f, -128));
}

TEST_CASE("log: directed and stochastic rounding") {
  const LogSpec s{8, std::nullopt};
  CHECK(quantize(s, exact.with(Rounding::nearest_away), 1.42f) == 2.0f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), 1.9f) == 1.0f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), -1.9f) == -1.0f);
  CHECK(quantize(s, exact.with(Rounding::floor), 1.9f) == 1.0f);
  CHECK(quantize(s, exact.with(Rounding::floor), -1.1f) == -2.0f);
  CHECK(quantize(s, exact.with(Rounding::floor), -1.0f) == -1.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1.1f) == 2.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1.0f) == 1.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), -1.9f) == -1.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1e30f) == std::ldexp(1.0f, 64));
  CHECK(quantize(s, exact.with(Rounding::floor), 1e-30f) == std::ldexp(1.0f, -63));  // no zero: clamps
  const Policy sr = exact.with(Rounding::stochastic).with_seed(11);
  int up = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float q = quantize(s, sr, 1.25f, static_cast<std::uint64_t>(i));
    REQUIRE((q == 1.0f || q == 2.0f));
    up += q == 2.0f;
  }
  CHECK(static_cast<double>(up) / n == doctest::Approx(0.25).epsilon(0.05));  // linear position
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += quantize(s, sr, 1.25f, static_cast<std::uint64_t>(i));
  CHECK(sum / n == doctest::Approx(1.25).epsilon(0.01));  // hence unbiased
}

TEST_CASE("log: encode/decode layout, validation and info") {
  const LogSpec s{8, std::nullopt};
  CHECK(encode(s, 1.0f) == 63u);
  CHECK(encode(s, -1.0f) == 0x80u + 63u);
  CHECK(encode(s, 0.0f) == 0u);
  CHECK(decode(s, 0x7F) == std::ldexp(1.0f, 64));
  CHECK(decode(s, 0xFF) == -std::ldexp(1.0f, 64));
  CHECK_THROWS_WITH_AS(encode(s, NAN), "log: NaN has no code", Error);
  CHECK_THROWS_WITH_AS(LogSpec({10, std::nullopt}).validate(), "log: width 10 must be in [2, 9]", Error);
  CHECK_THROWS_WITH_AS(LogSpec({8, 200}).validate(),
                       "log: exponent_bias 200 gives exponents [-200, -73] outside float32's [-149, 127]", Error);
  const auto f = info(s, exact);
  CHECK(f.bits_per_value == 8);
  CHECK(f.min_positive == std::ldexp(1.0, -63));
  CHECK(f.max == std::ldexp(1.0, 64));
  CHECK(f.distinct_values == 256.0);
}

TEST_CASE("log: value type, numeric_limits and to_binary") {
  using L8 = Log<8>;
  FailureLog log;
  for (std::uint32_t c = 0; c < 256; ++c) {
    const float v = L8::from_code(c).value();
    if (v != decode(L8::spec, c)) log.fail("decode " + std::to_string(c));
    if (L8(v).code() != c) log.fail("round trip " + std::to_string(c));
  }
  log.check("Log<8> == runtime spec");
  CHECK(float(L8(1.42f)) == 2.0f);
  CHECK(float(L8(2.0f) * L8(4.0f)) == 8.0f);
  CHECK(float(L8(2.0f) + L8(4.0f)) == 8.0f);  // 6 is above 2^2.5
  CHECK(float(-L8(2.0f)) == -2.0f);
  CHECK(L8(1.0f) < L8(2.0f));
  using Lm = Log<8, 63, mase_compat>;
  CHECK(float(Lm(-0.0f)) == std::ldexp(1.0f, -63));
  using N = std::numeric_limits<L8>;
  CHECK(float(N::min()) == std::ldexp(1.0f, -63));
  CHECK(float(N::denorm_min()) == std::ldexp(1.0f, -63));
  CHECK(float(N::max()) == std::ldexp(1.0f, 64));
  CHECK(float(N::lowest()) == -std::ldexp(1.0f, 64));
  CHECK(float(N::epsilon()) == 1.0f);
  CHECK(!N::has_infinity);
  CHECK(!N::has_quiet_NaN);
  CHECK(to_binary(L8(1.0f)) == "0b0.0111111");
  CHECK(to_binary(L8(-0.5f)) == "0b1.0111110");
  CHECK(to_binary(Log<4, 2>(4.0f)) == "0b0.100");
}
