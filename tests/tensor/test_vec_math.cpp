// The vectorised math behind softmax (exp in double) and layer_norm's lane sums: bounded
// against double references over every range the lane code distinguishes, specials through,
// and each value independent of its position in the array. (GELU's lanes: tests/kernel,
// compiled for both ISA choices.)
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
  // Outside [-708, 709]: std::exp's bits (subnormal results, the +0 below -746 taken without
  // calling it — softmax's masked keys sit at float's lowest — overflow, NaN), in every lane.
  std::vector<double> far{-708.5,
                          -720.0,
                          -745.0,
                          -745.1332,
                          -745.14,
                          -746.0,
                          -746.5,
                          -1e4,
                          -3.4028234663852886e38,
                          -std::numeric_limits<double>::infinity(),
                          709.5,
                          710.0,
                          std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN(),
                          -1e300,
                          0.5,
                          -0.0};
  std::vector<double> ef(far.size());
  qnum::detail::exp_n(far.data(), ef.data(), far.size());
  for (std::size_t i = 0; i < far.size(); ++i) {
    CAPTURE(far[i]);
    CHECK(std::bit_cast<std::uint64_t>(ef[i]) == std::bit_cast<std::uint64_t>(std::exp(far[i])));
  }
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
