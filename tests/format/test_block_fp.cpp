// block_fp: exact mode against an independent reference (frexp exponent, brute-force nearest
// over every mantissa), carry, saturation, specials, rounding modes, layout integration,
// codecs, the packed type, MASE quirks and spec validation.
#include <doctest/doctest.h>

#include <cfenv>
#include <cmath>
#include <random>

#include "format/conformance.hpp"
#include "qnum/format/block_fp.hpp"

using namespace qnum;
using qnum_test::describe;

namespace {

std::vector<float> run(const BlockFPSpec& s, const Policy& p, const std::vector<float>& x, const Shape& shape,
                       Role r = Role::weight) {
  std::vector<float> y(x.size());
  quantize(s, p, x, y, shape, r);
  return y;
}

/// Independent exact reference for one block (nearest even): shared e from frexp, carry
/// when some magnitude rounds to 2^M, saturation at the top exponent.
std::vector<double> reference(const BlockFPSpec& s, const std::vector<float>& x, int* e_out = nullptr) {
  const int M = s.mantissa_bits(), b = s.bias();
  const int emax = std::min((1 << s.exponent_width) - 1 - b, 128);
  double m = 0;
  for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  int e = -b;
  if (m > 0) {
    int ex;
    std::frexp(m, &ex);  // m = f * 2^ex, f in [0.5, 1)
    e = std::clamp(ex, -b, emax);
  }
  const double kmax = std::ldexp(1.0, M) - 1;
  auto k_of = [&](float v, int ee) {
    return std::nearbyint(std::fabs(static_cast<double>(v)) / std::ldexp(1.0, ee - M));
  };
  bool carry = false;
  for (float v : x) carry |= k_of(v, e) > kmax;
  if (carry && e < emax) ++e;
  if (e_out) *e_out = e;
  std::vector<double> out;
  for (float v : x) {
    const double q = std::min(k_of(v, e), kmax) * std::ldexp(1.0, e - M);
    out.push_back(std::signbit(v) ? -q : q);
  }
  return out;
}

/// A random block whose max lies in [2^(e-1), 2^e), with exact ties and grid points mixed in.
std::vector<float> random_block(std::mt19937& rng, int M, int n, int e) {
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> kind(0, 3);
  const double step = std::ldexp(1.0, e - M);
  std::vector<float> x;
  for (int i = 0; i < n; ++i) {
    double v;
    const double k = std::floor(u(rng) * (std::ldexp(1.0, M) - 1));
    switch (kind(rng)) {
      case 0:
        v = (k + 0.5) * step;
        break;  // exact tie
      case 1:
        v = k * step;
        break;  // on the grid
      case 2:
        v = std::nextafter(static_cast<float>((k + 0.5) * step), 0.0f);
        break;
      default:
        v = u(rng) * std::ldexp(1.0, e);
        break;
    }
    if (v >= std::ldexp(1.0, e)) v = std::ldexp(1.0, e - 1);
    x.push_back(static_cast<float>(u(rng) < 0.5 ? -v : v));
  }
  x[static_cast<std::size_t>(rng() % static_cast<unsigned>(n))] =
      static_cast<float>(std::ldexp(1.0 + u(rng) * 0.999, e - 1));
  return x;
}

}  // namespace

TEST_CASE("block_fp: exact results are on the block's grid and nearest (ties even), randomized") {
  std::mt19937 rng(12345);
  qnum_test::FailureLog ref, nearest;
  for (int W : {2, 4, 5, 8, 12}) {
    const BlockFPSpec s{W, 8, std::nullopt, {16}};
    const int M = s.mantissa_bits();
    for (int trial = 0; trial < 300; ++trial) {
      const int e = static_cast<int>(rng() % 41) - 20;
      const auto x = random_block(rng, M, 16, e);
      const auto y = run(s, exact, x, {16});
      int eb;
      const auto want = reference(s, x, &eb);
      const double step = std::ldexp(1.0, eb - M);
      for (std::size_t j = 0; j < x.size(); ++j) {
        if (!(static_cast<double>(y[j]) == want[j] && std::signbit(y[j]) == std::signbit(want[j])))
          ref.fail("W" + std::to_string(W) + " x " + describe(x[j]) + " got " + describe(y[j]) + " want " +
                   std::to_string(want[j]));
        // brute force: the nearest k*step over every k, ties to even k
        const double a = std::fabs(static_cast<double>(x[j]));
        double best = 0, bestd = INFINITY;
        for (double k = 0; k < std::ldexp(1.0, M); ++k) {
          const double d = std::fabs(k * step - a);
          if (d < bestd || (d == bestd && std::fmod(k, 2.0) == 0)) best = k * step, bestd = d;
        }
        if (std::fabs(static_cast<double>(y[j])) != best)
          nearest.fail("W" + std::to_string(W) + " x " + describe(x[j]) + " got " + describe(y[j]) + " nearest " +
                       std::to_string(best));
      }
    }
  }
  ref.check("exact == independent reference");
  nearest.check("exact == brute-force nearest on the block grid");
}

TEST_CASE("block_fp: idempotent and sign symmetric") {
  std::mt19937 rng(7);
  std::normal_distribution<float> n01;
  const BlockFPSpec s{6, 5, std::nullopt, {2, 8}};
  std::vector<float> x(5 * 37);
  for (auto& v : x) v = n01(rng) * std::exp2(static_cast<float>(rng() % 20) - 10.0f);
  const auto y = run(s, exact, x, {5, 37});
  CHECK(run(s, exact, y, {5, 37}) == y);
  std::vector<float> nx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) nx[i] = -x[i];
  const auto ny = run(s, exact, nx, {5, 37});
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(ny[i] == -y[i]);
}

TEST_CASE("block_fp: exact carry moves the shared exponent up") {
  const BlockFPSpec s{4, 8, std::nullopt, {4}};  // M = 3
  // 0.99999 has e = 0, step 1/8, and rounds to 8/8: the block moves to e = 1 (step 1/4)
  const auto y = run(s, exact, {0.99999f, 0.4f, -0.3f, 0.1f}, {4});
  CHECK(y == std::vector<float>{1.0f, 0.5f, -0.25f, 0.0f});
  const auto c = encode_block(s, std::vector<float>{0.99999f, 0.4f, -0.3f, 0.1f});
  CHECK(static_cast<int>(c.shared) - s.bias() == 1);
  // MASE: ceil exponent 0, no carry: clamps to 7/8
  const auto m = run(s, mase_compat, {0.99999f, 0.4f, -0.3f, 0.1f}, {4}, Role::bias);
  CHECK(m[0] == 0.875f);
  // exact powers of two are kept exactly (MASE loses one step)
  CHECK(run(s, exact, {1.0f, 0.5f, 0, 0}, {4})[0] == 1.0f);
  CHECK(run(s, mase_compat, {1.0f, 0.5f, 0, 0}, {4}, Role::bias)[0] == 0.875f);
}

TEST_CASE("block_fp: saturation, Inf and NaN") {
  const BlockFPSpec s{4, 2, 1, {4}};  // e in [-1, 2], max 7/8 * 4 = 3.5
  CHECK(info(s, exact).max == 3.5);
  CHECK(run(s, exact, {100, -50, 1, 0.75f}, {4}) == std::vector<float>{3.5f, -3.5f, 1, 1});  // step 1/2
  CHECK(run(s, exact, {3.9f, 1, 0, 0}, {4})[0] == 3.5f);  // carry impossible at the top: saturate
  CHECK(run(s, exact, {INFINITY, -1.2f, 0, 0}, {4}) == std::vector<float>{3.5f, -1.0f, 0, 0});
  CHECK(run(s, exact, {-INFINITY, 0.1f, 0, 0}, {4})[0] == -3.5f);
  const auto n = run(s, exact, {NAN, 1, 2, 3, 1, 2, 3, 0.5f}, {8});
  for (int i = 0; i < 4; ++i) CHECK(std::isnan(n[static_cast<std::size_t>(i)]));
  CHECK(n[4] == 1.0f);
  // smallest step: block below 2^-1 uses e = -1 -> step 2^-4
  CHECK(run(s, exact, {0.03125f, 0.0625f, 0.01f, 0}, {4}) == std::vector<float>{0.0f, 0.0625f, 0, 0});
  // MASE: inf makes the exponent 2^E-1-b; with E=8 that is 2^128 = inf -> the block is NaN
  const BlockFPSpec d{8, 8, std::nullopt, {4}};
  const auto mi = run(d, mase_compat, {INFINITY, 1, 0, 2}, {4}, Role::bias);
  for (float v : mi) CHECK(std::isnan(v));
  const auto ei = run(d, exact, {INFINITY, 1, 0, 2}, {4}, Role::bias);
  CHECK(ei[0] == static_cast<float>((1 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 128)));
  CHECK(ei[1] == 0.0f);
}

TEST_CASE("block_fp: rounding modes and stochastic rounding") {
  const BlockFPSpec s{4, 8, std::nullopt, {4}};  // block max 1.5 -> e = 1, step 1/4
  const std::vector<float> x{1.5f, 0.3f, -0.3f, 0.125f};
  CHECK(run(s, exact.with(Rounding::floor), x, {4}) == std::vector<float>{1.5f, 0.25f, -0.5f, 0});
  CHECK(run(s, exact.with(Rounding::ceil), x, {4}) == std::vector<float>{1.5f, 0.5f, -0.25f, 0.25f});
  CHECK(run(s, exact.with(Rounding::toward_zero), x, {4}) == std::vector<float>{1.5f, 0.25f, -0.25f, 0});
  CHECK(run(s, exact.with(Rounding::nearest_away), x, {4}) == std::vector<float>{1.5f, 0.25f, -0.25f, 0.25f});
  CHECK(run(s, exact, x, {4}) == std::vector<float>{1.5f, 0.25f, -0.25f, 0});
  // stochastic: one of the two neighbours, reproducible by seed, mean close to x
  std::vector<float> big(4096, 0.3f);
  big[0] = 1.5f;
  const auto p = exact.with(Rounding::stochastic).with_seed(42);
  const auto a = run(BlockFPSpec{4, 8, std::nullopt, {4096}}, p, big, {4096});
  CHECK(a == run(BlockFPSpec{4, 8, std::nullopt, {4096}}, p, big, {4096}));
  double sum = 0;
  for (std::size_t i = 1; i < a.size(); ++i) {
    CHECK((a[i] == 0.25f || a[i] == 0.5f));
    sum += a[i];
  }
  CHECK(std::fabs(sum / 4095 - 0.3) < 0.01);
  // ceil on a value just below the top forces a carry
  CHECK(run(s, exact.with(Rounding::ceil), {1.9f, 0.3f, 0, 0}, {4}) == std::vector<float>{2.0f, 0.5f, 0, 0});
}

TEST_CASE("block_fp: tensor quantize equals per-tile 1-D blocks (exact layout)") {
  std::mt19937 rng(3);
  std::normal_distribution<float> n01;
  const BlockFPSpec s{5, 8, std::nullopt, {2, 8}};
  const Shape shape{5, 37};
  std::vector<float> x(185);
  for (auto& v : x) v = n01(rng);
  const auto y = run(s, exact, x, shape);
  const auto L = exact_block_layout(shape, s.block_size);
  bool ok = true;
  for_each_tile(L, [&](std::int64_t, std::span<const std::int64_t> idx) {
    std::vector<float> bx;
    for (auto i : idx) bx.push_back(x[static_cast<std::size_t>(i)]);
    const auto d = decode_block(s, encode_block(s, bx));
    for (std::size_t j = 0; j < idx.size(); ++j) ok &= d[j] == y[static_cast<std::size_t>(idx[j])];
  });
  CHECK(ok);
  // in-place (out aliases in)
  auto z = x;
  quantize(s, exact, z, z, shape);
  CHECK(z == y);
}

TEST_CASE("block_fp: packed BlockFP round trips and equals exact quantize") {
  std::mt19937 rng(99);
  std::normal_distribution<float> n01;
  for (int t = 0; t < 200; ++t) {
    std::array<float, 16> x{};
    const float scale = std::exp2(static_cast<float>(rng() % 60) - 30.0f);
    for (auto& v : x) v = n01(rng) * scale;
    if (t % 7 == 0) x[3] = 0.99999f * scale;
    const std::vector<float> xv(x.begin(), x.end());
    const auto b8 = BlockFP<7, 8, 16>::from_floats(x);
    const auto y8 = b8.to_floats();
    const auto q8 = run(BlockFP<7, 8, 16>::spec(), exact, xv, {16});
    CHECK(std::vector<float>(y8.begin(), y8.end()) == q8);
    CHECK(BlockFP<7, 8, 16>::from_floats(y8).to_floats() == y8);
    const auto b4 = BlockFP<3, 8, 16>::from_floats(x);
    const auto q4 = run(BlockFP<3, 8, 16>::spec(), exact, xv, {16});
    const auto y4 = b4.to_floats();
    CHECK(std::vector<float>(y4.begin(), y4.end()) == q4);
  }
  static_assert(sizeof(BlockFP<7, 8, 16>) == 17);
  static_assert(sizeof(BlockFP<3, 8, 32>) == 17);
  static_assert(sizeof(BlockFP<11, 5, 8>) == 13);
  CHECK(BlockFP<7, 8, 16>::max() == static_cast<float>((1 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 128)));
  CHECK(BlockFP<7, 8, 16>::min() == std::ldexp(1.0f, -134));
  CHECK(BlockFP<7, 8, 16>::bits_per_value == 8.5);
  std::array<float, 4> one{1.0f, -0.5f, 0, 0.25f};
  const auto b = BlockFP<3, 4, 4>::from_floats(one);  // bias 7, e = 1 -> field 8
  CHECK(to_binary(b) == "0b1000 | 0.100 1.010 0.000 0.001");
  using B344 = BlockFP<3, 4, 4>;
  const std::array<float, 4> nan_block{NAN, 0, 0, 0};
  CHECK_THROWS_AS((void)B344::from_floats(nan_block), Error);
}

TEST_CASE("block_fp: encode_block/decode_block") {
  const BlockFPSpec s{4, 8, std::nullopt, {4}};
  const std::vector<float> x{1.5f, -0.3f, 0.0f, -0.0f};
  const auto c = encode_block(s, x);
  CHECK(c.shared == 128);  // e = 1, bias 127
  CHECK(c.codes == std::vector<std::uint32_t>{6, 8 | 1, 0, 8});
  const auto d = decode_block(s, c);
  CHECK(d == run(s, exact, x, {4}));
  CHECK(std::signbit(d[3]));
  CHECK(encode_block(s, std::vector<float>{0, 0}).shared == 0);  // zero block: smallest exponent
}

TEST_CASE("block_fp: MASE quirks (pass-through, epsilon, fold turns -0 into +0)") {
  const BlockFPSpec s{8, 8, std::nullopt, {4}};
  // |x| <= 1e-8 passes through unquantized; exact flushes
  const std::vector<float> x{1.0f, 5e-9f, -5e-9f, -1e-7f};
  const auto m = run(s, mase_compat, x, {4}, Role::bias);
  CHECK(m[1] == 5e-9f);
  CHECK(m[2] == -5e-9f);
  CHECK(m[3] == 0.0f);
  CHECK(std::signbit(m[3]));  // bias path keeps -0
  const auto e = run(s, exact, x, {4});
  CHECK(e[1] == 0.0f);
  // weight path (F.fold) turns that -0 into +0
  const auto w = run(s, mase_compat, x, {1, 4}, Role::weight);
  CHECK(w[3] == 0.0f);
  CHECK_FALSE(std::signbit(w[3]));
  // -0 input: +0 in MASE (0*q + -0), -0 in exact
  CHECK_FALSE(std::signbit(run(s, mase_compat, {1.0f, -0.0f}, {2}, Role::bias)[1]));
  CHECK(std::signbit(run(s, exact, {1.0f, -0.0f}, {2})[1]));
  // +1e-9 breaks ties upward in MASE where it exceeds half an ulp (|x| < ~0.0168):
  // max 0.015 -> e = -6, step 2^-13; 2.5 steps is a tie
  const float tie = 2.5f * std::ldexp(1.0f, -13);
  CHECK(run(s, mase_compat, {0.015f, tie}, {2}, Role::bias)[1] == 3 * std::ldexp(1.0f, -13));
  CHECK(run(s, exact, {0.015f, tie}, {2})[1] == 2 * std::ldexp(1.0f, -13));
}

TEST_CASE("block_fp: info") {
  const BlockFPSpec s{8, 8, std::nullopt, {1, 16}};
  const auto f = info(s, exact);
  CHECK(f.bits_per_value == 8.5);
  CHECK(f.min_positive == std::ldexp(1.0, -134));
  CHECK(f.max == (1 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 128));
  CHECK(f.distinct_values == 255);
  CHECK(f.value_set.find("k in [0, 127]") != std::string::npos);
  CHECK(info(BlockFPSpec{4, 8, std::nullopt, {16}}, mase_compat).bits_per_value == 4.5);
}

TEST_CASE("block_fp: invalid specs are rejected with messages") {
  auto msg = [](BlockFPSpec s) {
    try {
      s.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(valid)");
  };
  CHECK(msg({1, 8, std::nullopt, {16}}) == "block_fp: width 1 must be in [2, 24]");
  CHECK(msg({8, 9, std::nullopt, {16}}) == "block_fp: exponent_width 9 must be in [1, 8]");
  CHECK(msg({8, 8, 200, {16}}).find("block_fp: exponent_bias 200 must be in [-128, 142]") == 0);
  CHECK(msg({8, 8, -129, {16}}).find("block_fp: exponent_bias -129") == 0);
  CHECK(msg({8, 8, std::nullopt, {0}}) == "block_fp: block_size 0 must be >= 1 (or -1 for a whole dim)");
  CHECK(msg({8, 8, std::nullopt, {-2, 4}}).find("block_size -2") != std::string::npos);
  CHECK(msg({8, 8, std::nullopt, {1, 1, 1, 16}}).find("1 to 3 entries") != std::string::npos);
  CHECK(msg({8, 8, std::nullopt, {}}).find("1 to 3 entries") != std::string::npos);
  CHECK(msg({8, 8, std::nullopt, {16}}) == "(valid)");  // MASE's default (emax 128) is valid
  std::vector<float> x(4), y(4);
  CHECK_THROWS_AS(quantize(BlockFPSpec{1, 8, std::nullopt, {4}}, exact, x, y, {4}), Error);
  CHECK_THROWS_WITH_AS(quantize(BlockFPSpec{}, exact, x, y, {5}), doctest::Contains("block_fp: input has 4"), Error);
}
