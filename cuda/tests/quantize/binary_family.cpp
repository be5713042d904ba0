// The binary family and ternary together: in place (in == out) and the argument checks.
#include <doctest/doctest.h>

#include "binary_family.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::binary_family;

TEST_CASE("cuda: binary and ternary in place (in == out) equal the CPU reference") {
  const qnum::Shape shape{3, 4, 8, 11};
  const auto in = make_input(shape, 0, 99);
  auto run = [&](const auto& s, const qnum::Policy& p, const std::string& what) {
    std::vector<float> cpu = in;
    qnum::quantize(s, p, std::span<const float>(cpu), std::span<float>(cpu), shape);
    DeviceBuffer<float> d(in);
    qnum::cuda::quantize(s, p, d.get(), d.get(), shape);
    require_same_bits(d.download(), cpu, in, what + " in place");
  };
  for (const auto& p : both_bundles()) {
    for (const bool stochastic : {false, true})
      for (const bool bipolar : {true, false}) run(qnum::BinarySpec{stochastic, bipolar}, p, "binary");
    for (const bool scaling : {false, true}) {
      qnum::TernarySpec s;
      s.scaling_factor = scaling;
      run(s, p, "ternary");
    }
    run(qnum::BinarizeSpec{}, p, "binarize");
  }
}

TEST_CASE("cuda: binary family bad arguments are qnum::Error") {
  using qnum::Error;
  DeviceBuffer<float> a(std::vector<float>(64, 0.5f)), b(64 * 8);
  const qnum::BinarySpec bipolar{}, scaled{false, false};
  CHECK_THROWS_AS((qnum::cuda::quantize(bipolar, qnum::exact, a.get(), b.get(), {-1, 4})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(bipolar, qnum::exact, nullptr, b.get(), {4})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(bipolar, qnum::exact, a.get(), nullptr, {4})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::BinarySpec{true, true}, qnum::exact, a.get(), nullptr, b.get(), {4})),
                  Error);  // explicit uniforms: null
  CHECK_THROWS_AS((qnum::cuda::quantize(scaled, qnum::mase_compat, a.get(), b.get(), {4, 16})), Error);  // not 4-D
  CHECK_NOTHROW((qnum::cuda::quantize(scaled, qnum::exact, a.get(), b.get(), {4, 16})));
  CHECK_NOTHROW((qnum::cuda::quantize(bipolar, qnum::exact, nullptr, nullptr, {0, 3})));  // nothing to do

  qnum::TernarySpec t;
  CHECK_THROWS_AS((qnum::cuda::quantize(t, qnum::mase_compat, a.get(), b.get(), {8, 8})), Error);  // not 4-D
  CHECK_THROWS_AS((qnum::cuda::quantize(t, qnum::exact, a.get(), b.get(), {2, -3})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(t, qnum::exact, nullptr, b.get(), {8})), Error);
  t.threshold = -1.0;
  CHECK_THROWS_AS((qnum::cuda::quantize(t, qnum::exact, a.get(), b.get(), {8})), Error);  // invalid spec

  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::ResidualSignSpec{9, {}}, qnum::exact, a.get(), b.get(), {8})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::ResidualSignSpec{4, {}}, qnum::mase_compat, a.get(), b.get(), {8})),
                  Error);  // MASE: levels 1..3
  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::ResidualSignSpec{2, {0.5}}, qnum::exact, a.get(), b.get(), {8})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::ResidualSignSpec{2, {}}, qnum::exact, a.get(), nullptr, {8})), Error);

  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::BinarizeSpec{}, qnum::exact, a.get(), b.get(), {-2})), Error);
  CHECK_THROWS_AS((qnum::cuda::quantize(qnum::BinarizeSpec{}, qnum::exact, nullptr, b.get(), {2})), Error);
}
