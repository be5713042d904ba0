// block_log: exact mode (log-domain rounding, bias from the rounded block max) against an
// independent double log2 reference; codecs and the packed type; MASE quirks; validation.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/block_log.hpp"

using namespace qnum;
using qnum_test::describe;

namespace {

std::vector<float> run(const BlockLogSpec& s, const Policy& p, const std::vector<float>& x, const Shape& shape,
                       Role r = Role::weight) {
  std::vector<float> y(x.size());
  quantize(s, p, x, y, shape, r);
  return y;
}

/// Independent reference: exponents by nearbyint(log2) in double (a float is never within
/// double error of 2^(k+1/2)).
std::vector<float> reference(const BlockLogSpec& s, const std::vector<float>& x) {
  double mx = 0;
  for (float v : x) mx = std::max(mx, std::fabs(static_cast<double>(v)));
  const int top = (1 << (s.width - 1)) - 1, bmax = (1 << s.exponent_bias_width) - 1;
  int b = bmax;
  if (mx > 0) b = std::clamp(top - std::min(static_cast<int>(std::nearbyint(std::log2(mx))), 127), 0, bmax);
  std::vector<float> out;
  for (float v : x) {
    int e = -b;
    if (v != 0)
      e = std::clamp(static_cast<int>(std::nearbyint(std::log2(std::fabs(static_cast<double>(v))))), -b, top - b);
    const auto m = static_cast<float>(std::ldexp(1.0, e));
    out.push_back(v < 0 ? -m : m);
  }
  return out;
}

}  // namespace

TEST_CASE("block_log: exact results equal the log-domain reference, randomized") {
  std::mt19937 rng(77);
  std::uniform_real_distribution<double> u(-1, 1);
  qnum_test::FailureLog ref;
  const int configs[][2] = {{8, 8}, {4, 4}, {6, 5}, {3, 2}, {8, 3}, {5, 8}};
  for (const auto& cfg : configs) {
    const BlockLogSpec s{cfg[0], cfg[1], {16}};
    for (int trial = 0; trial < 200; ++trial) {
      const int e = static_cast<int>(rng() % 60) - 30;
      std::vector<float> x(16);
      for (auto& v : x) v = static_cast<float>(std::ldexp(u(rng), e - static_cast<int>(rng() % 10)));
      x[rng() % 16] = static_cast<float>(std::sqrt(2.0) * std::ldexp(1.0, e - 3));  // near the threshold
      x[rng() % 16] = 0.0f;
      const auto y = run(s, exact, x, {16});
      const auto want = reference(s, x);
      for (std::size_t j = 0; j < x.size(); ++j)
        if (!qnum_test::same_bits(y[j], want[j]))
          ref.fail("W" + std::to_string(cfg[0]) + " x " + describe(x[j]) + " got " + describe(y[j]) + " want " +
                   describe(want[j]));
    }
  }
  ref.check("exact == log-domain reference");
}

TEST_CASE("block_log: geometric-mean threshold, bias, zeros, saturation") {
  const BlockLogSpec s{4, 4, {4}};  // exponents [-b, 7-b], b in [0, 15]
  // max 1.42 rounds (log domain) to 2^1: b = 6, exponents [-6, 1]
  CHECK(run(s, exact, {1.42f, 1.41f, 0.0f, -0.01f}, {4}) == std::vector<float>{2.0f, 1.0f, 0.015625f, -0.015625f});
  CHECK(encode_block(s, std::vector<float>{1.42f}).shared == 6u);
  // MASE: b = 7 - ceil(log2 1.42) = 6 too; zero -> +2^-6
  CHECK(run(s, mase_compat, {1.42f, 1.41f, 0.0f, -0.01f}, {4}, Role::bias) ==
        std::vector<float>{2.0f, 1.0f, 0.015625f, -0.015625f});
  // max 1.2: exact top exponent 0 (b = 7), MASE's ceil gives 1 (b = 6)
  CHECK(encode_block(s, std::vector<float>{1.2f}).shared == 7u);
  CHECK(run(s, exact, {1.2f, 0.0f}, {2})[1] == 0.0078125f);
  CHECK(run(s, mase_compat, {1.2f, 0.0f}, {2}, Role::bias)[1] == 0.015625f);
  // W8 bw4: the bias saturates at 15 for any realistic block -> plain log with b = 15
  const BlockLogSpec d{8, 4, {4}};
  CHECK(run(d, mase_compat, {0.3f, 0.0f}, {2}, Role::bias)[1] == std::ldexp(1.0f, -15));
  CHECK(run(d, exact, {0.3f, 0.0f}, {2})[1] == std::ldexp(1.0f, -15));
  // Inf saturates at 2^127 (or the top exponent), NaN -> NaN block
  CHECK(run(BlockLogSpec{9, 8, {2}}, exact, {INFINITY, 1.0f}, {2})[0] == std::ldexp(1.0f, 127));
  CHECK(run(s, exact, {-INFINITY, 1.0f}, {2})[0] == -128.0f);  // b = 0: top exponent 7
  const auto n = run(s, exact, {NAN, 1, 1, 1, 1, 1, 1, 1}, {8});
  CHECK(std::isnan(n[0]));
  CHECK(n[4] == 1.0f);
  // all-zero block: finest bias
  CHECK(run(s, exact, {0, 0}, {2})[0] == std::ldexp(1.0f, -15));
}

TEST_CASE("block_log: rounding modes") {
  const BlockLogSpec s{6, 6, {4}};
  const std::vector<float> x{8.0f, 3.0f, -3.0f, 1.1f};
  CHECK(run(s, exact, x, {4}) == std::vector<float>{8, 4, -4, 1});
  CHECK(run(s, exact.with(Rounding::floor), x, {4}) == std::vector<float>{8, 2, -4, 1});
  CHECK(run(s, exact.with(Rounding::ceil), x, {4}) == std::vector<float>{8, 4, -2, 2});
  CHECK(run(s, exact.with(Rounding::toward_zero), x, {4}) == std::vector<float>{8, 2, -2, 1});
  const auto p = exact.with(Rounding::stochastic).with_seed(3);
  std::vector<float> big(4096, 3.0f);
  const BlockLogSpec sb{6, 6, {4096}};
  const auto a = run(sb, p, big, {4096});
  double sum = 0;
  for (float v : a) {
    CHECK((v == 2.0f || v == 4.0f));
    sum += v;
  }
  CHECK(std::fabs(sum / 4096 - 3.0) < 0.05);  // unbiased in value
}

TEST_CASE("block_log: packed BlockLog and codecs agree with exact quantize") {
  std::mt19937 rng(11);
  std::normal_distribution<float> n01;
  for (int t = 0; t < 200; ++t) {
    std::array<float, 16> x{};
    const float scale = std::exp2(static_cast<float>(rng() % 40) - 20.0f);
    for (auto& v : x) v = n01(rng) * scale;
    if (t % 5 == 0) x[2] = 0.0f;
    const std::vector<float> xv(x.begin(), x.end());
    const auto b = BlockLog<8, 8, 16>::from_floats(x);
    const auto y = b.to_floats();
    CHECK(std::vector<float>(y.begin(), y.end()) == run(BlockLog<8, 8, 16>::spec(), exact, xv, {16}));
    CHECK(BlockLog<8, 8, 16>::from_floats(y).to_floats() == y);
    const auto b4 = BlockLog<4, 4, 16>::from_floats(x);
    const auto y4 = b4.to_floats();
    CHECK(std::vector<float>(y4.begin(), y4.end()) == run(BlockLog<4, 4, 16>::spec(), exact, xv, {16}));
    const auto s = BlockLog<4, 4, 16>::spec();
    CHECK(decode_block(s, encode_block(s, xv)) == std::vector<float>(y4.begin(), y4.end()));
  }
  static_assert(sizeof(BlockLog<8, 8, 16>) == 17);
  static_assert(sizeof(BlockLog<4, 4, 32>) == 17);
  CHECK(BlockLog<4, 4, 4>::max() == 128.0f);
  CHECK(BlockLog<4, 4, 4>::min() == std::ldexp(1.0f, -15));
  CHECK(BlockLog<4, 4, 4>::bits_per_value == 5.0);
  const std::array<float, 4> x{1.42f, 1.41f, 0.0f, -0.01f};  // b = 6 (see above)
  CHECK(to_binary(BlockLog<4, 4, 4>::from_floats(x)) == "0b0110 | 0.111 0.110 0.000 1.000");
  const std::array<float, 4> nan_block{NAN, 0, 0, 0};
  using B444 = BlockLog<4, 4, 4>;
  CHECK_THROWS_AS((void)B444::from_floats(nan_block), Error);
}

TEST_CASE("block_log: info and validation") {
  const BlockLogSpec s{8, 4, {16}};
  const auto f = info(s, mase_compat);
  CHECK(f.bits_per_value == 8.25);
  CHECK(f.distinct_values == 256);
  CHECK(f.min_positive == std::ldexp(1.0, -15));
  CHECK(f.max == std::ldexp(1.0, 127));
  auto msg = [](BlockLogSpec t) {
    try {
      t.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(valid)");
  };
  CHECK(msg({10, 4, {16}}) == "block_log: width 10 must be in [2, 9]");
  CHECK(msg({8, 0, {16}}) == "block_log: exponent_bias_width 0 must be in [1, 8]");
  CHECK(msg({8, 4, {16, 0}}).find("block_log: block_size 0") == 0);
  CHECK(msg({8, 4, {-1}}) == "(valid)");
}
