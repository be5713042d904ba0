// Minifloat without implicit bit (`minifloat_denorm`): exhaustive conformance over many
// (W, E, bias), MASE's no-carry / ceil-exponent quirks against the corrected exact mode,
// policies and validation.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/minifloat_denorm.hpp"

using namespace qnum;
using qnum_test::describe;
using qnum_test::FailureLog;

namespace {

/// Values from the formula +-k 2^(e-M), k in [0, 2^M-1], e in [-b, 2^E-1-b] (aliases folded).
std::vector<double> denorm_values(const MinifloatDenormSpec& s) {
  const int m = s.mantissa_bits(), b = s.bias();
  std::vector<double> v;
  for (int e = -b; e <= (1 << s.exponent_width) - 1 - b; ++e)
    for (int k = 0; k < (1 << m); ++k) {
      v.push_back(std::ldexp(k, e - m));
      v.push_back(-std::ldexp(k, e - m));
    }
  return qnum_test::sorted_unique(v);
}

/// M = 1: every value is a power of two (all codes odd, so "even code" does not decide);
/// ties 1.5 * 2^e round to the larger magnitude (precision-1 RNE rounds 1.5 to 2), the tie
/// between 0 and the smallest value to 0.
void check_nearest_m1(const MinifloatDenormSpec& s, const std::vector<double>& values) {
  FailureLog log;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double lo = values[i], hi = values[i + 1];
    if (lo < 0) continue;
    const auto mid = static_cast<float>((lo + hi) / 2);
    const double want = lo == 0 ? lo : hi;
    if (quantize(s, exact, mid) != want || quantize(s, exact, -mid) != -want) log.fail("mid " + describe(mid));
    if (quantize(s, exact, std::nextafter(mid, 0.0f)) != lo) log.fail("below mid " + describe(mid));
    if (quantize(s, exact, std::nextafter(mid, INFINITY)) != hi) log.fail("above mid " + describe(mid));
  }
  log.check("M=1 nearest");
}

}  // namespace

TEST_CASE("minifloat_denorm: exhaustive codes and nearest-even for every (W <= 12, E, bias) and some W = 16") {
  int formats = 0;
  for (int w = 3; w <= 16; ++w)
    for (int e = 1; e < w - 1; ++e)
      for (int db : {0, 4, -3}) {
        if (w > 12 && (db != 0 || (e != 2 && e != 5 && e != 8))) continue;
        const MinifloatDenormSpec s{w, e, (1 << (e - 1)) - 1 + db};
        try {
          s.validate();
        } catch (const Error&) {
          continue;
        }
        CAPTURE(w);
        CAPTURE(e);
        CAPTURE(s.bias());
        const auto values = denorm_values(s);
        qnum_test::check_codes(s, values, w);
        if (s.mantissa_bits() == 1)
          check_nearest_m1(s, values);
        else
          qnum_test::check_nearest_even(s, values);
        if (w <= 8) qnum_test::check_sign_symmetry(s, exact);
        CHECK(info(s, exact).distinct_values == static_cast<double>(values.size()));
        ++formats;
      }
  CHECK(formats > 100);
}

TEST_CASE("minifloat_denorm: spec 6.1 examples in mase mode, corrected in exact mode (W8 E4)") {
  const MinifloatDenormSpec s{8, 4, std::nullopt};
  CHECK(quantize(s, mase_compat, 1.0f) == 0.875f);  // ceil exponent + clamped mantissa
  CHECK(quantize(s, mase_compat, 0.9f) == 0.875f);
  CHECK(quantize(s, mase_compat, 0.5f) == 0.4375f);
  CHECK(quantize(s, mase_compat, 2.0f) == 1.75f);
  CHECK(quantize(s, mase_compat, 100.0f) == 96.0f);
  CHECK(quantize(s, mase_compat, 300.0f) == 224.0f);
  CHECK(quantize(s, mase_compat, 0.001f) == 0.0009765625f);
  CHECK(quantize(s, mase_compat, -2.0f) == -1.75f);

  CHECK(quantize(s, exact, 1.0f) == 1.0f);  // powers of two are representable (k = 4 at e+1)
  CHECK(quantize(s, exact, 0.9f) == 0.875f);
  CHECK(quantize(s, exact, 0.5f) == 0.5f);
  CHECK(quantize(s, exact, 2.0f) == 2.0f);
  CHECK(quantize(s, exact, 0.97f) == 1.0f);  // carry
  CHECK(quantize(s, exact, 100.0f) == 96.0f);
  CHECK(quantize(s, exact, 300.0f) == 224.0f);
  CHECK(quantize(s, exact, 0.001f) == 0.0009765625f);
  CHECK(quantize(s, exact, INFINITY) == 224.0f);
  CHECK(quantize(s, exact, -INFINITY) == -224.0f);
  CHECK(std::isnan(quantize(s, exact, NAN)));
  const auto f = info(s, exact);
  CHECK(f.distinct_values == 135.0);
  CHECK(f.max == 224.0);
  CHECK(f.min_positive == std::ldexp(1.0, -10));
}

TEST_CASE("minifloat_denorm: MASE quirks (pass-through, inf, zero sign, M = 0)") {
  const MinifloatDenormSpec s{8, 4, std::nullopt};
  CHECK(quantize(s, mase_compat, 5e-9f) == 5e-9f);
  CHECK(quantize(s, exact, 5e-9f) == 0.0f);
  CHECK(std::isnan(quantize(s, mase_compat, INFINITY)));
  CHECK(std::isnan(quantize(s, mase_compat, -INFINITY)));
  CHECK(std::isnan(quantize(s, mase_compat, NAN)));
  CHECK(!std::signbit(quantize(s, mase_compat, -0.0f)));
  CHECK(std::signbit(quantize(s, exact, -0.0f)));
  CHECK(std::signbit(quantize(s, exact, -1e-5f)));

  // M = 0 (W6 E5): MASE accepts it and rounds everything to zero; exact mode rejects it.
  const MinifloatDenormSpec z{6, 5, std::nullopt};
  z.validate(mase_compat);
  CHECK_THROWS_WITH_AS(
      z.validate(), "minifloat_denorm: exponent_width 5 must be in [1, width-2] (width 6; at least one mantissa bit)",
      Error);
  CHECK(quantize(z, mase_compat, 3.0f) == 0.0f);
  CHECK(std::signbit(quantize(z, mase_compat, -3.0f)));
  CHECK(quantize(z, mase_compat, 1e-9f) == 1e-9f);
  CHECK(info(z, mase_compat).distinct_values == 1.0);
}

TEST_CASE("minifloat_denorm: encode/decode layout and canonical codes") {
  const MinifloatDenormSpec s{8, 4, std::nullopt};  // value = k 2^(field - 7 - 3)
  CHECK(decode(s, 0x3C) == 0.5f);                   // field 7, k 4
  CHECK(decode(s, 0x42) == 0.5f);                   // alias: field 8, k 2
  CHECK(decode(s, 0x41) == 0.25f);                  // field 8, k 1
  CHECK(encode(s, 0.5f) == 0x3Cu);                  // canonical: largest k
  CHECK(encode(s, 1.0f) == 0x44u);
  CHECK(encode(s, -224.0f) == 0xFFu);
  CHECK(encode(s, 0.0009765625f) == 0x01u);
  CHECK(encode(s, -0.0f) == 0x80u);
  CHECK(decode(s, 0x80) == 0.0f);
  CHECK(std::signbit(decode(s, 0x80)));
  CHECK_THROWS_WITH_AS(encode(s, NAN), "minifloat_denorm: NaN has no code", Error);
}

TEST_CASE("minifloat_denorm: rounding modes, stochastic rounding and flushed subnormals") {
  const MinifloatDenormSpec s{8, 4, std::nullopt};  // [0.5, 1): step 1/8
  CHECK(quantize(s, exact, 0.5625f) == 0.5f);       // tie to even
  CHECK(quantize(s, exact, 0.6875f) == 0.75f);
  CHECK(quantize(s, exact.with(Rounding::nearest_away), 0.5625f) == 0.625f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), 0.99f) == 0.875f);
  CHECK(quantize(s, exact.with(Rounding::floor), -0.51f) == -0.625f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 0.95f) == 1.0f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1e-20f) == 0.0009765625f);
  const Policy sr = exact.with(Rounding::stochastic).with_seed(3);
  double sum = 0;
  for (int i = 0; i < 20000; ++i) sum += quantize(s, sr, 0.53125f, static_cast<std::uint64_t>(i));
  CHECK(sum / 20000 == doctest::Approx(0.53125).epsilon(0.002));
  Policy flush = exact;
  flush.subnormals = Subnormals::flush;
  CHECK(quantize(s, flush, 0.003f) == 0.0f);  // below 2^(-b-1) = 2^-8
  CHECK(quantize(s, flush, 0.004f) == 0.00390625f);
}

TEST_CASE("minifloat_denorm: validation messages") {
  CHECK_THROWS_WITH_AS(
      MinifloatDenormSpec({8, 7, std::nullopt}).validate(),
      "minifloat_denorm: exponent_width 7 must be in [1, width-2] (width 8; at least one mantissa bit)", Error);
  CHECK_THROWS_WITH_AS(MinifloatDenormSpec({8, 8, std::nullopt}).validate(mase_compat),
                       "minifloat_denorm: exponent_width 8 must be in [1, width-1] (width 8)", Error);
  CHECK_THROWS_WITH_AS(MinifloatDenormSpec({1, 1, std::nullopt}).validate(),
                       "minifloat_denorm: width 1 must be in [2, 32]", Error);
  CHECK_THROWS_WITH_AS(MinifloatDenormSpec({8, 4, -130}).validate(),
                       "minifloat_denorm: exponent_bias -130 gives exponents [130, 145] with 3 mantissa bits, outside "
                       "float32 (max exponent 127, smallest step 2^-149)",
                       Error);
  MinifloatDenormSpec({8, 4, -1}).validate();
}
