// Kernel quantize tests: nvfp4, against the scalar reference bit for bit
// (tests/kernel/quantize/check.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel/quantize/check.hpp"

using namespace kernel_check;

TEST_CASE("kernel quantize: nvfp4 in vector registers, every E4M3 scale and E2M1 midpoint") {
  const Format f = fmt("nvfp4");
  // A tensor max of 2688 = 6 · 448 gives the tensor scale t = 1, so a block whose max is 6 s
  // takes the block scale s exactly; its other elements sit on every E2M1 value and midpoint
  // times s and on their float neighbours, with both signs.
  std::vector<float> x;
  for (int code = 0; code < 0x7F; ++code) {
    qnum::NVFP4Block b;
    b.scale = static_cast<std::uint8_t>(code);
    const double s = b.scale_value();
    std::vector<float> points;
    for (double m : {0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0}) {
      const float v = static_cast<float>(m * s);
      points.insert(points.end(), {v, std::nextafter(v, 0.0f), std::nextafter(v, qnum::detail::kInf)});
    }
    for (std::size_t i = 0; i < points.size(); i += 15) {
      x.push_back(static_cast<float>(6.0 * s));
      for (std::size_t j = i; j < i + 15; ++j) x.push_back(j < points.size() ? (j % 2 ? -points[j] : points[j]) : 0.0f);
    }
  }
  x.push_back(2688.0f);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  check_shaped(f, x, {n}, qnum::Role::weight, true);
  check_shaped(f, x, {n / 16, 16}, qnum::Role::weight, true);
  check_in_place(f, x, {n}, qnum::Role::weight);
  // random values, specials (NaN and Inf blocks), huge and tiny ones (blocks whose scale rounds
  // to 0), rows whose last block is short
  std::vector<float> r = random_inputs(21);
  r.resize(r.size() / 37 * 37);
  const auto m = static_cast<std::int64_t>(r.size());
  check_shaped(f, r, {m / 37, 37}, qnum::Role::weight, true);
  check_shaped(f, r, {m}, qnum::Role::weight, true);
  check_in_place(f, r, {m / 37, 37}, qnum::Role::activation);
  for (float& v : r)
    if (!std::isfinite(v)) v = 1.0f;
  check_shaped(f, r, {m / 37, 37}, qnum::Role::weight, true);
  check_shaped(f, {0.5f, -3.0f, 7.0f}, {3}, qnum::Role::weight, true);
  check_shaped(f, std::vector<float>(48, 0.0f), {3, 16}, qnum::Role::weight, true);
}

TEST_CASE("kernel quantize: nvfp4 on tensors of >= 1024 blocks (per-call tables), every scale code's bound") {
  const Format f = fmt("nvfp4");
  // Tensor max A gives t = A / 2688; a block max m takes scale code c >= k exactly when
  // m / (6 t) rounds to E4M3 value k or above, so each block here has its max on a float within
  // 3 ulps of 6 t times the midpoint below E4M3 value k, for every k and several t (t = 1,
  // a t that is no power of two, and subnormal block maxima), followed by zero blocks up to
  // at least 1024 blocks so the kernel takes its per-call tables.
  for (const float A : {2688.0f, 1000.0f, 3.0e-36f}) {
    const double t = qnum::detail::nvfp4_tensor_scale_of(A);
    std::vector<float> x(16, 0.0f);
    x[0] = A;
    for (int code = 1; code < 0x7F; ++code) {
      qnum::NVFP4Block lo, hi;
      lo.scale = static_cast<std::uint8_t>(code - 1);
      hi.scale = static_cast<std::uint8_t>(code);
      const auto m = static_cast<float>(6.0 * t * 0.5 * (double{lo.scale_value()} + double{hi.scale_value()}));
      std::vector<float> maxima;
      add_with_neighbours(maxima, m, 3);
      for (float mx : maxima) {
        x.push_back(mx);
        for (int j = 1; j < 16; ++j) x.push_back((j % 2 ? -0.37f : 0.81f) * mx);
      }
    }
    x.resize(std::max<std::size_t>(x.size(), 1030 * 16), 0.0f);
    const auto n = static_cast<std::int64_t>(x.size());
    check_shaped(f, x, {n}, qnum::Role::weight, true);
    check_shaped(f, x, {n / 16, 16}, qnum::Role::weight, true);
    check_in_place(f, x, {n}, qnum::Role::weight);
  }
  // random values, specials, huge and tiny ones, tiled past 1024 blocks; rows with a short last block
  std::vector<float> r = random_inputs(23);
  const std::vector<float> once = r;
  while (r.size() < 1100 * 16) r.insert(r.end(), once.begin(), once.end());
  r.resize(r.size() / 37 * 37);
  const auto m = static_cast<std::int64_t>(r.size());
  check_shaped(f, r, {m}, qnum::Role::weight, true);
  check_shaped(f, r, {m / 37, 37}, qnum::Role::weight, true);
  check_in_place(f, r, {m / 37, 37}, qnum::Role::activation);
}
