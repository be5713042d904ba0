// block_minifloat: exact mode (paper-orientation signed bias, correctly rounded minifloat_ieee
// elements) against an independent enumeration of each block's grid; codecs; MASE's
// inverted bias and no-carry quirks; validation.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "format/conformance.hpp"
#include "qnum/format/block_minifloat.hpp"

using namespace qnum;
using qnum_test::describe;

namespace {

std::vector<float> run(const BlockMinifloatSpec& s, const Policy& p, const std::vector<float>& x, const Shape& shape,
                       Role r = Role::weight) {
  std::vector<float> y(x.size());
  quantize(s, p, x, y, shape, r);
  return y;
}

/// Independent: the paper bias of a block and the sorted magnitudes of its grid, each with
/// its integer significand (for ties to even).
int paper_bias(const BlockMinifloatSpec& s, double max) {
  const int lo = -(1 << (s.exponent_bias_width - 1)), hi = (1 << (s.exponent_bias_width - 1)) - 1;
  if (max == 0) return hi;
  int ex;
  std::frexp(max, &ex);  // floor(log2 max) = ex - 1
  return std::clamp((1 << s.exponent_width) - 1 - (ex - 1), lo, hi);
}
std::vector<std::pair<double, long>> grid(const BlockMinifloatSpec& s, int b) {
  const int M = s.mantissa_bits();
  std::vector<std::pair<double, long>> g;
  for (long k = 0; k < (1L << M); ++k) g.emplace_back(std::ldexp(static_cast<double>(k), 1 - b - M), k);
  for (int e = 1 - b; e <= (1 << s.exponent_width) - 1 - b; ++e)
    for (long k = 0; k < (1L << M); ++k) g.emplace_back(std::ldexp(static_cast<double>((1L << M) + k), e - M), k);
  return g;
}

}  // namespace

TEST_CASE("block_minifloat: exact results are the nearest value of the block's grid (ties even), randomized") {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> u(0, 1);
  qnum_test::FailureLog nearest;
  const int configs[][3] = {{8, 4, 8}, {6, 3, 4}, {8, 2, 3}, {5, 1, 2}, {8, 5, 8}};
  for (const auto& cfg : configs) {
    const int W = cfg[0], E = cfg[1];
    const BlockMinifloatSpec s{W, E, cfg[2], {8}};
    for (int trial = 0; trial < 150; ++trial) {
      const int ebase = static_cast<int>(rng() % 30) - 15;
      std::vector<float> x(8);
      for (auto& v : x) {
        v = static_cast<float>(std::ldexp(u(rng), ebase - static_cast<int>(rng() % 12)));
        if (rng() % 2) v = -v;
      }
      double mx = 0;
      for (float v : x) mx = std::max(mx, std::fabs(static_cast<double>(v)));
      const int b = paper_bias(s, mx);
      const auto g = grid(s, b);
      // plant exact midpoints of the grid
      for (int j = 0; j < 3; ++j) {
        const std::size_t i = rng() % (g.size() - 1);
        const double mid = (g[i].first + g[i + 1].first) / 2;
        auto& t = x[static_cast<std::size_t>(j + 1)];
        if (mid < mx && std::fabs(static_cast<double>(t)) < mx) t = static_cast<float>(mid);  // keep the max
      }
      const auto y = run(s, exact, x, {8});
      for (std::size_t j = 0; j < x.size(); ++j) {
        const double a = std::fabs(static_cast<double>(x[j]));
        double best = 0, bestd = INFINITY;
        long bestk = 0;
        for (const auto& [v, k] : g) {
          const double d = std::fabs(v - a);
          if (d < bestd || (d == bestd && k % 2 == 0 && bestk % 2 != 0)) best = v, bestd = d, bestk = k;
        }
        if (a > g.back().first) best = g.back().first;  // saturate
        if (std::fabs(static_cast<double>(y[j])) != best || std::signbit(y[j]) != std::signbit(x[j]))
          nearest.fail("W" + std::to_string(W) + "E" + std::to_string(E) + " b " + std::to_string(b) + " x " +
                       describe(x[j]) + " got " + describe(y[j]) + " nearest " + std::to_string(best));
      }
    }
  }
  nearest.check("exact == nearest on the block grid");
}

TEST_CASE("block_minifloat: exact bias orientation puts the block max in the top binade") {
  const BlockMinifloatSpec s{8, 4, 8, {4}};
  // max 1024 = 2^10: b = 15 - 10 = 5, top binade [2^10, 2^11): 1024 exact. MASE: b = 10 -> max 60
  CHECK(run(s, exact, {1024, 3, 0.5f, -200}, {4}) == std::vector<float>{1024, 3, 0.5f, -192});
  CHECK(run(s, mase_compat, {1024, 3, 0.5f, -200}, {4}, Role::bias)[0] == 60.0f);
  // small blocks: MASE's bias clamps to 0 (subnormal step 0.25) and BERT-like weights vanish
  const std::vector<float> w{0.05f, -0.07f, 0.09f, 0.03f};
  for (float v : run(s, mase_compat, w, {4}, Role::bias)) CHECK(v == 0.0f);
  const auto e = run(s, exact, w, {4});
  CHECK(e == std::vector<float>{0.05078125f, -0.0703125f, 0.09375f, 0.029296875f});
  const auto c = encode_block(s, w);
  CHECK(c.shared == 19);  // 15 - floor(log2 0.09) = 15 + 4
  // a max in the top half-ulp of the top binade saturates (no room to carry)
  CHECK(run(s, exact, {1.97f, 1.0f, 0, 0}, {4})[0] == 1.875f);
  // MASE: b = 0 makes [1, 2) the subnormal slot (step 1/4), and no carry: 1.97 -> 1.75
  CHECK(run(s, mase_compat, {1.97f, 1.0f, 0, 0}, {4}, Role::bias)[0] == 1.75f);
  // exact carries inside the grid: 1.97 next to a block max of 3 -> 2
  CHECK(run(s, exact, {3.0f, 1.97f, 0, 0}, {4})[1] == 2.0f);
}

TEST_CASE("block_minifloat: signed bias field, codecs, zero / Inf / NaN blocks") {
  const BlockMinifloatSpec s{8, 4, 4, {4}};  // bias in [-8, 7]
  // huge max: b = 15 - 20 = -5 (negative field)
  const std::vector<float> big{1048576.0f, 3.0e5f, -1.0f, 0};
  const auto c = encode_block(s, big);
  CHECK(c.shared == 0b1011u);  // -5 in 4-bit two's complement
  CHECK(decode_block(s, c) == run(s, exact, big, {4}));
  // tiny max clamps at +7: the grid is coarser than the block wants
  const std::vector<float> tiny{1e-4f, 5e-5f, 0, 0};
  CHECK(encode_block(s, tiny).shared == 7u);
  CHECK(run(s, exact, tiny, {4}) == std::vector<float>{0.0f, 0.0f, 0, 0});  // step 2^(1-7-3) = 2^-9
  // zero block: finest bias, zeros kept with sign
  const auto z = run(s, exact, {0.0f, -0.0f, 0, 0}, {4});
  CHECK(std::signbit(z[1]));
  CHECK(encode_block(s, std::vector<float>{0, 0}).shared == 7u);
  // Inf: the bias of a 2^127 max (15 - 127, clamped to -8) and the Inf saturates; NaN -> NaN block
  const auto inf = run(s, exact, {INFINITY, -INFINITY, 1, 0}, {4});
  CHECK(inf[0] == static_cast<float>(1.875 * std::ldexp(1.0, 23)));
  CHECK(inf[1] == -inf[0]);
  const auto n = run(s, exact, {NAN, 1, 1, 1, 1, 1, 1, 1}, {8});
  CHECK(std::isnan(n[3]));
  CHECK(n[4] == 1.0f);
  CHECK_THROWS_AS((void)encode_block(s, std::vector<float>{NAN}), Error);
  // codes: sign, 4-bit field, 3-bit mantissa; b = 15 for max 1
  const auto one = encode_block(s, std::vector<float>{1.0f, -1.5f, 0.0f});
  CHECK(one.shared == 7u);  // clamped from 15
  CHECK(decode_block(s, one) == std::vector<float>{1.0f, -1.5f, 0.0f});
}

TEST_CASE("block_minifloat: idempotent, sign symmetric, in-place") {
  std::mt19937 rng(5);
  std::normal_distribution<float> n01;
  const BlockMinifloatSpec s{7, 3, 5, {3, 5}};
  const Shape shape{7, 11};
  std::vector<float> x(77);
  for (auto& v : x) v = n01(rng) * std::exp2(static_cast<float>(rng() % 16) - 8.0f);
  const auto y = run(s, exact, x, shape);
  CHECK(run(s, exact, y, shape) == y);
  std::vector<float> nx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) nx[i] = -x[i];
  const auto ny = run(s, exact, nx, shape);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(ny[i] == -y[i]);
  auto z = x;
  quantize(s, exact, z, z, shape);
  CHECK(z == y);
  // stochastic rounding: reproducible, always a neighbour
  const auto p = exact.with(Rounding::stochastic).with_seed(9);
  const auto a = run(s, p, x, shape);
  CHECK(a == run(s, p, x, shape));
  const auto lo = run(s, exact.with(Rounding::floor), x, shape), hi = run(s, exact.with(Rounding::ceil), x, shape);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK((a[i] == lo[i] || a[i] == hi[i]));
}

TEST_CASE("block_minifloat: info and validation") {
  const BlockMinifloatSpec s{8, 4, 8, {16}};
  const auto f = info(s, exact);
  CHECK(f.bits_per_value == 8.5);
  CHECK(f.distinct_values == 255);
  CHECK(f.min_positive == std::ldexp(1.0, 1 - 127 - 3));
  CHECK(f.max == 1.875 * std::ldexp(1.0, 127));
  const auto m = info(s, mase_compat);
  CHECK(m.max == 1.875 * std::ldexp(1.0, 15));
  CHECK(m.min_positive == std::ldexp(1.0, 1 - 255 - 3));
  auto msg = [](BlockMinifloatSpec t) {
    try {
      t.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(valid)");
  };
  CHECK(msg({10, 8, 8, {16}}) == "block_minifloat: exponent_width 8 must be <= 6");
  CHECK(msg({8, 8, 0, {16}}).find("block_minifloat: exponent_width 8") == 0);
  CHECK(msg({8, 4, 9, {16}}) == "block_minifloat: exponent_bias_width 9 must be in [1, 8]");
  CHECK(msg({8, 4, 8, {0}}).find("block_minifloat: block_size 0") == 0);
  CHECK(msg({8, 4, 8, {16}}) == "(valid)");
}
