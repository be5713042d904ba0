// Ternary: exact per-channel thresholds and scales for any rank (threshold honoured, empty
// channels give 0), MASE's 4-D rule (threshold ignored, 0/0 = NaN), codes, info and the
// Ternary value type. MASE reference cases run in test_mase_ref.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "format/conformance.hpp"
#include "format/mase_ref.hpp"
#include "qnum/format/ternary.hpp"

using namespace qnum;

namespace {

std::vector<float> run(const TernarySpec& s, const Policy& p, const std::vector<float>& in, const Shape& shape) {
  std::vector<float> out(in.size());
  quantize(s, p, in, out, shape);
  return out;
}

TernarySpec spec(bool scaling, std::optional<double> threshold = std::nullopt) {
  TernarySpec s;
  s.scaling_factor = scaling;
  s.threshold = threshold;
  return s;
}

}  // namespace

TEST_CASE("ternary: exact values per output channel, rank 1..4") {
  SUBCASE("rank 2 Linear weight: delta = 0.75 * mean|x| per row") {
    // row 0: mean|x| = 1 -> delta 0.75; row 1: mean|x| = 0.25 -> delta 0.1875
    const std::vector<float> w{2.0f, -1.0f, 0.5f, -0.5f, 0.25f, -0.25f, 0.1f, -0.4f};
    const auto out = run(spec(false), exact, w, {2, 4});
    CHECK(out == std::vector<float>{1, -1, 0, 0, 1, -1, 0, -1});
    // scaled: row 0 alpha = mean(2, 1) = 1.5; row 1 alpha = mean(0.25, 0.25, 0.4) = 0.3
    const auto sc = run(spec(true), exact, w, {2, 4});
    CHECK(sc[0] == 1.5f);
    CHECK(sc[1] == -1.5f);
    CHECK(sc[2] == 0.0f);
    CHECK(sc[4] == static_cast<float>(0.9 / 3));
    CHECK(sc[7] == -static_cast<float>(0.9 / 3));
    const auto ch = ternary_channels(spec(true), w, {2, 4});
    REQUIRE(ch.size() == 2);
    CHECK(ch[0].delta == 0.75);
    CHECK(ch[0].alpha == 1.5);
    for (std::size_t i = 0; i < w.size(); ++i)
      CHECK(decode(spec(true), encode(spec(true), w[i], ch[i / 4].delta), static_cast<float>(ch[i / 4].alpha)) ==
            sc[i]);
  }
  SUBCASE("rank 1 is one group; rank 3 and 4 equal the flattened rule") {
    const std::vector<float> v{1, -2, 3, -4};  // mean 2.5, delta 1.875
    CHECK(run(spec(false), exact, v, {4}) == std::vector<float>{0, -1, 1, -1});
    std::mt19937 rng(3);
    std::normal_distribution<float> d;
    std::vector<float> x(3 * 4 * 5 * 6);
    for (auto& e : x) e = d(rng);
    for (bool scaling : {false, true}) {
      const auto a = run(spec(scaling), exact, x, {3, 4, 5, 6});
      CHECK(a == run(spec(scaling), exact, x, {3, 120}));
      CHECK(a == run(spec(scaling), exact, x, {3, 20, 6}));
    }
  }
}

TEST_CASE("ternary: exact honours an explicit threshold") {
  const std::vector<float> v{0.3f, -0.3f, 0.6f, -0.7f, 0.5f, -0.5f};
  CHECK(run(spec(false, 0.5), exact, v, {6}) == std::vector<float>{0, 0, 1, -1, 0, 0});  // strict >
  CHECK(run(spec(false, 0.0), exact, v, {6}) == std::vector<float>{1, -1, 1, -1, 1, -1});
  const auto sc = run(spec(true, 0.5), exact, v, {2, 3});  // row 0: alpha 0.6; row 1: alpha 0.7
  CHECK(sc == std::vector<float>{0, 0, 0.6f, -0.7f, 0, 0});
  // MASE ignores it: delta = 0.75 * mean|x| regardless.
  const std::vector<float> w(16, 1.0f);
  CHECK(run(spec(false, 5.0), mase_compat, w, {1, 2, 2, 4}) == std::vector<float>(16, 1.0f));
  CHECK(run(spec(false, 5.0), exact, w, {1, 2, 2, 4}) == std::vector<float>(16, 0.0f));
}

TEST_CASE("ternary: all-zero channels (exact 0, MASE NaN when scaled) and NaN") {
  std::vector<float> v(2 * 2 * 2 * 2, 0.0f);
  for (std::size_t i = 8; i < 16; ++i) v[i] = i % 2 ? 1.0f : -1.0f;
  const Shape shape{2, 2, 2, 2};
  const auto e = run(spec(true), exact, v, shape);
  for (std::size_t i = 0; i < 8; ++i) CHECK(qnum_test::same_bits(e[i], 0.0f));
  for (std::size_t i = 8; i < 16; ++i) CHECK(e[i] == v[i]);
  const auto m = run(spec(true), mase_compat, v, shape);
  for (std::size_t i = 0; i < 8; ++i) CHECK(std::isnan(m[i]));  // 0/0
  for (std::size_t i = 8; i < 16; ++i) CHECK(m[i] == v[i]);
  const auto m0 = run(spec(false), mase_compat, v, shape);
  for (std::size_t i = 0; i < 8; ++i) CHECK(qnum_test::same_bits(m0[i], 0.0f));
  // NaN anywhere in a channel poisons its delta: the channel is NaN (exact).
  v[9] = NAN;
  const auto n = run(spec(false), exact, v, shape);
  for (std::size_t i = 8; i < 16; ++i) CHECK(std::isnan(n[i]));
  CHECK(n[0] == 0.0f);
}

TEST_CASE("ternary: MASE needs 4-D tensors") {
  for (const Shape& shape : {Shape{8}, Shape{2, 4}, Shape{2, 2, 2}, Shape{1, 2, 2, 2, 1}}) {
    const std::vector<float> v(static_cast<std::size_t>(numel(shape)), 1.0f);
    for (bool scaling : {false, true}) {
      const auto msg = qnum_test::error_of([&] { (void)run(spec(scaling), mase_compat, v, shape); });
      CHECK(msg.find("ternary") != std::string::npos);
      CHECK(msg.find("4-D") != std::string::npos);
    }
    CHECK_NOTHROW((void)run(spec(true), exact, v, shape));
  }
}

TEST_CASE("ternary: MASE delta and alpha in float32 torch order") {
  // delta = (0.75f * sum|x|) / n = 0.75 here; comparisons are strict.
  const std::vector<float> v{2.0f, 1.5f, 1.0f, 0.75f, -0.75f, 1.0f, 0.0f, -1.0f};
  CHECK(run(spec(false), mase_compat, v, {1, 1, 2, 4}) == std::vector<float>{1, 1, 1, 0, 0, 1, 0, -1});
  // alpha = sum of |x| above delta / count = 6.5 / 5 in float32.
  const auto sc = run(spec(true), mase_compat, v, {1, 1, 2, 4});
  CHECK(sc[0] == 6.5f / 5.0f);
  CHECK(sc[7] == -(6.5f / 5.0f));
  // torch's sum order (8 float lanes, then the lanes left to right) decides the last bit.
  std::vector<float> w(24);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + static_cast<float>(i) * 0.1f;
  const auto mw = run(spec(true), mase_compat, w, {1, 2, 3, 4});
  const float delta = 0.75f * detail::torch_sum_f32(w.data(), 24) / 24.0f;
  std::vector<float> above;
  for (float x : w) above.push_back(x > delta ? x : 0.0f);
  std::vector<float> ones;
  for (float x : w) ones.push_back(x > delta ? 1.0f : 0.0f);
  const float alpha = detail::torch_sum_f32(above.data(), 24) / detail::torch_sum_f32(ones.data(), 24);
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(qnum_test::same_bits(mw[i], w[i] > delta ? alpha : 0.0f));
}

TEST_CASE("ternary: spec validation, codes, info and value type") {
  CHECK(qnum_test::error_of([] { spec(false, -1.0).validate(); }).find("threshold -1 must be finite and >= 0") !=
        std::string::npos);
  CHECK_THROWS_AS(spec(false, INFINITY).validate(), Error);
  KeyValues kv = KeyValues::parse("ternary:width=3").second;
  CHECK(qnum_test::error_of([&] { (void)TernarySpec::from_keys(kv); }).find("width 3 must be 2") != std::string::npos);

  const TernarySpec s = spec(false);
  CHECK(encode(s, 0.7f) == 1u);
  CHECK(encode(s, -0.7f) == 2u);
  CHECK(encode(s, 0.5f) == 0u);
  CHECK(encode(s, 0.2f, 0.1) == 1u);
  CHECK(decode(s, 0) == 0.0f);
  CHECK(decode(s, 1) == 1.0f);
  CHECK(decode(s, 2) == -1.0f);
  CHECK(decode(s, 3) == 0.0f);
  CHECK(decode(s, 2, 0.5f) == -0.5f);
  CHECK_THROWS_AS((void)encode(s, NAN), Error);
  CHECK(code_bits(s) == 2);
  const auto f = info(s, exact);
  CHECK(f.bits_per_value == 2);
  CHECK(f.distinct_values == 3);
  CHECK(f.value_set.find("1.585") != std::string::npos);
  CHECK(info(spec(true), mase_compat).value_set.find("4-D") != std::string::npos);

  static_assert(std::numeric_limits<Ternary>::is_specialized);
  static_assert(std::numeric_limits<Ternary>::lowest().value() == -1.0f);
  static_assert(std::numeric_limits<Ternary>::max().value() == 1.0f);
  static_assert(Ternary::from_code(3).value() == 0.0f);
  const Ternary a(0.8f), b(-3.0f), z(0.5f), w(-0.5f);
  CHECK(int(a) == 1);
  CHECK(int(b) == -1);
  CHECK(int(z) == 0);  // ties to 0
  CHECK(int(w) == 0);
  CHECK(a * b == Ternary(-1.0f));
  CHECK(a * z == Ternary(0.0f));
  CHECK(-b == a);
  CHECK(b < z);
  CHECK(to_binary(b) == "0b10");
  CHECK(to_binary(a) == "0b01");
  CHECK_THROWS_AS(Ternary(NAN), Error);
}
