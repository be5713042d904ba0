// Core primitives: Philox known answers, integer rounding modes, the float grid rounder.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "qnum/core/policy.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/core/round.hpp"

using namespace qnum;

TEST_CASE("core: Philox4x32-10 matches the Random123 known-answer vectors") {
  const auto a = CounterRng(0).draw(0, 0);
  CHECK(a[0] == 0x6627e8d5u);
  CHECK(a[1] == 0xe169c58du);
  CHECK(a[2] == 0xbc57ac4cu);
  CHECK(a[3] == 0x9b00dbd8u);
  const auto b = CounterRng(~0ull).draw(~0ull, ~0ull);
  CHECK(b[0] == 0x408f276du);
  CHECK(b[1] == 0x41c83b0eu);
  CHECK(b[2] == 0xa20bc7c6u);
  CHECK(b[3] == 0x6d5451fdu);
  static_assert(CounterRng(1).draw(5)[0] == CounterRng(1).draw(5)[0]);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const float u = CounterRng(9).uniform(static_cast<std::uint64_t>(i));
    CHECK((u >= 0.0f && u < 1.0f));
    sum += u;
  }
  CHECK(sum / 100000 == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("core: CounterRng::uniform_n gives uniform(first + i), code for code") {
  std::vector<float> out(1000 + 13);
  for (const std::uint64_t seed : {0ull, 0x123456789abcdefull, ~0ull})
    for (const std::uint64_t first : {0ull, 7ull, 0xfffffff0ull, ~0ull - 2000}) {
      const CounterRng rng(seed);
      rng.uniform_n(first, out.size(), out.data());
      std::size_t bad = 0;
      for (std::size_t i = 0; i < out.size(); ++i) bad += out[i] != rng.uniform(first + i);
      CHECK_MESSAGE(bad == 0, "seed ", seed, " first ", first);
    }
}

TEST_CASE("core: CounterRng::uniform4_n gives uniform4(first + i), and uniform4 uses every word once") {
  std::vector<float> out(1000 + 13);
  for (const std::uint64_t seed : {0ull, 0x123456789abcdefull, ~0ull})
    for (const std::uint64_t first : {0ull, 7ull, 64ull, 0xfffffff0ull, ~0ull - 2000}) {
      const CounterRng rng(seed);
      rng.uniform4_n(first, out.size(), out.data());
      std::size_t bad = 0;
      for (std::size_t i = 0; i < out.size(); ++i) bad += out[i] != rng.uniform4(first + i);
      CHECK_MESSAGE(bad == 0, "seed ", seed, " first ", first);
    }
  // element 64 c + 16 w + l is word w of draw 16 c + l
  const CounterRng rng(99);
  for (const std::uint64_t i : {0ull, 5ull, 17ull, 63ull, 64ull, 1000ull, 123456789ull}) {
    const auto d = rng.draw(16 * (i / 64) + i % 16);
    CHECK(rng.uniform4(i) == static_cast<float>(d[(i % 64) / 16] >> 8) * (1.0f / 16777216.0f));
  }
  CHECK(rng.uniform4(0) == rng.uniform(0));  // word 0 of draw 0
  double sum = 0;
  std::vector<float> many(1 << 16);
  rng.uniform4_n(0, many.size(), many.data());
  for (const float v : many) sum += v;
  CHECK(sum / static_cast<double>(many.size()) == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("core: round_int under every mode") {
  using detail::round_int;
  struct Row {
    double v, even, away, zero, down, up;
  };
  const Row rows[] = {
      {2.5, 2, 3, 2, 2, 3},       {3.5, 4, 4, 3, 3, 4}, {-2.5, -2, -3, -2, -3, -2},       {2.4, 2, 2, 2, 2, 3},
      {-2.6, -3, -3, -2, -3, -2}, {0.5, 0, 1, 0, 0, 1}, {-0.5, -0.0, -1, -0.0, -1, -0.0}, {7, 7, 7, 7, 7, 7}};
  for (const auto& r : rows) {
    CAPTURE(r.v);
    CHECK(round_int(r.v, Rounding::nearest_even) == r.even);
    CHECK(round_int(r.v, Rounding::nearest_away) == r.away);
    CHECK(round_int(r.v, Rounding::toward_zero) == r.zero);
    CHECK(round_int(r.v, Rounding::floor) == r.down);
    CHECK(round_int(r.v, Rounding::ceil) == r.up);
  }
  CHECK(std::signbit(round_int(-0.2, Rounding::nearest_even)));  // like torch.round
  CHECK(round_int(2.25, Rounding::stochastic, 0.1f) == 3.0);
  CHECK(round_int(2.25, Rounding::stochastic, 0.3f) == 2.0);
  static_assert(detail::round_int(2.5, Rounding::nearest_even) == 2.0);
}

TEST_CASE("core: float grid rounding carries and handles subnormals") {
  const detail::FloatGrid e4m3{4, -6, 448.0, true};                                // precision M+1 = 4, min normal 2^-6
  CHECK(detail::round_to_grid(e4m3, 1.99, false, Rounding::nearest_even) == 2.0);  // carry
  CHECK(detail::round_to_grid(e4m3, 1.0625, false, Rounding::nearest_even) == 1.0);               // tie to even
  CHECK(detail::round_to_grid(e4m3, 1.1875, false, Rounding::nearest_even) == 1.25);              // tie to even
  CHECK(detail::round_to_grid(e4m3, 0.0029296875, false, Rounding::nearest_even) == 0.00390625);  // 1.5 * 2^-9 -> 2^-8
  CHECK(detail::round_to_grid(e4m3, 0.0009765625, false, Rounding::nearest_even) == 0.0);         // 2^-10: tie -> 0
  CHECK(detail::round_to_grid(e4m3, 1.1, true, Rounding::floor) == 1.125);  // floor of -1.1 = -1.125
  detail::FloatGrid ftz = e4m3;
  ftz.subnormals = false;
  CHECK(detail::round_to_grid(ftz, 0.005, false, Rounding::nearest_even) == 0.0);
}

TEST_CASE("core: policy names round trip, aliases parse") {
  for (auto r : {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero, Rounding::floor, Rounding::ceil,
                 Rounding::stochastic})
    CHECK(parse_rounding(to_string(r)) == r);
  CHECK(parse_rounding("AC_TRN") == Rounding::floor);
  CHECK(parse_overflow("AC_SAT") == Overflow::saturate);
  CHECK(parse_semantics("mase") == Semantics::mase);
  CHECK_THROWS_AS(parse_overflow("clip"), Error);
  static_assert(mase_compat.is_mase() && !exact.is_mase());
}
