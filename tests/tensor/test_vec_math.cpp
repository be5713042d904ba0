// The vectorised exp/erf behind softmax, GELU and layer_norm's lane sums: within 1 ulp of
// the C library over every range the lane code distinguishes, specials through, and each
// value independent of its position in the array.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "qnum/tensor/ops_elementwise.hpp"
#include "qnum/tensor/ops_nn.hpp"
#include "qnum/tensor/vec_math.hpp"

namespace {

std::int64_t ulp_distance(double a, double b) {
  return std::abs(std::bit_cast<std::int64_t>(a) - std::bit_cast<std::int64_t>(b));
}

}  // namespace

TEST_CASE("vec_math: erf_n within 1 ulp of std::erf on every range, specials and positions") {
  std::mt19937_64 gen(7);
  std::vector<double> a;
  // fdlibm's boundaries and their neighbours, both signs
  for (const double b : {0x1p-28, 0.84375, 1.25, 2.857142686843872070, 6.0}) {
    for (double v = b, k = 0; k < 4; ++k, v = std::nextafter(v, 0.0)) a.insert(a.end(), {v, -v});
    for (double v = b, k = 0; k < 4; ++k, v = std::nextafter(v, 10.0)) a.insert(a.end(), {v, -v});
  }
  for (const double scale : {1e-9, 0.3, 1.0, 2.5, 8.0}) {
    std::normal_distribution<double> nd(0.0, scale);
    for (int i = 0; i < 20000; ++i) a.push_back(nd(gen));
  }
  a.insert(a.end(), {0.0, -0.0, 1e-310, -1e-310, 27.0, -27.0, 1e300, std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()});
  std::vector<double> e(a.size());
  qnum::detail::erf_n(a.data(), e.data(), a.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double r = std::erf(a[i]);
    worst = std::max(worst, ulp_distance(r, e[i]));
    if (std::signbit(r) != std::signbit(e[i])) FAIL("erf sign of ", a[i]);
  }
  CHECK(worst <= 1);
  double nan = std::numeric_limits<double>::quiet_NaN(), out = 0;
  qnum::detail::erf_n(&nan, &out, 1);
  CHECK(std::isnan(out));
  // position independence: the same values shifted by one (other lane, other chunk split)
  std::vector<double> shifted(a.size() + 1, 0.5), e2(shifted.size());
  std::copy(a.begin(), a.end(), shifted.begin() + 1);
  qnum::detail::erf_n(shifted.data(), e2.data(), shifted.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(e2[i + 1]) != std::bit_cast<std::uint64_t>(e[i])) FAIL("erf of ", a[i]);
  // in place (e == a): the same results
  std::vector<double> inplace = a;
  qnum::detail::erf_n(inplace.data(), inplace.data(), inplace.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(inplace[i]) != std::bit_cast<std::uint64_t>(e[i])) FAIL("in-place erf of ", a[i]);
}

TEST_CASE("vec_math: exp_n within 1 ulp of std::exp, out-of-range arguments through std::exp") {
  std::mt19937_64 gen(8);
  std::uniform_real_distribution<double> ud(-750.0, 750.0);
  std::vector<double> a(50001);
  for (auto& v : a) v = ud(gen);
  a[0] = 0.0;
  std::vector<double> e(a.size());
  qnum::detail::exp_n(a.data(), e.data(), a.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, ulp_distance(std::exp(a[i]), e[i]));
  CHECK(worst <= 1);
}

TEST_CASE("vec_math: GELU on every erf range equals x/2 (1 + erf(x/sqrt 2)) from std::erf, rounded once") {
  std::mt19937_64 gen(9);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> v(4099);
  for (auto& x : v) x = nd(gen);
  v[0] = 0.0f;
  v[1] = -20.0f;
  v[2] = 20.0f;
  const qnum::Tensor y = qnum::gelu(qnum::Tensor({static_cast<std::int64_t>(v.size())}, v));
  int differing = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double d = v[i];
    const auto ref = static_cast<float>(0.5 * d * (1.0 + std::erf(d * 0.70710678118654752440)));
    // erf_n is within 1 ulp of double; after rounding to float a difference can only be a
    // double-rounding tie, i.e. one float ulp.
    const float got = y.values()[i];
    if (got != ref) {
      ++differing;
      CHECK(std::abs(std::bit_cast<std::int32_t>(got) - std::bit_cast<std::int32_t>(ref)) <= 1);
    }
  }
  CHECK(differing <= 2);
}

TEST_CASE("vec_math: layer_norm's lane sums give the exact mean and variance of integer rows") {
  // Rows of integers with an integer mean (± pairs around an offset, 37 values: the lane
  // tail is exercised): every partial sum is exact in any order, so the output must be
  // exactly (x - mean) / sqrt(var).
  constexpr int kC = 37;
  std::vector<float> x;
  for (int r = 0; r < 3; ++r) {
    const float offset = static_cast<float>(5 * r - 4);
    x.push_back(offset);
    for (int k = 0; k < kC / 2; ++k) {
      const auto w = static_cast<float>((k * 7 + r) % 23 - 11);
      x.insert(x.end(), {offset + w, offset - w});
    }
  }
  const qnum::Tensor y = qnum::layer_norm(qnum::Tensor({3, kC}, x), {}, {}, 0.0f);
  for (int r = 0; r < 3; ++r) {
    const float* row = x.data() + r * kC;
    const double m = row[0];  // the offset
    double v = 0;
    for (int k = 0; k < kC; ++k) v += (row[k] - m) * (row[k] - m);
    v /= kC;
    for (int k = 0; k < kC; ++k)
      CHECK(y.values()[static_cast<std::size_t>(r * kC + k)] ==
            static_cast<float>((row[k] - m) * (1.0 / std::sqrt(v))));
  }
}
