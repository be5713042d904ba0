// Minifloat with implicit bit (`minifloat_ieee`, OCP FP8 presets): exhaustive conformance
// over many (W, E, bias, specials), hardware cross-checks (fp16, bf16), policies, MASE's
// float32 quirks, the value type, numeric_limits and printing.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/minifloat.hpp"

using namespace qnum;
using qnum_test::describe;
using qnum_test::FailureLog;

namespace {

/// Finite values from the formula (not from decode): subnormals k 2^(1-b-M), normals
/// (1 + k/2^M) 2^(f-b) for every field f that is not reserved for specials.
std::vector<double> minifloat_values(const MinifloatSpec& s) {
  const int m = s.mantissa_bits(), b = s.bias(), fields = 1 << s.exponent_width;
  std::vector<double> v;
  for (int f = 0; f < fields; ++f)
    for (int k = 0; k < (1 << m); ++k) {
      if (s.specials == Specials::ieee && f == fields - 1) continue;                     // Inf/NaN
      if (s.specials == Specials::fn && f == fields - 1 && k == (1 << m) - 1) continue;  // NaN
      const double x = f == 0 ? std::ldexp(k, 1 - b - m) : std::ldexp(1.0 + std::ldexp(k, -m), f - b);
      v.push_back(x);
      v.push_back(-x);
    }
  return qnum_test::sorted_unique(v);
}

bool valid(const MinifloatSpec& s) {
  try {
    s.validate();
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// M = 0: every value is a power of two; ties (1.5 * 2^e) go up (precision-1 RNE rounds
/// the significand 1.5 to 2), and the tie between 0 and the smallest value goes to 0.
void check_nearest_m0(const MinifloatSpec& s, const std::vector<double>& values) {
  FailureLog log;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double lo = values[i], hi = values[i + 1];
    if (lo < 0) continue;
    const auto mid = static_cast<float>((lo + hi) / 2);
    const float q = quantize(s, exact, mid);
    const double want = lo == 0 ? lo : hi;
    if (q != want) log.fail("mid " + describe(mid) + " -> " + describe(q));
    if (quantize(s, exact, std::nextafter(mid, 0.0f)) != lo) log.fail("below mid " + describe(mid));
    if (quantize(s, exact, std::nextafter(mid, INFINITY)) != hi) log.fail("above mid " + describe(mid));
  }
  log.check("M=0 nearest");
}

/// The spec with +-Inf inputs replaced by +-max, so check_nearest_even's "saturates beyond
/// the range" probes apply to specials=ieee too (whose Inf input is kept as Inf).
struct FiniteInputs {
  MinifloatSpec s;
};
float quantize(const FiniteInputs& f, const Policy& p, float x) {
  if (std::isinf(x)) x = std::copysign(static_cast<float>(info(f.s, p).max), x);
  return quantize(f.s, p, x);
}
std::uint32_t encode(const FiniteInputs& f, float x) { return encode(f.s, x); }

}  // namespace

TEST_CASE("minifloat_ieee: exhaustive codes and nearest-even for every (W <= 12, E, bias, specials)") {
  int formats = 0;
  for (int w = 2; w <= 12; ++w)
    for (int e = 1; e < w; ++e)
      for (int db : {0, 3, -2})
        for (Specials sp : {Specials::none, Specials::ieee, Specials::fn}) {
          const MinifloatSpec s{w, e, (1 << (e - 1)) - 1 + db, sp};
          if (!valid(s)) continue;
          CAPTURE(w);
          CAPTURE(e);
          CAPTURE(s.bias());
          CAPTURE(to_string(sp));
          const auto values = minifloat_values(s);
          qnum_test::check_codes(s, values, w);
          if (s.mantissa_bits() == 0)
            check_nearest_m0(s, values);
          else
            qnum_test::check_nearest_even(FiniteInputs{s}, values);
          if (w <= 8) qnum_test::check_sign_symmetry(s, exact);
          ++formats;
        }
  CHECK(formats > 150);
}

TEST_CASE("minifloat_ieee: exhaustive codes for 16-bit formats (fp16, bf16, E2/E3/E4/E6)") {
  const std::vector<std::pair<int, Specials>> formats = {{5, Specials::ieee}, {8, Specials::ieee}, {2, Specials::none},
                                                         {3, Specials::none}, {4, Specials::fn},   {6, Specials::none}};
  for (const auto& [exp_bits, sp] : formats) {
    const int e = exp_bits;  // a plain variable: CAPTURE cannot take a structured binding
    const MinifloatSpec s{16, e, std::nullopt, sp};
    CAPTURE(e);
    const auto values = minifloat_values(s);
    qnum_test::check_codes(s, values, 16);
    qnum_test::check_nearest_even(FiniteInputs{s}, values);
  }
}

TEST_CASE("minifloat_ieee: exhaustive agreement with hardware fp16 and bf16 conversion") {
  const MinifloatSpec bf16{16, 8, 127, Specials::ieee};
  const Policy to_inf = exact.with(Overflow::infinity);
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> bits;
  FailureLog bf, hf;
  auto bf16_rne = [](float x) {  // independent: integer RNE on the float's bits
    std::uint32_t u = detail::float_bits(x);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return detail::bits_float(u);
  };
  for (int i = 0; i < 400000; ++i) {
    const float x = detail::bits_float(bits(rng));
    if (x != x) continue;
    if (!qnum_test::same_bits(quantize(bf16, to_inf, x), bf16_rne(x))) bf.fail(describe(x));
#if defined(__FLT16_MAX__)
    const MinifloatSpec fp16{16, 5, 15, Specials::ieee};
    const float y = std::ldexp(x, -static_cast<int>(bits(rng) % 100));  // bring many into fp16 range
    const auto h = static_cast<float>(static_cast<_Float16>(y));
    if (!qnum_test::same_bits(quantize(fp16, to_inf, y), h)) hf.fail(describe(y));
#endif
  }
  bf.check("bf16 == RNE on float bits");
  hf.check("fp16 == _Float16 conversion");
}

TEST_CASE("minifloat_ieee: OCP FP8 E4M3 (fn) and E5M2 (ieee)") {
  const auto e4 = MinifloatSpec::fp8_e4m3();
  const auto e5 = MinifloatSpec::fp8_e5m2();
  e4.validate();
  e5.validate();
  CHECK(decode(e4, 0x7E) == 448.0f);
  CHECK(std::isnan(decode(e4, 0x7F)));
  CHECK(std::isnan(decode(e4, 0xFF)));
  CHECK(decode(e4, 0x78) == 256.0f);  // S.1111.000 is a number in E4M3
  CHECK(decode(e4, 0x01) == std::ldexp(1.0f, -9));
  CHECK(quantize(e4, exact, 448.0f) == 448.0f);
  CHECK(quantize(e4, exact, 460.0f) == 448.0f);
  CHECK(quantize(e4, exact, 464.0f) == 448.0f);  // saturating: the tie would round to 480 = NaN code
  CHECK(quantize(e4, exact, 470.0f) == 448.0f);
  CHECK(quantize(e4, exact, -1e9f) == -448.0f);
  CHECK(quantize(e4, exact, INFINITY) == 448.0f);
  CHECK(quantize(e4, exact, -INFINITY) == -448.0f);
  CHECK(std::isnan(quantize(e4, exact, NAN)));
  CHECK(encode(e4, NAN) == 0x7Fu);
  CHECK(encode(e4, 464.0f) == 0x7Eu);
  CHECK(encode(e4, -448.0f) == 0xFEu);
  CHECK(encode(e4, 1.0f) == 0x38u);
  CHECK(info(e4, exact).max == 448.0);
  CHECK(info(e4, exact).distinct_values == 253.0);

  CHECK(decode(e5, 0x7B) == 57344.0f);
  CHECK(decode(e5, 0x7C) == INFINITY);
  CHECK(decode(e5, 0xFC) == -INFINITY);
  CHECK(std::isnan(decode(e5, 0x7D)));
  CHECK(std::isnan(decode(e5, 0x7F)));
  CHECK(quantize(e5, exact, 1e6f) == 57344.0f);  // saturate is the default
  CHECK(quantize(e5, exact, INFINITY) == INFINITY);
  CHECK(quantize(e5, exact, -INFINITY) == -INFINITY);
  const Policy inf = exact.with(Overflow::infinity);
  CHECK(quantize(e5, inf, 60000.0f) == 57344.0f);  // below the midpoint 61440
  CHECK(quantize(e5, inf, 61440.0f) == INFINITY);  // tie: 1.75*2^15 (odd) vs 2^16 (even)
  CHECK(quantize(e5, inf, -1e6f) == -INFINITY);
  CHECK(quantize(e5, inf.with(Rounding::toward_zero), 1e6f) == 57344.0f);  // IEEE: directed modes stop at max
  CHECK(quantize(e5, inf.with(Rounding::floor), 1e6f) == 57344.0f);
  CHECK(quantize(e5, inf.with(Rounding::floor), -1e6f) == -INFINITY);
  CHECK(quantize(e5, inf.with(Rounding::ceil), -1e6f) == -57344.0f);
  CHECK(encode(e5, INFINITY) == 0x7Cu);
  CHECK(encode(e5, 1e6f, inf) == 0x7Cu);
  CHECK(encode(e5, NAN) == 0x7Fu);
  CHECK(info(e5, exact).max == 57344.0);
  CHECK(info(e5, exact).distinct_values == 256.0 - 8.0 - 1.0);
}

TEST_CASE("minifloat_ieee: spec 6.1 examples in mase mode, corrected in exact mode (W8 E4)") {
  const MinifloatSpec s{8, 4, std::nullopt};
  CHECK(quantize(s, mase_compat, 1.0f) == 1.0f);
  CHECK(quantize(s, mase_compat, 1.9f) == 1.875f);
  CHECK(quantize(s, mase_compat, 1.99f) == 1.875f);  // no carry into the next binade
  CHECK(quantize(s, mase_compat, 1.97f) == 1.875f);
  CHECK(quantize(s, mase_compat, 0.0155f) == 0.013671875f);  // no carry at subnormal -> normal
  CHECK(quantize(s, mase_compat, 0.01f) == 0.009765625f);
  CHECK(quantize(s, mase_compat, 0.002f) == 0.001953125f);
  CHECK(quantize(s, mase_compat, 0.001f) == 0.001953125f);
  CHECK(quantize(s, mase_compat, 1000.0f) == 480.0f);
  CHECK(quantize(s, mase_compat, -1000.0f) == -480.0f);

  CHECK(quantize(s, exact, 1.0f) == 1.0f);
  CHECK(quantize(s, exact, 1.9f) == 1.875f);
  CHECK(quantize(s, exact, 1.99f) == 2.0f);  // carry
  CHECK(quantize(s, exact, 1.97f) == 2.0f);
  CHECK(quantize(s, exact, 0.0155f) == 0.015625f);
  CHECK(quantize(s, exact, 0.01f) == 0.009765625f);
  CHECK(quantize(s, exact, 0.002f) == 0.001953125f);
  CHECK(quantize(s, exact, 1000.0f) == 480.0f);
  CHECK(quantize(s, exact, 0.0009765625f) == 0.0f);  // tie between 0 and 2^-9: even
  CHECK(quantize(s, exact, 0.00097657f) == 0.001953125f);
}

TEST_CASE("minifloat_ieee: MASE quirks (near-zero pass-through, inf, log2 rounding, zero sign)") {
  const MinifloatSpec s{8, 4, std::nullopt};
  CHECK(quantize(s, mase_compat, 5e-9f) == 5e-9f);  // |x| <= 1e-8 unquantized
  CHECK(quantize(s, mase_compat, -1e-8f) == -1e-8f);
  CHECK(quantize(s, mase_compat, 2e-8f) == 0.0f);
  CHECK(quantize(s, exact, 5e-9f) == 0.0f);
  CHECK(std::isnan(quantize(s, mase_compat, INFINITY)));  // 0 * inf in MASE's select
  CHECK(std::isnan(quantize(s, mase_compat, -INFINITY)));
  CHECK(std::isnan(quantize(s, mase_compat, NAN)));
  CHECK(quantize(s, exact, INFINITY) == 480.0f);
  CHECK(!std::signbit(quantize(s, mase_compat, -0.0f)));  // -0 + ... = +0 in MASE
  CHECK(std::signbit(quantize(s, exact, -0.0f)));         // exact keeps the sign of zero
  CHECK(std::signbit(quantize(s, exact, -1e-5f)));
  CHECK(std::signbit(quantize(s, mase_compat, -1e-5f)));
  // Spec 0.3: float32 log2 of the float just below 16 rounds to 4, giving 16; just below 1
  // it stays below 0, so the mantissa is clamped (0.9375 instead of 1).
  CHECK(quantize(s, mase_compat, std::nextafter(16.0f, 0.0f)) == 16.0f);
  CHECK(quantize(s, mase_compat, std::nextafter(1.0f, 0.0f)) == 0.9375f);
  CHECK(quantize(s, exact, std::nextafter(1.0f, 0.0f)) == 1.0f);
  // Whatever MASE does, a quantized value (|x| > 1e-8, finite) lies on the grid.
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> bits;
  FailureLog on_grid;
  for (int i = 0; i < 20000; ++i) {
    const float x = detail::bits_float(bits(rng));
    if (x != x || std::isinf(x) || std::fabs(x) <= 1e-8f) continue;
    const float q = quantize(s, mase_compat, x);
    if (decode(s, encode(s, q)) != q) on_grid.fail(describe(x) + " -> " + describe(q));
  }
  on_grid.check("mase output on the grid");
}

TEST_CASE("minifloat_ieee: rounding modes, stochastic rounding and flushed subnormals") {
  const MinifloatSpec s{8, 4, std::nullopt};   // step 0.125 in [1, 2)
  CHECK(quantize(s, exact, 1.0625f) == 1.0f);  // tie to even
  CHECK(quantize(s, exact, 1.1875f) == 1.25f);
  CHECK(quantize(s, exact.with(Rounding::nearest_away), 1.0625f) == 1.125f);
  CHECK(quantize(s, exact.with(Rounding::nearest_away), -1.0625f) == -1.125f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), 1.99f) == 1.875f);
  CHECK(quantize(s, exact.with(Rounding::toward_zero), -1.99f) == -1.875f);
  CHECK(quantize(s, exact.with(Rounding::floor), -1.01f) == -1.125f);
  CHECK(quantize(s, exact.with(Rounding::floor), 1.99f) == 1.875f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1.01f) == 1.125f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1.9f) == 2.0f);  // carry
  CHECK(quantize(s, exact.with(Rounding::ceil), -1.9f) == -1.875f);
  CHECK(quantize(s, exact.with(Rounding::ceil), 1e-30f) == std::ldexp(1.0f, -9));
  CHECK(quantize(s, exact.with(Rounding::ceil), 1000.0f) == 480.0f);  // saturate
  CHECK(std::signbit(quantize(s, exact.with(Rounding::ceil), -1e-30f)));

  const Policy sr = exact.with(Rounding::stochastic).with_seed(9);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float q = quantize(s, sr, 1.03125f, static_cast<std::uint64_t>(i));  // 1/4 of a step above 1
    REQUIRE((q == 1.0f || q == 1.125f));
    CHECK(q == quantize(s, sr, 1.03125f, static_cast<std::uint64_t>(i)));
    sum += q;
  }
  CHECK(sum / n == doctest::Approx(1.03125).epsilon(0.002));
  CHECK(quantize(s, sr, 1.5f, 7) == 1.5f);  // on the grid: never moves

  Policy flush = exact;
  flush.subnormals = Subnormals::flush;
  CHECK(quantize(s, flush, 0.01f) == 0.0f);         // below the smallest normal 2^-6
  CHECK(quantize(s, flush, 0.0155f) == 0.015625f);  // rounds up to 2^-6: kept
  CHECK(quantize(s, flush, 0.02f) == 0.01953125f);
  CHECK(std::signbit(quantize(s, flush, -0.01f)));
}

TEST_CASE("minifloat_ieee: validation messages") {
  CHECK_THROWS_WITH_AS(MinifloatSpec({8, 9, std::nullopt}).validate(),
                       "minifloat_ieee: exponent_width 9 must be in [1, width-1] (width 8)", Error);
  CHECK_THROWS_WITH_AS(MinifloatSpec({8, 8, std::nullopt}).validate(),
                       "minifloat_ieee: exponent_width 8 must be in [1, width-1] (width 8)", Error);
  CHECK_THROWS_WITH_AS(MinifloatSpec({1, 1, std::nullopt}).validate(), "minifloat_ieee: width 1 must be in [2, 32]",
                       Error);
  CHECK_THROWS_WITH_AS(MinifloatSpec({12, 9, std::nullopt}).validate(), "minifloat_ieee: exponent_width 9 must be <= 8",
                       Error);
  CHECK_THROWS_WITH_AS(MinifloatSpec({8, 4, 200}).validate(),
                       "minifloat_ieee: exponent_bias 200 gives exponents [-199, -185] with 3 mantissa bits, outside "
                       "float32 (max exponent 127, smallest step 2^-149)",
                       Error);
  CHECK_THROWS_WITH_AS(
      MinifloatSpec({4, 3, std::nullopt, Specials::fn}).validate(),
      "minifloat_ieee: specials=fn needs exponent_width >= 2 and at least one mantissa bit (got 3 and 0)", Error);
  CHECK_THROWS_WITH_AS(encode(MinifloatSpec{8, 4, std::nullopt}, NAN),
                       "minifloat_ieee: NaN has no code with specials=none", Error);
  MinifloatSpec({32, 8, 127, Specials::ieee}).validate();  // float32 itself
  MinifloatSpec({8, 4, -1}).validate();
}

TEST_CASE("minifloat_ieee: info") {
  const MinifloatSpec s{8, 4, std::nullopt};
  const auto f = info(s, exact);
  CHECK(f.bits_per_value == 8);
  CHECK(f.min_positive == std::ldexp(1.0, -9));
  CHECK(f.max == 480.0);
  CHECK(f.distinct_values == 255.0);
  CHECK(f.distinct_values == static_cast<double>(minifloat_values(s).size()));
  const auto m = info(MinifloatSpec::fp8_e4m3(), mase_compat);  // MASE's grid has no specials
  CHECK(m.max == 480.0);
  CHECK(m.value_set.find("1e-8") != std::string::npos);
  for (Specials sp : {Specials::ieee, Specials::fn}) {
    const MinifloatSpec t{8, 5, std::nullopt, sp};
    CHECK(info(t, exact).distinct_values == static_cast<double>(minifloat_values(t).size()));
  }
}

TEST_CASE("minifloat_ieee: value types agree with runtime specs for every code") {
  auto agree = [](auto tag) {
    using T = decltype(tag);
    FailureLog log;
    for (std::uint32_t c = 0; c < (1u << T::width); ++c) {
      const float v = T::from_code(c).value();
      if (!qnum_test::same_bits(v, decode(T::spec, c))) log.fail("decode code " + std::to_string(c));
      if (v == v && !qnum_test::same_bits(T(v).value(), v)) log.fail("round trip code " + std::to_string(c));
      if (v == v && T(v).code() != encode(T::spec, v)) log.fail("encode code " + std::to_string(c));
    }
    log.check("value type == runtime spec");
  };
  agree(Minifloat<4, 3>{});
  agree(Minifloat<2, 1>{});
  agree(Minifloat<3, 2, 6>{});
  agree(Minifloat<5, 0>{});
  agree(FP8E4M3{});
  agree(FP8E5M2{});
  agree(Minifloat<5, 10, 15, exact, Specials::ieee>{});

  using F = Minifloat<4, 3>;
  CHECK(float(F(1.99f)) == 2.0f);
  CHECK(float(F(1.5f) + F(0.25f)) == 1.75f);
  CHECK(float(F(448.0f) + F(448.0f)) == 480.0f);  // saturating
  CHECK(float(F(3.0f) * F(-0.5f)) == -1.5f);
  CHECK(float(-F(2.0f)) == -2.0f);
  CHECK(F(1.0f) < F(2.0f));
  using Fm = Minifloat<4, 3, 7, mase_compat>;
  CHECK(float(Fm(1.99f)) == 1.875f);
  CHECK(float(FP8E4M3(1000.0f)) == 448.0f);
  CHECK(float(FP8E5M2Inf(1e6f)) == INFINITY);
  CHECK(std::isnan(float(FP8E4M3(NAN))));
  CHECK(!(FP8E4M3(NAN) == FP8E4M3(NAN)));
}

TEST_CASE("minifloat_ieee: numeric_limits") {
  using F = Minifloat<4, 3>;
  using L = std::numeric_limits<F>;
  CHECK(float(L::max()) == 480.0f);
  CHECK(float(L::lowest()) == -480.0f);
  CHECK(float(L::min()) == 0.015625f);
  CHECK(float(L::denorm_min()) == 0.001953125f);
  CHECK(float(L::epsilon()) == 0.125f);
  CHECK(float(L::round_error()) == 0.5f);
  CHECK(!L::has_infinity);
  CHECK(!L::has_quiet_NaN);
  CHECK(L::digits == 4);
  CHECK(L::has_denorm == std::denorm_present);

  using E4 = std::numeric_limits<FP8E4M3>;
  CHECK(float(E4::max()) == 448.0f);
  CHECK(float(E4::lowest()) == -448.0f);
  CHECK(E4::has_quiet_NaN);
  CHECK(!E4::has_infinity);
  CHECK(std::isnan(float(E4::quiet_NaN())));
  CHECK(E4::quiet_NaN().code() == 0x7Fu);

  using E5 = std::numeric_limits<FP8E5M2>;
  CHECK(float(E5::max()) == 57344.0f);
  CHECK(float(E5::min()) == std::ldexp(1.0f, -14));
  CHECK(float(E5::denorm_min()) == std::ldexp(1.0f, -16));
  CHECK(E5::has_infinity);
  CHECK(float(E5::infinity()) == INFINITY);
  CHECK(std::isnan(float(E5::quiet_NaN())));
  CHECK(E5::max_exponent == 16);
  CHECK(E5::min_exponent == -13);  // same convention as float: min_exponent = -125 for 2^-126
  CHECK(std::numeric_limits<float>::min_exponent == -125);
}

TEST_CASE("minifloat_ieee: to_binary") {
  CHECK(to_binary(Minifloat<4, 3>(1.0f)) == "0b0.0111.000");
  CHECK(to_binary(Minifloat<4, 3>(-1.5f)) == "0b1.0111.100");
  CHECK(to_binary(FP8E4M3(448.0f)) == "0b0.1111.110");
  CHECK(to_binary(FP8E5M2(-INFINITY)) == "0b1.11111.00");
  CHECK(to_binary(Minifloat<5, 0>(4.0f)) == "0b0.10001");
}
