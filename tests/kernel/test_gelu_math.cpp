// GELU on float lanes (tensor/gelu_math.hpp) against a double reference, swept over every
// binade and range the lane code distinguishes, with specials, and independent of position,
// chunking and threads. Here with the kernel tests so that it runs for both ISA choices (the
// portable build takes the Veltkamp–Dekker products instead of FMA).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "qnum/kernel/threading.hpp"
#include "qnum/tensor/gelu_math.hpp"
#include "qnum/tensor/ops_elementwise.hpp"

namespace {

double gelu_ref(double x) { return 0.5 * x * std::erfc(-x * 0.70710678118654752440); }
double gelu_grad_ref(double x) {
  return 0.5 * std::erfc(-x * 0.70710678118654752440) + x * 0.39894228040143267794 * std::exp(-0.5 * x * x);
}
/// |got - ref| in units of the float ulp at ref (the subnormal spacing below 2^-126).
double float_ulps(float got, double ref) {
  const auto rf = static_cast<float>(ref);
  const double ulp =
      std::fabs(rf) < std::numeric_limits<float>::min() ? 0x1p-149 : std::ldexp(1.0, std::ilogb(rf) - 23);
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

}  // namespace

TEST_CASE("gelu_math: GELU within 3 ulp of x/2 erfc(-x/sqrt 2) on a sweep of every float binade, both signs") {
  // Every 613th float from 1e-30 to 20 and its negative: the central polynomial, all 20 tail
  // intervals and their boundaries' neighbourhoods, gradual underflow (x < -13.2) and |x| >= 16.
  std::vector<float> x;
  for (std::uint32_t b = std::bit_cast<std::uint32_t>(1e-30f); std::bit_cast<float>(b) < 20.0f; b += 613)
    x.insert(x.end(), {std::bit_cast<float>(b), -std::bit_cast<float>(b)});
  for (const float edge : {0.5f, 1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 0.625f, 5.0f, 14.0f})
    for (float v = edge, k = 0; k < 3; ++k, v = std::nextafter(v, 0.0f))
      x.insert(x.end(), {v, -v, std::nextafter(v, 100.0f), -std::nextafter(v, 100.0f)});
  std::vector<float> y(x.size()), d(x.size());
  qnum::detail::gelu_n(x.data(), y.data(), d.data(), static_cast<std::int64_t>(x.size()));
  double worst = 0.0, worst_grad_abs = 0.0, worst_grad_rel = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, float_ulps(y[i], gelu_ref(x[i])));
    if (std::signbit(y[i]) != std::signbit(x[i])) FAIL("GELU's sign at ", x[i]);
    const double g = gelu_grad_ref(x[i]);
    worst_grad_abs = std::max(worst_grad_abs, std::fabs(d[i] - g));
    if (x[i] < -1.0f && std::fabs(g) > 1e-30)
      worst_grad_rel = std::max(worst_grad_rel, std::fabs(d[i] - g) / std::fabs(g));
  }
  CHECK(worst <= 3.0);
  CHECK(worst_grad_abs <= 2.5e-7);
  CHECK(worst_grad_rel <= 1e-6);  // the negative tail's tiny derivatives are relative-accurate
  // the Tensor op is the same function, with or without a gradient
  const qnum::Tensor t({static_cast<std::int64_t>(x.size())}, x);
  const qnum::Tensor yt = qnum::gelu(t);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<std::uint32_t>(yt.values()[i]) != std::bit_cast<std::uint32_t>(y[i])) FAIL("gelu op at ", x[i]);
}

TEST_CASE("gelu_math: GELU's specials, and each value independent of position, chunking and threads") {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x{0.0f,       -0.0f,     inf,   -inf,   std::numeric_limits<float>::quiet_NaN(),
                             16.0f,      -16.0f,    1e30f, -1e30f, 0x1p-149f,
                             -0x1p-149f, 0x1p-126f, -13.5f};
  std::vector<float> y(x.size()), d(x.size());
  qnum::detail::gelu_n(x.data(), y.data(), d.data(), static_cast<std::int64_t>(x.size()));
  CHECK(std::bit_cast<std::uint32_t>(y[0]) == 0u);
  CHECK(std::bit_cast<std::uint32_t>(y[1]) == 0x80000000u);  // -0 stays -0
  CHECK(d[0] == 0.5f);
  CHECK(y[2] == inf);
  CHECK(d[2] == 1.0f);
  CHECK(std::isnan(y[3]));  // -inf/2 (1 + erf(-inf)) = -inf * 0
  CHECK(std::isnan(y[4]));
  CHECK(std::isnan(d[4]));
  CHECK(y[5] == 16.0f);
  CHECK(std::bit_cast<std::uint32_t>(y[6]) == 0x80000000u);  // -1.0e-56 rounds to -0
  CHECK(y[7] == 1e30f);
  CHECK(std::bit_cast<std::uint32_t>(y[8]) == 0x80000000u);
  CHECK(y[9] == 0.0f);  // half the smallest subnormal: a tie, to even
  CHECK(y[11] == 0x1p-127f);
  CHECK(y[12] == static_cast<float>(gelu_ref(-13.5)));  // subnormal result, rounded once
  CHECK(y[12] != 0.0f);

  std::mt19937 gen(9);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> v(40'001);
  for (auto& e : v) e = nd(gen);
  std::vector<float> ref(v.size()), ref_d(v.size());
  qnum::set_num_threads(1);
  qnum::detail::gelu_n(v.data(), ref.data(), ref_d.data(), static_cast<std::int64_t>(v.size()));
  // shifted by one lane, on three threads, in place
  std::vector<float> shifted(v.size() + 1, 0.25f), out(shifted.size()), out_d(shifted.size());
  std::copy(v.begin(), v.end(), shifted.begin() + 1);
  qnum::set_num_threads(3);
  qnum::detail::gelu_n(shifted.data(), out.data(), out_d.data(), static_cast<std::int64_t>(shifted.size()));
  std::vector<float> inplace = v;
  qnum::detail::gelu_n(inplace.data(), inplace.data(), nullptr, static_cast<std::int64_t>(inplace.size()));
  qnum::set_num_threads(1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(out[i + 1]) != std::bit_cast<std::uint32_t>(ref[i]) ||
        std::bit_cast<std::uint32_t>(out_d[i + 1]) != std::bit_cast<std::uint32_t>(ref_d[i]))
      FAIL("GELU of ", v[i], " depends on its position or the thread count");
    if (std::bit_cast<std::uint32_t>(inplace[i]) != std::bit_cast<std::uint32_t>(ref[i]))
      FAIL("in-place GELU of ", v[i]);
  }
}
