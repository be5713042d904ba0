// NVFP4 (format/nvfp4.hpp): every element code under every block scale code round trips,
// ties go to the even code for both elements and scales, tensor quantize equals an
// independent brute-force nearest search, packed encode/decode equals quantize, and bad
// policies and non-finite blocks are handled as documented.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/nvfp4.hpp"

using namespace qnum;

namespace {

const NVFP4Spec kSpec{};

float e2m1(std::uint32_t code) { return decode(MXElement::fp(2, 1), code); }
float e4m3(std::uint32_t code) { return decode(MXElement::fp(4, 3), code); }

/// Index of the nearest value in `grid` (ascending magnitudes, code = index) to v >= 0; ties
/// to the even index; beyond the last value, the last. A brute-force search, independent of
/// the header's binade arithmetic.
std::uint32_t nearest_code(const std::vector<double>& grid, double v) {
  std::uint32_t best = 0;
  for (std::uint32_t c = 1; c < grid.size(); ++c) {
    const double d = std::fabs(grid[c] - v), db = std::fabs(grid[best] - v);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return best;
}

std::vector<double> grid_of(const MXElement& e, std::uint32_t codes) {
  std::vector<double> g;
  for (std::uint32_t c = 0; c < codes; ++c) g.push_back(decode(e, c));
  return g;
}

/// NVFP4 by brute force: tensor scale as documented, nearest E4M3 (codes 0..0x7E) and E2M1
/// (codes 0..7) by search.
std::vector<float> brute_force(const std::vector<float>& x, std::int64_t row) {
  const auto g4 = grid_of(MXElement::fp(2, 1), 8), g8 = grid_of(MXElement::fp(4, 3), 0x7F);
  float a = 0;
  for (float v : x) a = std::max(a, std::fabs(v));
  const float t = a / 2688.0f;
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < x.size(); r += static_cast<std::size_t>(row))
    for (std::size_t j = 0; j < static_cast<std::size_t>(row); j += 16) {
      const std::size_t n = std::min<std::size_t>(16, static_cast<std::size_t>(row) - j);
      double amax = 0;
      for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[r + j + i])));
      const double s = g8[nearest_code(g8, amax / (6.0 * t))];
      for (std::size_t i = 0; i < n; ++i) {
        const float v = x[r + j + i];
        const double q = s == 0 ? 0.0 : g4[nearest_code(g4, std::fabs(static_cast<double>(v)) / (s * t))];
        out[r + j + i] = static_cast<float>(std::copysign(q * s * t, v));
      }
    }
  return out;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

}  // namespace

TEST_CASE("nvfp4 exhaustive: every element code under every scale code round trips") {
  for (float t : {1.0f, 0.375f, 0x1p-100f, 0x1.8p+20f}) {
    for (std::uint32_t sc = 1; sc < 0x7F; ++sc) {
      const float s = e4m3(sc);
      for (std::uint32_t c = 0; c < 16; ++c) {
        // Element 0 pins the block max at 6 s t, so the scale is exactly s; element 1 is code c.
        const std::vector<float> x{static_cast<float>(6.0 * s * t), static_cast<float>(double(e2m1(c)) * s * t)};
        REQUIRE(static_cast<double>(x[1]) == static_cast<double>(e2m1(c)) * s * t);  // exact in float32
        const NVFP4Block b = encode_block(kSpec, x, t);
        CHECK(b.scale == sc);
        CHECK(b.code(0) == 7);
        CHECK(b.code(1) == c);
        CHECK(same_bits(b.value(1, t), x[1]));
      }
    }
  }
}

TEST_CASE("nvfp4: element ties go to the even code, others to the nearest") {
  const auto g = grid_of(MXElement::fp(2, 1), 8);
  for (std::uint32_t c = 0; c + 1 < 8; ++c) {
    const float mid = static_cast<float>((g[c] + g[c + 1]) / 2);
    const std::uint32_t even = c % 2 == 0 ? c : c + 1;
    const std::vector<float> x{6.0f, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 10.0f), -mid};
    const NVFP4Block b = encode_block(kSpec, x, 1.0f);
    CAPTURE(mid);
    CHECK(b.scale == 0x38);  // 1.0
    CHECK(b.code(1) == even);
    CHECK(b.code(2) == c);
    CHECK(b.code(3) == c + 1);
    CHECK(b.code(4) == (even | 8u));
  }
  const std::vector<float> big{6.0f, 7.0f, 1e30f, -1e30f};  // above 6: saturates (scale from the max)
  const NVFP4Block b = encode_block(kSpec, big, 1.0f / 448.0f);
  CHECK(b.scale == 0x7E);
  CHECK(b.code(3) == 0xF);
}

TEST_CASE("nvfp4: block scale ties go to the even E4M3 code") {
  const auto g = grid_of(MXElement::fp(4, 3), 0x7F);
  for (std::uint32_t c = 0; c + 1 < 0x7F; ++c) {
    const double mid = (g[c] + g[c + 1]) / 2;  // amax / 6 exactly on the midpoint
    const std::vector<float> x{static_cast<float>(6.0 * mid)};
    REQUIRE(static_cast<double>(x[0]) == 6.0 * mid);
    CAPTURE(c);
    CHECK(encode_block(kSpec, x, 1.0f).scale == (c % 2 == 0 ? c : c + 1));
  }
  CHECK(encode_block(kSpec, std::vector<float>{6.0f * 500.0f}, 1.0f).scale == 0x7E);  // saturates at 448
}

TEST_CASE("nvfp4: tensor quantize equals a brute-force nearest search") {
  std::mt19937 rng(20261127);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t row = 1 + static_cast<std::int64_t>(rng() % 70), rows = 1 + static_cast<std::int64_t>(rng() % 5);
    std::lognormal_distribution<float> mag(0.0f, trial % 2 ? 4.0f : 1.0f);
    std::vector<float> x(static_cast<std::size_t>(row * rows));
    for (auto& v : x) v = (rng() % 2 ? -1.0f : 1.0f) * (rng() % 17 == 0 ? 0.0f : mag(rng));
    const auto f = Format::parse("nvfp4");
    const auto got = f.quantize(x, {rows, row});
    const auto want = brute_force(x, row);
    CAPTURE(trial);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(x[i]);
      REQUIRE(same_bits(got[i], want[i]));
    }
    // Packed storage gives the same values, and quantizing twice changes nothing.
    const NVFP4Tensor packed = encode(kSpec, x, {rows, row});
    CHECK(packed.blocks.size() == static_cast<std::size_t>(rows * ((row + 15) / 16)));
    std::vector<float> decoded(x.size());
    decode(packed, decoded);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(decoded[i], got[i]));
    const auto again = f.quantize(got, {rows, row});
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(again[i], got[i]));
  }
}

TEST_CASE("nvfp4: zeros, tiny tensors and non-finite blocks") {
  const auto f = Format::parse("nvfp4");
  const std::vector<float> zeros{0.0f, -0.0f, 0.0f};
  const auto z = f.quantize(zeros, {3});
  CHECK(same_bits(z[0], 0.0f));
  CHECK(same_bits(z[1], -0.0f));
  // A tensor whose max is the smallest subnormal: the tensor scale stays positive.
  const std::vector<float> tiny{std::numeric_limits<float>::denorm_min(), 0.0f};
  CHECK(f.quantize(tiny, {2})[0] == std::numeric_limits<float>::denorm_min());
  // NaN or Inf makes its own block NaN; the other block keeps its values.
  std::vector<float> x(32, 1.0f);
  x[3] = std::numeric_limits<float>::infinity();
  x[20] = 3.0f;
  const auto q = f.quantize(x, {32});
  for (int i = 0; i < 16; ++i) CHECK(std::isnan(q[static_cast<std::size_t>(i)]));
  // The tensor scale t = float32(3 / 2688) is rounded, so 6 * 448 * t lands within an ulp of 3.
  CHECK(std::fabs(q[20] - 3.0f) <= std::nextafter(3.0f, 4.0f) - 3.0f);
  CHECK(std::fabs(q[16] - 1.0f) <= std::nextafter(1.0f, 2.0f) - 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(f.quantize(x, {32})[0]));
  // Blocks never cross rows: a 2 x 20 tensor has 2 x 2 blocks.
  CHECK(encode(NVFP4Spec{}, std::vector<float>(40, 1.0f), {2, 20}).blocks.size() == 4);
}

TEST_CASE("nvfp4: text form, info and policies") {
  const auto f = Format::parse("nvfp4");
  CHECK(f.to_string() == "nvfp4");
  CHECK(Format::parse(f.to_string()) == f);
  CHECK(f.family() == "nvfp4");
  CHECK(f.bits_per_value() == 4.5);
  CHECK(f.info().max == 2688.0);
  CHECK(f.grouping() == Grouping::tensor);
  CHECK(!f.saturates());
  CHECK(sizeof(NVFP4Block) == 9);
  CHECK(qnum_test::error_of([] { (void)Format::parse("nvfp4", mase_compat); }) ==
        "nvfp4: nvfp4 has no MASE counterpart; use mode=exact");
  CHECK(qnum_test::error_of([] { (void)Format::parse("nvfp4:rounding=floor"); }) ==
        "nvfp4: NVFP4 rounds to nearest even; rounding=floor is not supported");
  CHECK(qnum_test::error_of([] { (void)Format::parse("nvfp4:block_size=32"); }) ==
        "nvfp4: unknown key 'block_size' (allowed: none)");
  const std::vector<float> in(5);
  std::vector<float> out(4);
  CHECK(qnum_test::error_of([&] { Format::parse("nvfp4").quantize(in, out, {5}); }) ==
        "nvfp4: output has 4 elements, input has 5");
}
