// Binary families: `binary` (bipolar / per-channel scaled, deterministic / stochastic),
// `residual_sign` and `binarize` — exact semantics for any rank, MASE's float32 rules and
// limits, codes, info and the Binary value type. MASE reference cases run in test_mase_ref.cpp;
// the stochastic ones are also replayed here with their saved uniforms.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "format/conformance.hpp"
#include "format/mase_ref.hpp"
#include "qnum/format/binary.hpp"
#include "qnum/format/residual_sign.hpp"
#include "qnum/format/binarize.hpp"
#include "qnum/io/npy.hpp"

using namespace qnum;

namespace {

std::vector<float> run(const BinarySpec& s, const Policy& p, const std::vector<float>& in, const Shape& shape) {
  std::vector<float> out(in.size());
  quantize(s, p, in, out, shape);
  return out;
}

std::vector<float> normal(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("binary: bipolar deterministic values, zeros and specials") {
  const BinarySpec s{false, true};
  const std::vector<float> in{2.5f, 0.0f, -0.0f, -1e-45f, 1e-45f, -3.0f, INFINITY, -INFINITY};
  const std::vector<float> want{1, 1, 1, -1, 1, -1, 1, -1};
  for (const Policy& p : {exact, mase_compat}) {
    const auto out = run(s, p, in, {static_cast<std::int64_t>(in.size())});
    for (std::size_t i = 0; i < in.size(); ++i) CHECK(qnum_test::same_bits(out[i], want[i]));
  }
  // NaN: exact keeps it; MASE's torch.where(x >= 0, 1, -1) gives -1.
  CHECK(std::isnan(quantize(s, exact, NAN)));
  CHECK(quantize(s, mase_compat, NAN) == -1.0f);
  CHECK(binarize_bipolar(-0.0f) == 1.0f);
  const auto inf = info(s, exact);
  CHECK(inf.bits_per_value == 1);
  CHECK(inf.distinct_values == 2);
  CHECK(inf.max == 1);
}

TEST_CASE("binary: scaled exact is per output channel for any rank") {
  const BinarySpec s{false, false};
  SUBCASE("rank 2 Linear weight [out, in]") {
    const std::vector<float> w{1.0f,  -3.0f, 2.0f, 0.0f,   // row 0: mean|x| = 1.5
                               -0.5f, -0.5f, 0.5f, 0.5f};  // row 1: mean|x| = 0.5
    const auto out = run(s, exact, w, {2, 4});
    const std::vector<float> want{1.5f, 0, 1.5f, 0, 0, 0, 0.5f, 0.5f};
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(qnum_test::same_bits(out[i], want[i]));
    const auto alphas = binary_alphas(s, exact, w, {2, 4});
    REQUIRE(alphas.size() == 2);
    CHECK(alphas[0] == 1.5f);
    CHECK(alphas[1] == 0.5f);
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(decode(s, encode(s, w[i]), alphas[i / 4]) == out[i]);
  }
  SUBCASE("rank 1: one alpha for the whole tensor") {
    const std::vector<float> v{1, -2, 3, -4};
    const auto out = run(s, exact, v, {4});
    CHECK(out == std::vector<float>{2.5f, 0, 2.5f, 0});
  }
  SUBCASE("rank 3 and 4 agree with the flattened per-channel rule") {
    const auto v = normal(2 * 3 * 4 * 5, 7);
    const auto a = run(s, exact, v, {2, 3, 4, 5});
    const auto b = run(s, exact, v, {2, 60});
    const auto c = run(s, exact, v, {2, 12, 5});
    CHECK(a == b);
    CHECK(a == c);
    for (int g = 0; g < 2; ++g) {
      double m = 0;
      for (int j = 0; j < 60; ++j) m += std::fabs(static_cast<double>(v[static_cast<std::size_t>(g * 60 + j)]));
      for (int j = 0; j < 60; ++j) {
        const auto i = static_cast<std::size_t>(g * 60 + j);
        CHECK(a[i] == (v[i] > 0 ? static_cast<float>(m / 60) : 0.0f));
      }
    }
  }
  SUBCASE("all-zero channel gives zeros, NaN makes its channel NaN") {
    const std::vector<float> v{0, 0, -0.0f, 0, 1, NAN, 2, 3};
    const auto out = run(s, exact, v, {2, 4});
    for (int i = 0; i < 4; ++i) CHECK(qnum_test::same_bits(out[static_cast<std::size_t>(i)], 0.0f));
    for (int i = 4; i < 8; ++i) CHECK(std::isnan(out[static_cast<std::size_t>(i)]));
  }
}

TEST_CASE("binary: MASE scaled needs 4-D and uses a float32 per-sample mean") {
  const BinarySpec s{false, false};
  for (const Shape& shape : {Shape{8}, Shape{2, 4}, Shape{2, 2, 2}, Shape{1, 2, 2, 1, 2}}) {
    const std::vector<float> v(static_cast<std::size_t>(numel(shape)), 1.0f);
    const auto msg = qnum_test::error_of([&] { (void)run(s, mase_compat, v, shape); });
    CHECK(msg.find("4-D") != std::string::npos);
    CHECK(msg.find("binary") != std::string::npos);
    const auto msg2 = qnum_test::error_of([&] { (void)run(BinarySpec{true, false}, mase_compat, v, shape); });
    CHECK(msg2.find("4-D") != std::string::npos);
  }
  const auto v = normal(3 * 2 * 5 * 7, 11, 2.0f);
  const auto out = run(s, mase_compat, v, {3, 2, 5, 7});
  const auto alphas = binary_alphas(s, mase_compat, v, {3, 2, 5, 7});
  REQUIRE(alphas.size() == 3);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float a = alphas[i / 70];
    CHECK(qnum_test::same_bits(out[i], v[i] > 0 ? a : 0.0f));
    double m = 0;
    for (std::size_t j = (i / 70) * 70; j < (i / 70 + 1) * 70; ++j) m += std::fabs(static_cast<double>(v[j]));
    CHECK(qnum_test::ulp_distance(a, static_cast<float>(m / 70)) <= 4);
  }
}

TEST_CASE("binary: torch-order float32 sum") {
  // Exactly representable sums agree with any order; the cascade handles long rows.
  for (std::int64_t n : {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 1000, 5000}) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i % 17);
    double want = 0;
    for (float x : v) want += x;
    CHECK(detail::torch_sum_f32(v.data(), n) == static_cast<float>(want));
  }
  // Rounding order: with 8 lanes, 1 + 2^-24 * 8 keeps the small terms (lane partials) that a
  // left-to-right loop would lose.
  std::vector<float> v(16, std::ldexp(1.0f, -24));
  v[0] = 1.0f;
  float seq = 0;
  for (float x : v) seq += x;
  CHECK(seq == 1.0f);
  CHECK(detail::torch_sum_f32(v.data(), 16) > 1.0f);
}

TEST_CASE("binary: stochastic exact is seeded, index-keyed and unbiased") {
  const BinarySpec s{true, true};
  const Policy p = exact.with_seed(123);
  const std::int64_t n = 40000;
  const std::vector<float> in(static_cast<std::size_t>(n), 0.5f);  // p = 0.75 -> mean 0.5
  const auto a = run(s, p, in, {n});
  const auto b = run(s, p, in, {200, 200});
  CHECK(a == b);
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK((a[i] == 1.0f || a[i] == -1.0f));
    sum += a[i];
    if (i < 100) CHECK(a[i] == quantize(s, p, in[i], i));
  }
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.03));
  const auto c = run(s, exact.with_seed(124), in, {n});
  CHECK(a != c);
  // Saturated probabilities are certain.
  const auto sat = run(s, p, std::vector<float>{-1.0f, -5.0f, 1.0f, 7.0f}, {4});
  CHECK(sat == std::vector<float>{-1, -1, 1, 1});
}

TEST_CASE("binary: stochastic scaled is stochastic in exact, deterministic in MASE") {
  const BinarySpec s{true, false};
  const Shape shape{2, 10, 10, 10};
  std::vector<float> in(2000, 0.0f);                                       // p = 0.5
  for (std::size_t i = 1000; i < 2000; ++i) in[i] = i % 2 ? 0.5f : -0.5f;  // mean|x| = 0.5
  const auto a = run(s, exact.with_seed(5), in, shape);
  double on = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    CHECK(a[i] == 0.0f);  // alpha = mean|x| = 0 for the all-zero channel
  }
  for (std::size_t i = 1000; i < 2000; ++i) {
    CHECK((a[i] == 0.0f || a[i] == 0.5f));
    on += a[i] == 0.5f;
  }
  CHECK(on / 1000 == doctest::Approx(0.5).epsilon(0.1));  // p = 0.75 or 0.25
  CHECK(a == run(s, exact.with_seed(5), in, shape));
  // MASE: the zero-scaled op on p = clamp((x+1)/2, 0, 1): alpha = mean p, every p > 0 is on.
  const auto m = run(s, mase_compat.with_seed(5), in, shape);
  CHECK(m == run(s, mase_compat.with_seed(99), in, shape));
  CHECK(m[0] == 0.5f);  // p = 0.5 everywhere in sample 0
  const auto ma = binary_alphas(s, mase_compat, in, shape);
  REQUIRE(ma.size() == 2);
  CHECK(ma[0] == 0.5f);
  CHECK(ma[1] == 0.5f);  // mean of p = 0.75 and 0.25
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(m[i] == ma[i / 1000]);
}

TEST_CASE("binary: explicit uniforms reproduce MASE's stochastic draws") {
  const BinarySpec s{true, true};
  const std::vector<float> x{-0.5f, 0.0f, 0.5f, NAN, 3.0f};
  const std::vector<float> u{0.25f, 0.5f, 0.8f, 0.1f, 0.99f};
  std::vector<float> out(x.size());
  quantize(s, mase_compat, x, u, out, {5});
  // p = 0.25, 0.5, 0.75, NaN, 1 and +1 iff p >= u.
  CHECK(out == std::vector<float>{1, 1, -1, -1, 1});
  CHECK_THROWS_AS(quantize(s, mase_compat, x, std::vector<float>(4, 0.5f), out, {5}), Error);

  // Every public MASE stochastic case, replayed with its saved uniforms.
  int ran = 0;
  for (const auto& c : qnum_test::load_mase_cases()) {
    if (c.family != "binary" || !c.record.value("stochastic", false)) continue;
    const auto rand_path = qnum_test::mase_ref_dir() / c.record.at("files").at("rand").get<std::string>();
    const auto in = read_npy(c.input), draws = read_npy(rand_path), want = read_npy(c.output);
    const auto& kw = c.record.at("kwargs");
    const BinarySpec cs{kw.value("stochastic", false), kw.value("bipolar", false)};
    std::vector<float> got(in.data.size());
    quantize(cs, mase_compat, in.data, draws.data, got, in.shape);
    qnum_test::FailureLog log;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!qnum_test::same_bits(got[i], want.data[i]) &&
          !(c.scaled_mean && qnum_test::ulp_distance(got[i], want.data[i]) <= 4))
        log.fail("element " + std::to_string(i) + " got " + qnum_test::describe(got[i]));
    log.check(c.id.c_str());
    ++ran;
  }
  MESSAGE("stochastic MASE cases replayed: ", ran);
}

TEST_CASE("binary: codes, spec keys and value type") {
  const BinarySpec bip{false, true}, sc{false, false};
  CHECK(encode(bip, -0.0f) == 1u);
  CHECK(encode(bip, -0.1f) == 0u);
  CHECK(encode(sc, 0.0f) == 0u);
  CHECK(decode(bip, 0) == -1.0f);
  CHECK(decode(bip, 1) == 1.0f);
  CHECK(decode(sc, 1, 0.25f) == 0.25f);
  CHECK(decode(sc, 0, 0.25f) == 0.0f);
  CHECK_THROWS_AS((void)encode(bip, NAN), Error);
  CHECK(code_bits(bip) == 1);
  CHECK_THROWS_AS((void)quantize(sc, exact, 1.0f), Error);  // scaled needs the tensor

  KeyValues kv = KeyValues::parse("binary:width=2").second;
  const auto msg = qnum_test::error_of([&] { (void)BinarySpec::from_keys(kv); });
  CHECK(msg.find("width 2 must be 1") != std::string::npos);

  static_assert(std::numeric_limits<Binary>::is_specialized);
  static_assert(std::numeric_limits<Binary>::max().value() == 1.0f);
  static_assert(std::numeric_limits<Binary>::lowest().value() == -1.0f);
  const Binary a(0.3f), b(-2.0f), z(-0.0f);
  CHECK(float(a) == 1.0f);
  CHECK(float(b) == -1.0f);
  CHECK(float(z) == 1.0f);
  CHECK(a * b == Binary(-1.0f));
  CHECK(b * b == Binary(1.0f));
  CHECK(-a == b);
  CHECK(b < a);
  CHECK(to_binary(a) == "0b1");
  CHECK(to_binary(b) == "0b0");
  CHECK_THROWS_AS(Binary(NAN), Error);
}

TEST_CASE("binary: binarize is sign(clamp(x, -1, 1)) in both modes") {
  const BinarizeSpec s;
  const std::vector<float> in{-3.0f, -1.0f, -0.25f, -0.0f, 0.0f, 1e-40f, 0.5f, 1.0f, 7.0f, INFINITY, -INFINITY};
  const std::vector<float> want{-1, -1, -1, 0, 0, 1, 1, 1, 1, 1, -1};
  for (const Policy& p : {exact, mase_compat}) {
    std::vector<float> out(in.size());
    quantize(s, p, in, out, {static_cast<std::int64_t>(in.size())});
    for (std::size_t i = 0; i < in.size(); ++i) CHECK(qnum_test::same_bits(out[i], want[i]));  // -0 -> +0
    CHECK(std::isnan(quantize(s, p, NAN)));
  }
  CHECK(info(s, exact).distinct_values == 3);
}

TEST_CASE("residual_sign: exact stacks [L, ...shape] for any rank and L") {
  const Policy p = exact;
  SUBCASE("L = 2, rank 2, default means (2/3, 1/3)") {
    const ResidualSignSpec s{2, {}};
    const std::vector<float> x{0.9f, -0.2f, 0.0f, 3.0f, -0.5f, 0.6f};
    const Shape shape{2, 3};
    CHECK(output_shape(s, p, shape) == Shape{2, 2, 3});
    std::vector<float> out(12);
    quantize(s, p, x, out, shape);
    const float m0 = static_cast<float>(2.0 / 3), m1 = static_cast<float>(1.0 / 3);
    // level 1: sign(x) * 2/3; level 2: sign(x - level1) * 1/3
    const std::vector<float> l0{m0, -m0, 0, m0, -m0, m0};
    const std::vector<float> l1{m1, m1, 0, m1, m1, -m1};
    for (std::size_t i = 0; i < 6; ++i) {
      CHECK(qnum_test::same_bits(out[i], l0[i]));
      CHECK(qnum_test::same_bits(out[6 + i], l1[i]));
    }
  }
  SUBCASE("L = 1 stays stacked in exact, unstacked in MASE") {
    const ResidualSignSpec s{1, {0.5}};
    CHECK(output_shape(s, exact, {4}) == Shape{1, 4});
    CHECK(output_shape(s, mase_compat, {4}) == Shape{4});
    std::vector<float> a(4), b(4);
    const std::vector<float> x{-2.0f, -0.0f, 0.1f, NAN};
    quantize(s, exact, x, a, {4});
    quantize(s, mase_compat, x, b, {4});
    CHECK(a[0] == -0.5f);
    CHECK(qnum_test::same_bits(a[1], 0.0f));
    CHECK(a[2] == 0.5f);
    CHECK(std::isnan(a[3]));
    for (std::size_t i = 0; i < 4; ++i) CHECK(qnum_test::same_bits(a[i], b[i]));
  }
  SUBCASE("L = 4, rank 3: x-hat converges toward x") {
    const ResidualSignSpec s{4, {0.5, 0.25, 0.125, 0.0625}};
    const auto x = normal(2 * 3 * 4, 3, 0.4f);
    std::vector<float> out(4 * x.size());
    quantize(s, p, x, out, {2, 3, 4});
    for (std::size_t i = 0; i < x.size(); ++i) {
      double xhat = 0;
      for (std::size_t l = 0; l < 4; ++l) {
        CHECK(std::fabs(out[l * x.size() + i]) == static_cast<float>(s.means[l]));
        xhat += out[l * x.size() + i];
      }
      if (std::fabs(x[i]) < 0.9) CHECK(std::fabs(xhat - x[i]) <= 0.0625 + 1e-6);
    }
  }
}

TEST_CASE("residual_sign: MASE float32 levels and limits") {
  const ResidualSignSpec s{3, {0.6, -0.3, 0.1}};  // |mu| as MASE's torch.abs
  const std::vector<float> x{0.2f, -1.5f};
  std::vector<float> out(6);
  quantize(s, mase_compat, x, out, {2});
  const float m0 = 0.6f, m1 = 0.3f, m2 = 0.1f;
  // x = 0.2: +m0, r = 0.2 - 0.6 < 0 -> -m1, r = -0.4 + 0.3 < 0 -> -m2
  CHECK(out[0] == m0);
  CHECK(out[2] == -m1);
  CHECK(out[4] == -m2);
  CHECK(out[1] == -m0);
  const auto msg = qnum_test::error_of([&] {
    std::vector<float> o(8);
    quantize(ResidualSignSpec{4, {}}, mase_compat, x, o, {2});
  });
  CHECK(msg.find("levels 1..3") != std::string::npos);
  std::vector<float> small(3);
  CHECK_THROWS_AS(quantize(s, mase_compat, x, small, {2}), Error);
  const auto inf = info(ResidualSignSpec{2, {0.5, 0.25}}, exact);
  CHECK(inf.bits_per_value == 2);
  CHECK(inf.max == 0.75);
  CHECK(inf.min_positive == 0.25);
}

TEST_CASE("residual_sign: invalid specs name the problem") {
  CHECK(qnum_test::error_of([] {
          ResidualSignSpec{0, {}}.validate();
        }).find("levels 0 must be in [1, 8]") != std::string::npos);
  CHECK(qnum_test::error_of([] {
          ResidualSignSpec{2, {0.5}}.validate();
        }).find("means has 1 entries, levels is 2") != std::string::npos);
  CHECK(qnum_test::error_of([] { ResidualSignSpec{1, {NAN}}.validate(); }).find("must be finite") != std::string::npos);
}
