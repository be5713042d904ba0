// Kernel quantize tests: scale_integer and ternary, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: scale_integer and ternary, both bundles, threaded") {
  using qnum::Role;
  std::vector<float> rnd = random_inputs(31);
  // rows with ties of the integer grid: x * s = k + 1/2 (s = 2^(W-1) / max for exact rows of max
  // 2^(W-1)), whole zero rows, a NaN row and an Inf row
  auto rows_input = [&](std::int64_t cols) {
    std::vector<float> x = mase_block_inputs(static_cast<std::size_t>(40 * cols), 12, false);
    for (std::int64_t c = 0; c < cols; ++c) {
      x[static_cast<std::size_t>(2 * cols + c)] = c == 0 ? 128.0f : static_cast<float>(c % 256) - 127.5f;
      x[static_cast<std::size_t>(3 * cols + c)] = c == 0 ? 127.0f : static_cast<float>(c % 254) - 126.5f;
      x[static_cast<std::size_t>(4 * cols + c)] = c % 2 ? -0.0f : 0.0f;
      x[static_cast<std::size_t>(5 * cols + c)] = c == 3 ? qnum::detail::kNaN : 1.0f;
      x[static_cast<std::size_t>(6 * cols + c)] = c == 3 ? -qnum::detail::kInf : 1.0f;
    }
    x.insert(x.end(), rnd.begin(), rnd.begin() + (static_cast<std::int64_t>(rnd.size()) / cols) * cols);
    return x;
  };
  for (const char* spec : {"scale_integer", "scale_integer:width=4", "scale_integer:width=8,is_signed=false",
                           "scale_integer:width=16", "scale_integer:width=24"}) {
    for (Policy base : {qnum::exact, qnum::mase_compat}) {
      const Format f = fmt(spec, base);
      const bool simd = true;  // mase: float lanes; exact (nearest even): double lanes
      for (std::int64_t cols : {1, 7, 16, 33, 300}) {
        const auto x = rows_input(cols);
        check_shaped(f, x, {static_cast<std::int64_t>(x.size()) / cols, cols}, Role::weight, simd);
      }
      const auto x = rows_input(100);
      check_shaped(f, x, {static_cast<std::int64_t>(x.size())}, Role::weight, simd);  // one long row
      check_threads(f, x, {static_cast<std::int64_t>(x.size())}, Role::weight);
      std::vector<float> big(200003);
      std::mt19937_64 gen(5);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      for (auto& v : big) v = normal(gen);
      check_threads(f, big, {200003}, Role::weight);
      check_threads(f, std::vector<float>(big.begin(), big.begin() + 7 * 28571), {7, 28571}, Role::weight);
    }
  }
  const auto x33 = rows_input(33);
  const qnum::Shape s33{static_cast<std::int64_t>(x33.size()) / 33, 33};
  check_shaped(fmt("scale_integer:rounding=stochastic,seed=2"), x33, s33, Role::weight, false);
  check_shaped(fmt("scale_integer:rounding=floor"), x33, s33, Role::weight, false);

  for (const char* spec :
       {"ternary", "ternary:scaling_factor=true", "ternary:threshold=0.3", "ternary:threshold=0.3,scaling_factor=true",
        "ternary:threshold=0", "ternary:threshold=1e-40"}) {
    const Format f = fmt(spec);
    std::vector<float> x = rows_input(64);
    // values at and next to the threshold 0.3 (a double that is no float)
    for (int i = 0; i < 64; ++i) add_with_neighbours(x, (i % 2 ? -1.0f : 1.0f) * 0.3f, 2);
    x.resize(x.size() / 64 * 64);
    const auto rows = static_cast<std::int64_t>(x.size()) / 64;
    check_shaped(f, x, {rows, 64}, Role::weight, true);
    check_shaped(f, x, {rows * 64}, Role::weight, true);
    check_shaped(f, x, {rows, 8, 8}, Role::weight, true);
    check_threads(f, x, {rows, 64}, Role::weight);
    std::vector<float> big(200003);
    std::mt19937_64 gen(6);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (auto& v : big) v = normal(gen);
    check_threads(f, big, {200003}, Role::weight);
    const Format m = fmt(spec, qnum::mase_compat);
    std::vector<float> x4 = mase_block_inputs(6 * 3 * 5 * 7, 13, true);
    check_shaped(m, x4, {6, 3, 5, 7}, Role::weight, false);
    check_threads(m, std::vector<float>(big.begin(), big.begin() + 7 * 3 * 89 * 100), {7, 3, 89, 100}, Role::weight);
    std::vector<float> out(60);
    CHECK_THROWS_AS(qnum::kernel::quantize(m, x4, out, {60}), qnum::Error);                      // size mismatch
    CHECK_THROWS_AS(qnum::kernel::quantize(m, std::vector<float>(60), out, {60}), qnum::Error);  // MASE: 4-D only
  }
}

TEST_CASE("kernel quantize: ternary channel statistics in vector lanes equal the reference's bits") {
  // delta and alpha are the reference's lane_sum-order double sums; every vector width must
  // give the same doubles (lengths around the 8-lane chunks, wide magnitudes, Inf and NaN).
  std::mt19937_64 gen(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-60, 60);
  for (const char* spec : {"ternary", "ternary:scaling_factor=true", "ternary:threshold=0.3,scaling_factor=true"}) {
    const auto s = std::get<qnum::TernarySpec>(fmt(spec).spec);
    for (std::int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4099}) {
      for (int variant = 0; variant < 3; ++variant) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& v : x) v = std::ldexp(normal(gen), expo(gen));
        if (variant == 1 && n > 3) x[static_cast<std::size_t>(n / 2)] = std::numeric_limits<float>::infinity();
        if (variant == 2 && n > 3) x[static_cast<std::size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
        const auto ref = qnum::detail::ternary_channel_exact(s, x);
        auto run = [&]<class A>(A) {
          CAPTURE(A::name());
          CAPTURE(spec);
          CAPTURE(n);
          const auto got = qnum::kernel::detail::ternary_channel_simd<A>(s, x.data(), n);
          CHECK(same_bits(got.delta, ref.delta));
          CHECK(same_bits(got.alpha, ref.alpha));
          const double sum = qnum::kernel::detail::lane_sum_f32<A>(x.data(), n, [](auto v) { return v; });
          const double want = qnum::detail::lane_sum(
              n, [&](std::int64_t k) { return static_cast<double>(x[static_cast<std::size_t>(k)]); });
          CHECK(same_bits(sum, want));
        };
        [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
      }
    }
  }
}
