// scale_integer: per-row (last dim) dynamic scaling. exact maps each row's max |x| exactly
// onto the top code; MASE (s = 2^(W-1) / (max + 1e-9) in float32, true division) lands the
// row max on 2^(W-1) and clamps it one step in. MASE reference cases run in test_mase_ref.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/scale_integer.hpp"

using namespace qnum;

namespace {

ScaleIntegerSpec si(int width, bool is_signed) {
  ScaleIntegerSpec s;
  s.width = width;
  s.is_signed = is_signed;
  return s;
}

std::vector<float> run(const ScaleIntegerSpec& s, const Policy& p, const std::vector<float>& in, const Shape& shape) {
  std::vector<float> out(in.size());
  quantize(s, p, in, out, shape);
  return out;
}

}  // namespace

TEST_CASE("scale_integer: exact maps the row max onto the top code") {
  const ScaleIntegerSpec s = si(4, true);  // k in [-8, 7]
  const std::vector<float> row{3.0f, 1.0f, -0.5f, -3.0f, 0.0f, -0.0f};
  const auto out = run(s, exact, row, {6});
  CHECK(out[0] == 3.0f);                              // max -> k = 7 -> exactly 3
  CHECK(out[3] == -3.0f);                             // -max -> k = -7
  CHECK(out[1] == static_cast<float>(2.0 * 3 / 7));   // 7/3 = 2.33 -> 2
  CHECK(out[2] == static_cast<float>(-1.0 * 3 / 7));  // -1.17 -> -1
  CHECK(qnum_test::same_bits(out[4], 0.0f));
  CHECK(qnum_test::same_bits(out[5], -0.0f));
  // Every value lies on the row's grid k * max / 7.
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<float> x(5 * 33);
  for (auto& e : x) e = d(rng);
  const auto q = run(s, exact, x, {5, 33});
  for (int r = 0; r < 5; ++r) {
    float m = 0;
    for (int j = 0; j < 33; ++j) m = std::max(m, std::fabs(x[static_cast<std::size_t>(r * 33 + j)]));
    for (int j = 0; j < 33; ++j) {
      const auto i = static_cast<std::size_t>(r * 33 + j);
      const double k = std::nearbyint(static_cast<double>(x[i]) * 7 / m);
      CHECK(q[i] == static_cast<float>(k * m / 7));
      if (std::fabs(x[i]) == m) CHECK(std::fabs(q[i]) == m);
    }
  }
  // Unsigned: negatives clamp to 0, the max reaches 2^W - 1.
  const auto u = run(si(4, false), exact, {2.0f, 1.0f, -1.0f}, {3});
  CHECK(u == std::vector<float>{2.0f, static_cast<float>(8.0 * 2 / 15), 0.0f});
}

TEST_CASE("scale_integer: MASE pulls the row max in by one step") {
  const ScaleIntegerSpec s = si(4, true);
  // max 1: 1 + 1e-9f == 1, s = 8: 1 -> 8 -> clamped 7 -> 0.875; -1 -> -8 stays (lower bound).
  CHECK(run(s, mase_compat, {1.0f, 0.5f}, {2}) == std::vector<float>{0.875f, 0.5f});
  CHECK(run(s, mase_compat, {-1.0f, 0.5f}, {2}) == std::vector<float>{-1.0f, 0.5f});
  CHECK(run(si(4, false), mase_compat, {1.0f, 0.5f, -0.25f}, {3}) == std::vector<float>{0.9375f, 0.5f, 0.0f});
  // Small rows feel the 1e-9 epsilon: s = reciprocal(max + 1e-9) * 2^(W-1), k / s by true division.
  const std::vector<float> row{0.001f, 0.0003f, -0.0007f};
  const auto out = run(s, mase_compat, row, {3});
  const float scale = (1.0f / (0.001f + 1e-9f)) * 8.0f;
  for (std::size_t j = 0; j < 3; ++j) {
    float k = std::nearbyint(row[j] * scale);
    k = std::min(std::max(k, -8.0f), 7.0f);
    CHECK(qnum_test::same_bits(out[j], k / scale));
  }
  CHECK(out[0] == 7.0f / scale);
  // exact differs: the max stays.
  CHECK(run(s, exact, row, {3})[0] == 0.001f);
}

TEST_CASE("scale_integer: NaN and Inf rows, zero rows, ranks") {
  for (const Policy& p : {exact, mase_compat}) {
    const ScaleIntegerSpec s = si(8, true);
    const auto a = run(s, p, {1.0f, NAN, 2.0f, 1.0f, 2.0f, 4.0f}, {2, 3});
    for (int i = 0; i < 3; ++i) CHECK(std::isnan(a[static_cast<std::size_t>(i)]));
    for (int i = 3; i < 6; ++i) CHECK(!std::isnan(a[static_cast<std::size_t>(i)]));
    const auto b = run(s, p, {1.0f, -INFINITY, 2.0f}, {3});
    for (float v : b) CHECK(std::isnan(v));
    const auto z = run(s, p, {0.0f, 0.0f, 0.0f}, {1, 3});
    for (float v : z) CHECK(v == 0.0f);
    // rank 0 is a one-element row; rank 3 rows are the last dimension.
    CHECK(run(s, p, {5.0f}, {}).size() == 1);
    std::vector<float> x(2 * 3 * 4);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 7.5f;
    CHECK(run(s, p, x, {2, 3, 4}) == run(s, p, x, {6, 4}));
    CHECK(run(s, p, {}, {2, 0}).empty());
  }
}

TEST_CASE("scale_integer: row codes round-trip through encode_row / decode_row") {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> row(40);
  for (auto& e : row) e = d(rng);
  for (bool sgn : {true, false})
    for (const Policy& p : {exact, mase_compat}) {
      const ScaleIntegerSpec s = si(6, sgn);
      const auto r = encode_row(s, p, row);
      REQUIRE(r.codes.size() == row.size());
      for (auto k : r.codes) CHECK((k >= s.kmin() && k <= s.kmax()));
      const auto back = decode_row(s, p, r);
      const auto q = run(s, p, row, {40});
      for (std::size_t j = 0; j < row.size(); ++j) CHECK((back[j] == q[j]));
    }
  CHECK_THROWS_AS((void)encode_row(ScaleIntegerSpec{}, exact, std::vector<float>{1.0f, NAN}), Error);
  const auto r = encode_row(si(8, true), exact, std::vector<float>{-2.0f, 1.0f});
  CHECK(r.codes == std::vector<std::int32_t>{-127, 64});
  CHECK(r.row_max == 2.0f);
}

TEST_CASE("scale_integer: exact stochastic rounding is seeded and unbiased") {
  const ScaleIntegerSpec s = si(4, true);
  const Policy p = exact.with(Rounding::stochastic).with_seed(3);
  std::vector<float> x(20000, 0.3f);
  x[0] = 7.0f;  // row max 7: step 1, so 0.3 rounds to 0 or 1
  const auto a = run(s, p, x, {20000});
  CHECK(a == run(s, p, x, {20000}));
  double sum = 0;
  for (std::size_t i = 1; i < a.size(); ++i) {
    CHECK((a[i] == 0.0f || a[i] == 1.0f));
    sum += a[i];
  }
  CHECK(sum / 19999 == doctest::Approx(0.3).epsilon(0.05));
}

TEST_CASE("scale_integer: spec validation and info") {
  CHECK(qnum_test::error_of([] { si(1, true).validate(); }).find("width 1 must be in [2, 24]") != std::string::npos);
  CHECK_THROWS_AS(si(25, true).validate(), Error);
  const auto e = info(si(8, true), exact);
  CHECK(e.bits_per_value == 8);
  CHECK(e.distinct_values == 256);
  CHECK(e.max == 1.0);
  CHECK(e.min_positive == doctest::Approx(1.0 / 127));
  const auto m = info(si(8, true), mase_compat);
  CHECK(m.max == doctest::Approx(127.0 / 128));
  CHECK(m.value_set.find("1e-9") != std::string::npos);
}
