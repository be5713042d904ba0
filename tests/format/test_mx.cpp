// MX formats (mxint, mxfp): exhaustive element conformance for every OCP element type, OCP
// block semantics on random blocks (encode/decode agreement, grid, nearest), scale choice,
// zero/NaN blocks, exact padding vs MASE straddling, MASE's codec quirks, packed blocks,
// mase-cuda MXINT8, mxint_hardware, and invalid specs.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "format/conformance.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"
#include "qnum/format/mxint_hardware.hpp"

using namespace qnum;

namespace {

// Independent enumeration of an element type's finite values from the OCP formulas.
std::vector<double> element_values(const MXElement& e) {
  std::vector<double> v;
  if (e.is_int) {
    for (long long k = -(1LL << (e.width - 1)); k < (1LL << (e.width - 1)); ++k)
      v.push_back(std::ldexp(static_cast<double>(k), -(e.width - 2)));
    return qnum_test::sorted_unique(v);
  }
  const int E = e.exponent_width, M = e.frac_width, bias = (1 << (E - 1)) - 1;
  for (int field = 0; field < (1 << E); ++field)
    for (int f = 0; f < (1 << M); ++f) {
      if (E == 5 && M == 2 && field == 31) continue;            // Inf/NaN
      if (E == 4 && M == 3 && field == 15 && f == 7) continue;  // NaN
      const double mag = field == 0 ? std::ldexp(f, 1 - bias - M) : std::ldexp((1 << M) + f, field - bias - M);
      v.push_back(mag);
      v.push_back(-mag);
    }
  return qnum_test::sorted_unique(v);
}

const std::vector<MXElement>& ocp_fp_elements() {
  static const std::vector<MXElement> e{MXElement::fp(4, 3), MXElement::fp(5, 2), MXElement::fp(3, 2),
                                        MXElement::fp(2, 3), MXElement::fp(2, 1)};
  return e;
}

std::vector<float> run(const Format& f, const std::vector<float>& x, const Shape& shape) {
  return f.quantize(x, shape);
}

float mase_codec(int E, int M, float x) {
  return detail::mase_mx_minifloat_decode(E, M, detail::mase_mx_minifloat_encode(E, M, x));
}

// Random block contents: normal values scaled by a random power of ten, some zeros/ties.
std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(-6, 4);
  std::vector<float> x(n);
  float scale = std::pow(10.0f, ud(rng));
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) scale = std::pow(10.0f, ud(rng));
    x[i] = nd(rng) * scale;
    if (rng() % 29 == 0) x[i] = 0.0f;
  }
  return x;
}

}  // namespace

// ---- elements --------------------------------------------------------------------------

TEST_CASE("mxfp: exhaustive element codes and nearest-even for every OCP element type") {
  for (const auto& e : ocp_fp_elements()) {
    CAPTURE(e.name());
    const auto values = element_values(e);
    qnum_test::check_codes(e, values, e.width);
    qnum_test::check_nearest_even(e, values);
    CHECK(values.back() == e.max());
    CHECK(static_cast<double>(values.size()) == e.distinct_values());
    CHECK(e.min_positive() == values[values.size() / 2 + 1]);
  }
  CHECK(MXElement::fp(4, 3).max() == 448);
  CHECK(MXElement::fp(5, 2).max() == 57344);
  CHECK(MXElement::fp(3, 2).max() == 28);
  CHECK(MXElement::fp(2, 3).max() == 7.5);
  CHECK(MXElement::fp(2, 1).max() == 6);
  CHECK(MXElement::fp(4, 3).emax() == 8);
  CHECK(MXElement::fp(5, 2).emax() == 15);
  CHECK(MXElement::fp(3, 2).emax() == 4);
  CHECK(MXElement::fp(2, 3).emax() == 2);
  CHECK(MXElement::fp(2, 1).emax() == 2);
}

TEST_CASE("mxfp: element special codes and saturation") {
  const auto e4 = MXElement::fp(4, 3), e5 = MXElement::fp(5, 2), e2 = MXElement::fp(2, 1);
  CHECK(std::isnan(decode(e4, 0x7F)));
  CHECK(std::isnan(decode(e4, 0xFF)));
  CHECK(decode(e4, 0x7E) == 448.0f);
  CHECK(decode(e4, 0x01) == std::ldexp(1.0f, -9));
  CHECK(std::isinf(decode(e5, 0x7C)));
  CHECK(decode(e5, 0xFC) == -INFINITY);
  CHECK(std::isnan(decode(e5, 0x7D)));
  CHECK(decode(e5, 0x7B) == 57344.0f);
  CHECK(encode(e4, NAN) == 0x7F);
  CHECK(encode(e4, 1e9f) == 0x7E);
  CHECK(encode(e4, -1e9f) == 0xFE);
  CHECK(encode(e2, 6.5f) == 0x7);
  CHECK(quantize(e2, exact, 5.0f) == 4.0f);   // tie 4|6 -> even mantissa
  CHECK(quantize(e2, exact, 0.25f) == 0.0f);  // tie 0|0.5 -> 0
  CHECK(quantize(e2, exact, 0.75f) == 1.0f);  // tie 0.5|1 -> 1.0 (even)
  CHECK(quantize(e4, exact, 464.0f) == 448.0f);
  CHECK(quantize(e5, exact, INFINITY) == 57344.0f);
  CHECK_THROWS_AS(encode(e2, NAN), Error);
}

TEST_CASE("mxint: exhaustive element codes and nearest-even for element widths 2..16") {
  for (int w = 2; w <= 16; ++w) {
    CAPTURE(w);
    const auto e = MXElement::integer(w);
    const auto values = element_values(e);
    qnum_test::check_codes(e, values, w);
    if (w <= 12) qnum_test::check_nearest_even(e, values);
  }
  const auto e8 = MXElement::integer(8);
  CHECK(e8.max() == 1.984375);
  CHECK(decode(e8, 0x80) == -2.0f);
  CHECK(quantize(e8, exact, 5.0f) == 1.984375f);
  CHECK(quantize(e8, exact, -5.0f) == -2.0f);
}

// ---- OCP blocks ------------------------------------------------------------------------

TEST_CASE("mxint: OCP scale choice examples") {
  const Format f(MXIntSpec{}, exact);
  std::vector<float> x(32, 0.0f);
  x[0] = 1.5f;
  x[1] = 0.01f;
  auto c = encode_block(MXIntSpec{}, x);
  CHECK(c.scale == 127);  // floor(log2 1.5) - 0
  CHECK(c.elements[0] == 96);
  CHECK(run(f, x, {32})[1] == std::ldexp(1.0f, -6));  // 0.01 * 64 = 0.64 -> 1
  x[0] = 1.0f;                                        // exact power of two: OCP keeps it exact (MASE: 127/128)
  CHECK(run(f, x, {32})[0] == 1.0f);
  CHECK(run(Format(MXIntSpec{}, mase_compat), x, {32})[0] == 0.9921875f);
  x[0] = 1.999f;  // rounds to 128 * 2^-6 -> saturates at 127
  CHECK(run(f, x, {32})[0] == 1.984375f);
  x[0] = -2.0f;
  CHECK(run(f, x, {32})[0] == -2.0f);
  CHECK(encode_block(MXIntSpec{}, x).scale == 128);
}

TEST_CASE("mxfp: OCP scale choice examples (block max 448 * 2^k etc.)") {
  const MXFPSpec e4m3{4, 3, 32, -1, 8, false};
  for (int k : {-120, -10, 0, 7, 100}) {
    CAPTURE(k);
    std::vector<float> x(32, std::ldexp(1.0f, k));
    x[5] = std::ldexp(448.0f, k);
    const auto c = encode_block(e4m3, x);
    CHECK(static_cast<int>(c.scale) == k + 127);  // floor(log2 448) = 8 = emax
    CHECK(c.elements[5] == 0x7E);
    CHECK(decode_block(e4m3, c)[5] == x[5]);
  }
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  CHECK(encode_block(e4m3, x).scale == 127 - 8);
  CHECK(encode_block(e4m3, x).elements[0] == 0x78);  // 256 = 1.000 * 2^8
  x[0] = 500.0f;                                     // 500 / 2^0 > 448 -> saturates
  CHECK(run(Format(e4m3), x, {32})[0] == 448.0f);
  const MXFPSpec e2m1{2, 1, 32, -1, 8, false};
  x[0] = 7.0f;  // floor(log2 7) - 2 = 0: 7 -> 6 (saturate)
  CHECK(encode_block(e2m1, x).scale == 127);
  CHECK(run(Format(e2m1), x, {32})[0] == 6.0f);
  x[1] = 0.24f;  // below half the smallest subnormal 0.5
  x[2] = 0.3f;
  const auto y = run(Format(e2m1), x, {32});
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == 0.5f);
  // E5M2: emax 15
  const MXFPSpec e5m2{5, 2, 32, -1, 8, false};
  x.assign(32, 0.0f);
  x[0] = 57344.0f;
  CHECK(encode_block(e5m2, x).scale == 127);
  // tiny blocks: scale clamps at 2^-127
  x.assign(32, 0.0f);
  x[0] = std::numeric_limits<float>::denorm_min();
  CHECK(encode_block(e4m3, x).scale == 0);
  CHECK(run(Format(e4m3), x, {32})[0] == 0.0f);  // 2^-149 / 2^-127 = 2^-22 < 2^-10
}

TEST_CASE("mxfp: random blocks agree with encode_block and are nearest on their grid") {
  std::mt19937 rng(7);
  auto check = [&](const auto& spec) {
    const Format f(spec);
    const MXElement e = spec.element();
    CAPTURE(f.to_string());
    const auto values = element_values(e);
    const int B = spec.block_size;
    qnum_test::FailureLog agree, grid, nearest, scale;
    for (int trial = 0; trial < 40; ++trial) {
      const Shape shape{3, 2 * B + 5};  // two full blocks and a padded one per row
      const auto x = random_values(rng, static_cast<std::size_t>(numel(shape)));
      const auto y = f.quantize(x, shape);
      for (int r = 0; r < 3; ++r)
        for (int start = 0; start < shape[1]; start += B) {
          const int len = std::min<int>(B, static_cast<int>(shape[1]) - start);
          std::span<const float> xb(x.data() + r * shape[1] + start, static_cast<std::size_t>(len));
          const MXBlockCodes c = encode_block(spec, xb);
          const auto d = decode_block(spec, c);
          double amax = 0;
          for (float v : xb) amax = std::max(amax, std::fabs(static_cast<double>(v)));
          const int X = static_cast<int>(c.scale) - 127;
          if (amax > 0 && X != std::max(-127, std::ilogb(amax) - e.emax())) scale.fail("scale " + std::to_string(X));
          for (int i = 0; i < len; ++i) {
            const auto k = static_cast<std::size_t>(i);
            const float got = y[static_cast<std::size_t>(r * shape[1] + start + i)];
            if (!qnum_test::same_bits(got, d[k]) && !(got == 0 && d[k] == 0))
              agree.fail(qnum_test::describe(got) + " vs decoded " + qnum_test::describe(d[k]));
            const double u = std::ldexp(static_cast<double>(got), -X);
            if (!std::binary_search(values.begin(), values.end(), u)) grid.fail(qnum_test::describe(got));
            // nearest: no grid value is strictly closer
            const double xv = xb[k], du = std::fabs(static_cast<double>(got) - xv);
            const auto it = std::lower_bound(values.begin(), values.end(), std::ldexp(xv, -X));
            for (auto j : {it - 1, it}) {
              if (j < values.begin() || j >= values.end()) continue;
              if (std::fabs(std::ldexp(*j, X) - xv) < du)
                nearest.fail(qnum_test::describe(xb[k]) + " -> " + qnum_test::describe(got));
            }
          }
        }
    }
    agree.check("quantize == decode_block(encode_block)");
    grid.check("outputs on the block grid");
    nearest.check("outputs nearest");
    scale.check("scale = floor(log2 amax) - emax");
  };
  check(MXIntSpec{});
  check(MXIntSpec{4, 16, -1, 8, false});
  for (const auto& e : ocp_fp_elements()) check(MXFPSpec{e.exponent_width, e.frac_width, 32, -1, 8, false});
}

TEST_CASE("mxint: zero blocks, NaN and Inf blocks") {
  const Format f(MXIntSpec{8, 4, -1, 8, false});
  std::vector<float> x{0, -0.0f, 0, 0, 1, 2, NAN, 3, 1, 2, INFINITY, 3, 0.5f, 0.25f, 0, 1};
  const auto y = f.quantize(x, {16});
  for (int i = 0; i < 4; ++i) CHECK(y[static_cast<std::size_t>(i)] == 0.0f);
  for (int i = 4; i < 12; ++i) CHECK(std::isnan(y[static_cast<std::size_t>(i)]));
  CHECK(y[12] == 0.5f);
  CHECK(encode_block(MXIntSpec{8, 4, -1, 8, false}, std::span<const float>(x.data(), 4)).scale == 0);
  const auto c = encode_block(MXIntSpec{8, 4, -1, 8, false}, std::span<const float>(x.data() + 4, 4));
  CHECK(c.scale == 0xFF);
  CHECK(std::isnan(decode_block(MXIntSpec{8, 4, -1, 8, false}, c)[0]));
}

TEST_CASE("mxfp: NaN block in exact mode and MASE's inf positions") {
  std::vector<float> x(32, 1.0f);
  x[3] = INFINITY;
  const auto y = Format(MXFPSpec{}).quantize(x, {32});
  for (float v : y) CHECK(std::isnan(v));
  // MASE: quantile -> NaN, scale byte 255 (2^128 = inf): finite -> 0 * inf = NaN, the Inf
  // (and NaN) positions -> inf / inf = NaN -> a non-zero code -> +inf.
  x[7] = NAN;
  const auto m = Format(MXFPSpec{}, mase_compat).quantize(x, {32});
  for (std::size_t i = 0; i < 32; ++i) {
    CAPTURE(i);
    if (i == 3 || i == 7)
      CHECK(m[i] == INFINITY);
    else
      CHECK(std::isnan(m[i]));
  }
  // MASE mxint: the whole block NaN
  const auto mi = Format(MXIntSpec{}, mase_compat).quantize(x, {32});
  for (float v : mi) CHECK(std::isnan(v));
}

TEST_CASE("mxint: exact pads the last block per row, MASE blocks straddle rows") {
  // [4, 40] with blocks of 32: exact -> per row blocks [0,32) and [32,40)
  std::vector<float> x(160, 0.01f);
  x[40] = 100.0f;  // row 1, col 0
  const auto ex = Format(MXIntSpec{}).quantize(x, {4, 40});
  const auto ma = Format(MXIntSpec{}, mase_compat).quantize(x, {4, 40});
  // exact: row 0's tail block only sees 0.01 -> fine resolution
  CHECK(ex[35] == doctest::Approx(0.01).epsilon(0.01));
  // MASE: elements 32..63 form one block; row 0's tail shares 100's scale -> 0
  CHECK(ma[35] == 0.0f);
  CHECK(ma[40] == ex[40]);
  CHECK_THROWS_WITH_AS(Format(MXIntSpec{}, mase_compat).quantize(std::vector<float>(30, 1.0f), {3, 10}),
                       "mxint: 30 elements are not divisible by block_size 32 (mase_compat blocks the flattened "
                       "tensor without padding)",
                       Error);
  // exact works for any shape, including a scalar
  CHECK(Format(MXIntSpec{}).quantize(std::vector<float>{0.3f}, {})[0] == 0.30078125f);
}

TEST_CASE("mxint: block_dim selects the axis in both modes") {
  std::mt19937 rng(3);
  const Shape shape{64, 8}, tshape{8, 64};
  const auto x = random_values(rng, 512);
  std::vector<float> xt(512);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 8; ++j) xt[static_cast<std::size_t>(j * 64 + i)] = x[static_cast<std::size_t>(i * 8 + j)];
  for (Policy p : {exact, mase_compat}) {
    const auto y = Format(MXIntSpec{8, 16, 0, 8, false}, p).quantize(x, shape);
    const auto yt = Format(MXIntSpec{8, 16, -1, 8, false}, p).quantize(xt, tshape);
    int bad = 0;
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 8; ++j)
        bad += !qnum_test::same_bits(y[static_cast<std::size_t>(i * 8 + j)], yt[static_cast<std::size_t>(j * 64 + i)]);
    CHECK(bad == 0);
  }
  CHECK_THROWS_AS(Format(MXIntSpec{8, 16, 2, 8, false}).quantize(x, shape), Error);
}

TEST_CASE("mxint: MASE equals OCP MXINT8 when no block max is a power of two") {
  std::mt19937 rng(11);
  int compared = 0, bad = 0;
  for (int trial = 0; trial < 50; ++trial) {
    auto x = random_values(rng, 256);
    for (std::size_t b = 0; b < 8; ++b) {  // make each block max a non-power of two
      float& mx = x[b * 32];
      mx = 1.3f * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
      for (std::size_t i = 1; i < 32; ++i) x[b * 32 + i] = std::fmod(x[b * 32 + i], mx);
    }
    const auto a = Format(MXIntSpec{}).quantize(x, {256});
    const auto m = Format(MXIntSpec{}, mase_compat).quantize(x, {256});
    for (std::size_t i = 0; i < 256; ++i, ++compared) bad += !(a[i] == m[i]);
  }
  CHECK(compared == 12800);
  CHECK(bad == 0);
}

TEST_CASE("mxint: rounding modes and stochastic rounding in exact mode") {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.5f;
  x[1] = 0.5f + 1.0f / 128;  // halfway between 32 and 33 units of 2^-6
  const MXIntSpec s{};
  CHECK(Format(s).quantize(x, {32})[1] == 0.5f);
  CHECK(Format(s, exact.with(Rounding::nearest_away)).quantize(x, {32})[1] == 0.515625f);
  CHECK(Format(s, exact.with(Rounding::ceil)).quantize(x, {32})[1] == 0.515625f);
  const Policy p = exact.with(Rounding::stochastic).with_seed(5);
  x.assign(32 * 200, 0.0f);
  for (std::size_t b = 0; b < 200; ++b) x[b * 32] = 1.5f, x[b * 32 + 1] = 0.5f + 0.25f / 64;
  const auto y = Format(s, p).quantize(x, {static_cast<std::int64_t>(x.size())});
  CHECK(y == Format(s, p).quantize(x, {static_cast<std::int64_t>(x.size())}));
  double sum = 0;
  for (std::size_t b = 0; b < 200; ++b) {
    CHECK((y[b * 32 + 1] == 0.5f || y[b * 32 + 1] == 0.515625f));
    sum += y[b * 32 + 1];
  }
  CHECK(sum / 200 == doctest::Approx(0.5 + 0.25 / 64).epsilon(0.003));
}

TEST_CASE("mxint: exact quantile_search never increases a block's L2 error") {
  std::mt19937 rng(5);
  const auto x = random_values(rng, 32 * 64);
  const Shape sh{64, 32};
  const auto a = Format(MXIntSpec{4, 32, -1, 8, false}).quantize(x, sh);
  const auto q = Format(MXIntSpec{4, 32, -1, 8, true}).quantize(x, sh);
  int better = 0;
  for (int b = 0; b < 64; ++b) {
    double ea = 0, eq = 0;
    for (int i = 0; i < 32; ++i) {
      const auto k = static_cast<std::size_t>(b * 32 + i);
      ea += std::pow(static_cast<double>(a[k]) - x[k], 2);
      eq += std::pow(static_cast<double>(q[k]) - x[k], 2);
    }
    CHECK(eq <= ea);
    better += eq < ea;
  }
  CHECK(better > 0);
}

// ---- MASE codec and quirks ---------------------------------------------------------------

TEST_CASE("mxfp: MASE minifloat codec examples (formats.md 6.1)") {
  const std::vector<std::pair<float, float>> e4m3{{1.99f, 1.0f},    {3.9f, 4.0f},     {7.9f, 4.0f},
                                                  {470.0f, 480.0f}, {509.0f, 256.0f}, {0.0155f, 0.0078125f},
                                                  {0.002f, 0.0f}};
  for (auto [x, want] : e4m3) {
    CAPTURE(x);
    CHECK(mase_codec(4, 3, x) == want);
    CHECK(mase_codec(4, 3, -x) == -want);
  }
  const std::vector<std::pair<float, float>> e2m1{{0.5f, 0.0f}, {0.75f, 0.5f}, {0.9f, 0.5f},
                                                  {1.4f, 1.5f}, {1.75f, 1.0f}, {2.9f, 3.0f},
                                                  {5.0f, 4.0f}, {5.9f, 6.0f},  {7.9f, 4.0f}};
  for (auto [x, want] : e2m1) {
    CAPTURE(x);
    CHECK(mase_codec(2, 1, x) == want);
  }
  // E5M2 finite: exponent 31 is a normal binade (max 114688)
  CHECK(mase_codec(5, 2, 1e9f) == 114688.0f);
  CHECK(detail::mase_mx_emax(5) == 16);
}

TEST_CASE("mxfp: MASE block examples vs OCP") {
  std::vector<float> x(32, 0.0f);
  x[0] = 509.0f;  // E4M3: MASE scale 2^0, 509 -> 256 (carry lost); OCP 448
  x[1] = 1.0f;
  const auto m = Format(MXFPSpec{}, mase_compat).quantize(x, {32});
  const auto e = Format(MXFPSpec{}).quantize(x, {32});
  CHECK(m[0] == 256.0f);
  CHECK(e[0] == 448.0f);
  CHECK(m[1] == 1.0f);
  // MASE flushes float32 subnormal inputs and -0 to +0
  x.assign(32, -0.0f);
  x[3] = -1e-40f;
  for (float v : Format(MXFPSpec{}, mase_compat).quantize(x, {32})) CHECK(qnum_test::same_bits(v, 0.0f));
  // E1M2 exists only in MASE
  CHECK_NOTHROW(Format(MXFPSpec{1, 2, 32, -1, 8, false}, mase_compat).quantize(x, {32}));
  CHECK_THROWS_AS(Format(MXFPSpec{1, 2, 32, -1, 8, false}).quantize(x, {32}), Error);
}

// ---- info and specs ------------------------------------------------------------------------

TEST_CASE("mxint: info and presets") {
  const auto i8 = Format::parse("mxint8").info();
  CHECK(i8.bits_per_value == 8.25);
  CHECK(i8.max == std::ldexp(1.984375, 127));
  CHECK(i8.min_positive == std::ldexp(1.0, -133));
  CHECK(i8.distinct_values == 256);
  CHECK(Format::parse("mxfp4_e2m1").info().bits_per_value == 4.25);
  CHECK(Format::parse("mxfp4_e2m1").info().distinct_values == 15);
  CHECK(Format::parse("mxfp8_e4m3").info().distinct_values == 253);
  CHECK(Format::parse("mxfp8_e5m2").info().distinct_values == 247);
  CHECK(Format::parse("mxfp6_e3m2").info().max == std::ldexp(28.0, 127));
  CHECK(Format::parse("mxint:width=8,block_size=32", mase_compat).info().max == std::ldexp(127.0, 120));
  CHECK(Format::parse("mxint:width=8,block_size=32").to_string() == "mxint8");
}

TEST_CASE("mxfp: invalid specs are rejected with messages") {
  CHECK_THROWS_WITH_AS(Format::parse("mxfp:exponent_width=4,frac_width=3,scale_exp_bits=5"),
                       "mxfp: scale_exp_bits 5 is not allowed (allowed: 8, the E8M0 scale; MASE: \"Invalid scale "
                       "exponent bits: 5. Legal values are: (8,).\")",
                       Error);
  CHECK_THROWS_AS(Format::parse("mxfp:exponent_width=3,frac_width=3"), Error);
  CHECK_THROWS_AS(Format::parse("mxfp:block_size=0"), Error);
  CHECK_THROWS_AS(Format::parse("mxint:width=1"), Error);
  CHECK_THROWS_AS(Format::parse("mxint:scale_bits=9"), Error);
  CHECK_THROWS_AS(encode_block(MXIntSpec{8, 4, -1, 8, false}, std::vector<float>(5, 1.0f)), Error);
  CHECK_THROWS_AS(Format(MXIntSpec{}, mase_compat).quantize(std::vector<float>{1.0f}, {}), Error);
}

// ---- packed blocks -------------------------------------------------------------------------

TEST_CASE("mxfp: packed blocks round trip and match exact quantize") {
  std::mt19937 rng(9);
  auto check = [&]<class Blk>(std::type_identity<Blk>) {
    const auto f = Format(Blk::spec());
    CAPTURE(f.to_string());
    for (int t = 0; t < 50; ++t) {
      const auto x = random_values(rng, 32);
      const Blk b = Blk::from_floats(x);
      const auto y = b.to_floats();
      const auto q = f.quantize(x, {32});
      int bad = 0;
      for (std::size_t i = 0; i < 32; ++i) bad += !(y[i] == q[i]);
      CHECK(bad == 0);
      const auto c = encode_block(Blk::spec(), x);
      CHECK(b.scale == c.scale);
      for (int i = 0; i < 32; ++i) CHECK(b.code(i) == c.elements[static_cast<std::size_t>(i)]);
    }
  };
  check(std::type_identity<MXInt8>{});
  check(std::type_identity<MXFP8E4M3>{});
  check(std::type_identity<MXFP8E5M2>{});
  check(std::type_identity<MXFP6E3M2>{});
  check(std::type_identity<MXFP6E2M3>{});
  check(std::type_identity<MXFP4>{});
  static_assert(sizeof(MXInt8) == 33 && sizeof(MXFP6E2M3) == 25 && sizeof(MXFP4) == 17);
  CHECK(MXInt8::bits_per_value == 8.25);
  CHECK(MXFP4::bits_per_value == 4.25);
  CHECK(MXFP6E3M2::bits_per_value == 6.25);
  CHECK(MXFP8E4M3::max() == std::ldexp(448.0, 127));
  CHECK(MXFP4::min_positive() == std::ldexp(1.0, -128));
  // layout: FP4 element 0 in the low nibble; 6-bit codes LSB first
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;   // E2M1 code 0b0010 with scale 2^0 (max 1 -> X = 2^-2 -> 4.0 = 0b0110)
  x[1] = -0.5f;  // -2.0 -> 0b1100
  const auto b = MXFP4::from_floats(x);
  CHECK(b.scale == 125);
  CHECK(b.data[0] == 0xC6);
  CHECK(to_binary(b).substr(0, 21) == "0b01111101 0110 1100 ");
  MXFP6E3M2 b6;
  for (int i = 0; i < 32; ++i) b6.set_code(i, static_cast<std::uint32_t>(i * 2 + 1));
  for (int i = 0; i < 32; ++i) CHECK(b6.code(i) == static_cast<std::uint32_t>(i * 2 + 1));
  CHECK(b6.data[0] == (1 | (3 << 6)));
  const auto nb = MXInt8::from_floats(std::vector<float>(32, NAN));
  CHECK(nb.scale == 0xFF);
  CHECK(std::isnan(nb.to_floats()[0]));
  CHECK_THROWS_AS(MXInt8::from_floats(std::vector<float>(31, 1.0f)), Error);
}

// ---- mase-cuda MXINT8 ----------------------------------------------------------------------

TEST_CASE("mxint: mase-cuda MXINT8 quantize and bf16 dequantize (exhaustive)") {
  std::vector<float> w(64, 0.0f);
  w[0] = 1.5f;
  w[1] = -0.75f;
  w[2] = 1.0f + 1.0f / 256;  // bf16 rounds to 1.0 (tie to even)
  w[3] = 1.99f;              // bf16 1.9921875 -> 127.5 -> 128 -> clamped to 127
  w[4] = 1e-39f;             // below 2^-126: flushed
  const auto q = quantize_mxint8_mase_cuda(w, 32);
  CHECK(q.scale[0] == 127);
  CHECK(q.scale[1] == 0);  // all-zero group
  CHECK(q.mantissa[0] == 96);
  CHECK(q.mantissa[1] == -48);
  CHECK(q.mantissa[2] == 64);
  CHECK(q.mantissa[3] == 127);
  CHECK(q.mantissa[4] == 0);
  w[0] = 2.0f;  // floor scale: 2.0 -> S = 128, 1.9921875 -> 63.75 -> 64
  CHECK(quantize_mxint8_mase_cuda(w, 32).scale[0] == 128);
  CHECK(quantize_mxint8_mase_cuda(w, 32).mantissa[3] == 64);
  CHECK_THROWS_AS(quantize_mxint8_mase_cuda(std::vector<float>(33, 1.0f), 32), Error);
  int bad = 0;
  for (int S = 1; S <= 254; ++S)
    for (int m = -127; m <= 127; ++m) {
      const float v = detail::mx_bf16_bits_to_float(
          dequantize_mxint8_to_bf16_bits(static_cast<std::int8_t>(m), static_cast<std::uint8_t>(S)));
      bad += !(static_cast<double>(v) == std::ldexp(static_cast<double>(m), S - 133));
    }
  CHECK(bad == 0);
  CHECK(dequantize_mxint8_to_bf16_bits(0, 0) == 0);
  const auto deq = dequantize_mxint8_mase_cuda_bf16(q);
  CHECK(detail::mx_bf16_bits_to_float(deq[0]) == 1.5f);
  CHECK(detail::mx_bf16_bits_to_float(deq[1]) == -0.75f);
}

// ---- mxint_hardware ------------------------------------------------------------------------

TEST_CASE("mxint_hardware: tiles, floor rounding, saturation quirk, errors") {
  const auto f = Format::parse("mxint_hardware:width=8,exponent_width=4,parallelism=2x4", mase_compat);
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;     // tile (0,0): e = ceil(0) - 8 = -8 -> 256 clamps to 127
  x[1] = -0.001f;  // floor(-0.256) = -1 -> -2^-8
  x[4] = 0.25f;    // same tile (row 1, col 0)
  x[2] = 0.3f;
  x[12] = 3.0f;  // tile (1,0) = rows 2..3? shape [4, 4] -> tiles of 2x4: rows {0,1}, {2,3}
  const auto y = f.quantize(x, {4, 4});
  CHECK(y[0] == 127.0f / 256);
  CHECK(y[1] == -1.0f / 256);
  CHECK(y[4] == 64.0f / 256);
  CHECK(y[2] == std::floor(0.3f * 256) / 256);
  CHECK(y[12] == 127.0f / 64);  // e = ceil(log2 3) - 8 = -6
  CHECK(y[8] == 0.0f);
  CHECK_THROWS_WITH_AS(Format::parse("mxint_hardware:width=8,exponent_width=4,parallelism=3x8", mase_compat)
                           .quantize(std::vector<float>(128, 1.0f), {8, 16}),
                       "mxint_hardware: parallelism [3, 8] does not tile the last two dims [8, 16]", Error);
  CHECK_THROWS_AS(Format::parse("mxint_hardware:width=8,exponent_width=4,parallelism=8"), Error);  // exact mode
  const auto i = Format::parse("mxint_hardware:width=8,exponent_width=4,parallelism=1x16", mase_compat).info();
  CHECK(i.bits_per_value == 8.25);
  CHECK(i.max == 127.0 * 128);
  CHECK(i.min_positive == 1.0 / 256);
  // 1-D input with one parallelism entry; NaN tiles
  std::vector<float> v{1, 2, NAN, 4, 1, 2, 3, 4};
  const auto z = Format::parse("mxint_hardware:width=8,exponent_width=4,parallelism=4", mase_compat).quantize(v, {8});
  CHECK(std::isnan(z[0]));
  CHECK(z[4] == 1.0f);
}
