// Kernel quantize tests: residual_sign, against the scalar reference bit for bit
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

TEST_CASE("kernel quantize: residual_sign in vector lanes, every level's output, both bundles") {
  std::mt19937_64 gen(31);
  std::normal_distribution<float> normal(0.0f, 0.7f);
  std::vector<float> x(4099);
  for (auto& v : x) v = normal(gen);
  // residuals that land exactly on zero (x = 0.75 with means 0.75x-0.2, x = 1 with one level),
  // signed zeros, subnormals, specials
  const float specials[] = {0.0f,
                            -0.0f,
                            0.75f,
                            -0.75f,
                            1.0f,
                            1e-40f,
                            -1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e30f,
                            -3.0f};
  for (std::size_t i = 0; i < std::size(specials); ++i) x[i * 97] = specials[i];
  const auto n = static_cast<std::int64_t>(x.size());
  for (const char* spec : {"residual_sign:levels=1", "residual_sign", "residual_sign:levels=3",
                           "residual_sign:levels=5", "residual_sign:levels=2,means=0.75x-0.2"}) {
    for (const qnum::Policy& p : {qnum::exact, qnum::mase_compat}) {
      const Format f = fmt(spec, p);
      if (p.is_mase() && std::get<qnum::ResidualSignSpec>(f.spec).levels > 3) {
        std::vector<float> out(x.size() * 5);
        CHECK_THROWS_AS(qnum::kernel::quantize(f, x, out, {n}), qnum::Error);  // MASE: levels 1..3
        continue;
      }
      CAPTURE(f.to_string());
      CHECK(qnum::kernel::quantize_path(f, {n}) == qnum::kernel::QuantizePath::simd);
      const auto ref = f.quantize(x, {n});
      auto check = [&](const std::vector<float>& out, const char* what) {
        int bad = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) bad += same_bits(ref[i], out[i]) ? 0 : 1;
        CAPTURE(what);
        CHECK(bad == 0);
      };
      auto run = [&]<class A>(A) {
        std::vector<float> out(ref.size(), 123.0f);
        qnum::kernel::quantize_arch<A>(f, x, out, {n});
        check(out, A::name());
      };
      [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
      std::vector<float> big(300007 * 2);
      for (auto& v : big) v = normal(gen);
      big.resize(300007);
      const auto big_ref = f.quantize(big, {300007});
      for (int t : {1, 2, 3}) {
        qnum::set_num_threads(t);
        std::vector<float> out(big_ref.size());
        qnum::kernel::quantize(f, big, out, {300007});
        int bad = 0;
        for (std::size_t i = 0; i < big_ref.size(); ++i) bad += same_bits(big_ref[i], out[i]) ? 0 : 1;
        CHECK(bad == 0);
      }
      qnum::set_num_threads(1);
      std::vector<float> wrong(x.size());  // one level's worth of output for several levels
      if (std::get<qnum::ResidualSignSpec>(f.spec).levels > 1)
        CHECK_THROWS_AS(qnum::kernel::quantize(f, x, wrong, {n}), qnum::Error);
    }
  }
}
