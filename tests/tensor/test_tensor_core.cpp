// Tensor handles, autograd tape mechanics, broadcasting and elementwise ops with
// finite-difference gradient checks.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "qnum/tensor/ops_elementwise.hpp"
#include "qnum/tensor/ops_quant.hpp"
#include "qnum/tensor/ops_shape.hpp"

using qnum::Tensor;
using qnum_test::gradcheck;

TEST_CASE("tensor: construction, shapes, views and bad input") {
  Tensor a({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(a.numel() == 6);
  CHECK(a.size(-1) == 3);
  CHECK(a.rank() == 2);
  CHECK(Tensor::scalar(2.5f).item() == 2.5f);
  CHECK_THROWS_WITH_AS(Tensor({2, 2}, {1, 2, 3}), doctest::Contains("3 values for shape [2, 2]"), qnum::Error);
  CHECK_THROWS_AS(Tensor::zeros({1, 2, 3, 4, 5}), qnum::Error);
  CHECK_THROWS_AS(a.item(), qnum::Error);
  CHECK_THROWS_AS(a.size(2), qnum::Error);
  CHECK_THROWS_AS(Tensor().shape(), qnum::Error);
  Tensor d = a.detach();
  d.values()[0] = 10.0f;  // detach shares the values
  CHECK(a.values()[0] == 10.0f);
  Tensor c = a.clone();
  c.values()[1] = -1.0f;
  CHECK(a.values()[1] == 2.0f);
  // seeded generators: same seed, same values; different seeds differ
  CHECK(Tensor::randn({100}, 7).to_vector() == Tensor::randn({100}, 7).to_vector());
  CHECK(Tensor::randn({100}, 7).to_vector() != Tensor::randn({100}, 8).to_vector());
  const Tensor r = Tensor::randn({20000}, 3);
  double m = 0, v = 0;
  for (float x : r.values()) m += x;
  m /= r.numel();
  for (float x : r.values()) v += (x - m) * (x - m);
  v /= r.numel();
  CHECK(std::fabs(m) < 0.03);
  CHECK(std::fabs(v - 1.0) < 0.05);
}

TEST_CASE("autograd: accumulation, shared inputs, no-grad mode, errors") {
  Tensor x({3}, {1, 2, 3}, true);
  Tensor y = qnum::mul(x, x);  // x used twice: d/dx = 2x
  Tensor s = qnum::mul(y, Tensor({3}, {1, 1, 1}));
  s.backward(Tensor::ones({3}));
  CHECK(std::vector<float>(x.grad().begin(), x.grad().end()) == std::vector<float>{2, 4, 6});
  // gradients accumulate until zeroed
  qnum::mul(x, Tensor({3}, {1, 1, 1})).backward(Tensor::ones({3}));
  CHECK(x.grad()[0] == 3.0f);
  x.zero_grad();
  CHECK(!x.has_grad());
  {
    qnum::autograd::NoGradGuard guard;
    Tensor z = qnum::mul(x, x);
    CHECK(!z.requires_grad());
    CHECK_THROWS_WITH_AS(z.backward(Tensor::ones({3})), doctest::Contains("does not require grad"), qnum::Error);
  }
  CHECK(qnum::autograd::grad_enabled());
  Tensor w = qnum::mul(x, x);
  CHECK_THROWS_WITH_AS(w.backward(), doctest::Contains("needs grad_output"), qnum::Error);
  CHECK_THROWS_AS(w.backward(Tensor::ones({4})), qnum::Error);
  // a long chain does not overflow the stack
  Tensor t = x;
  for (int i = 0; i < 20000; ++i) t = qnum::add_scalar(t, 0.0f);
  t.backward(Tensor::ones({3}));
  CHECK(x.grad()[2] == 1.0f);
  // ... nor does dropping such a chain without backward (iterative release)
  {
    Tensor u = x;
    for (int i = 0; i < 200000; ++i) u = qnum::mul_scalar(u, 1.0f);
  }
  CHECK(x.requires_grad());
}

TEST_CASE("autograd: ops that pass their gradient on (reshape, identity STE) move it, with the same values") {
  const qnum::Format q = qnum::Format::parse("integer:width=8,frac_width=4");
  Tensor x({2, 3}, {1, -2, 3, 0.5f, 0.25f, -8}, true);
  const Tensor g({2, 3}, {1, 2, 3, 4, 5, 6});
  // x reaches the loss three ways: through reshape, through fake_quantize, and directly
  const Tensor r = qnum::reshape(qnum::fake_quantize(qnum::reshape(x, {3, 2}), q), {2, 3});
  qnum::add(qnum::mul(r, Tensor::full({2, 3}, 2.0f)), x).backward(g);
  CHECK(std::vector<float>(x.grad().begin(), x.grad().end()) == std::vector<float>{3, 6, 9, 12, 15, 18});
  // such an op as the root keeps its own gradient and still hands one to its input
  x.zero_grad();
  const Tensor root = qnum::reshape(x, {6});
  root.backward(Tensor({6}, {6, 5, 4, 3, 2, 1}));
  CHECK(std::vector<float>(x.grad().begin(), x.grad().end()) == std::vector<float>{6, 5, 4, 3, 2, 1});
  CHECK(std::vector<float>(root.grad().begin(), root.grad().end()) == std::vector<float>{6, 5, 4, 3, 2, 1});
  // clipped STE still zeroes outside the range (not passed through)
  x.zero_grad();
  qnum::fake_quantize(x, qnum::Format::parse("integer:width=4,frac_width=1,ste=clipped")).backward(g);
  CHECK(std::vector<float>(x.grad().begin(), x.grad().end()) == std::vector<float>{1, 2, 3, 4, 5, 0});
}

TEST_CASE("broadcasting: shapes, values and errors") {
  Tensor a({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b({3}, {10, 20, 30});
  CHECK((a + b).to_vector() == std::vector<float>{11, 22, 33, 14, 25, 36});
  Tensor col({2, 1}, {100, 200});
  CHECK((a * col).to_vector() == std::vector<float>{100, 200, 300, 800, 1000, 1200});
  CHECK((a - Tensor::scalar(1)).shape() == qnum::Shape{2, 3});
  CHECK((Tensor::zeros({4, 1, 3}) + Tensor::zeros({2, 1})).shape() == qnum::Shape{4, 2, 3});
  CHECK_THROWS_WITH_AS(a + Tensor::zeros({2}), doctest::Contains("do not broadcast"), qnum::Error);
}

TEST_CASE("gradcheck: binary ops with broadcasting") {
  for (auto op : {&qnum::add, &qnum::sub, &qnum::mul, &qnum::div}) {
    const Tensor a = Tensor::uniform({2, 3, 4}, 1, 0.5f, 2.0f, true);
    const Tensor b = Tensor::uniform({3, 1}, 2, 0.5f, 2.0f, true);
    CHECK(gradcheck([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, b}) == 0);
    const Tensor c = Tensor::uniform({4}, 3, 0.5f, 2.0f, true);
    CHECK(gradcheck([op](const std::vector<Tensor>& in) { return op(in[1], in[0]); }, {a, c}) == 0);
  }
}

TEST_CASE("gradcheck: unary ops") {
  const Tensor x = Tensor::uniform({3, 5}, 4, -2.0f, 2.0f, true);
  const Tensor pos = Tensor::uniform({3, 5}, 5, 0.5f, 3.0f, true);
  CHECK(gradcheck([](const auto& in) { return qnum::gelu(in[0]); }, {x}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::tanh(in[0]); }, {x}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::sigmoid(in[0]); }, {x}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::exp(in[0]); }, {x}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::log(in[0]); }, {pos}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::mul_scalar(qnum::add_scalar(in[0], 1.5f), -2.0f); }, {x}) == 0);
  // relu away from its kink
  const Tensor away = Tensor({6}, {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f}, true);
  CHECK(gradcheck([](const auto& in) { return qnum::relu(in[0]); }, {away}) == 0);
  // GELU values against PyTorch's exact form at a few points
  const Tensor g = qnum::gelu(Tensor({3}, {-1.0f, 0.0f, 1.0f}));
  CHECK(g.values()[0] == doctest::Approx(-0.15865526f).epsilon(1e-6));
  CHECK(g.values()[2] == doctest::Approx(0.84134474f).epsilon(1e-6));
}
