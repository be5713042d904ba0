// Neural-network ops (softmax, log_softmax, layer_norm, batch_norm, embedding, dropout,
// cross_entropy, mse_loss) against naive double-precision results, with finite-difference
// gradient checks; fake_quantize against Format::quantize and its straight-through gradients.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "qnum/tensor/ops_nn.hpp"
#include "qnum/tensor/ops_quant.hpp"

using qnum::Tensor;
using qnum_test::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

/// Naive softmax of one row, in double.
std::vector<double> naive_softmax(const std::vector<double>& row) {
  double m = row[0], s = 0;
  for (double v : row) m = std::max(m, v);
  for (double v : row) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : row) out.push_back(std::exp(v - m) / s);
  return out;
}

std::vector<float> grad_of(const Tensor& t) { return {t.grad().begin(), t.grad().end()}; }

}  // namespace

TEST_CASE("ops_nn: softmax and log_softmax values, stability and gradients") {
  const Tensor x = Tensor::randn({3, 5}, 1, 0.0f, 2.0f);
  const Tensor y = qnum::softmax(x);
  const Tensor ly = qnum::log_softmax(x);
  for (int r = 0; r < 3; ++r) {
    std::vector<double> row;
    for (int k = 0; k < 5; ++k) row.push_back(x.values()[r * 5 + k]);
    const auto ref = naive_softmax(row);
    double sum = 0;
    for (int k = 0; k < 5; ++k) {
      sum += y.values()[r * 5 + k];
      CHECK(y.values()[r * 5 + k] == doctest::Approx(ref[k]).epsilon(1e-6));
      CHECK(ly.values()[r * 5 + k] == doctest::Approx(std::log(ref[k])).epsilon(1e-6));
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }
  // along dim 0 = the transpose's rows; and the middle dim of a rank-3 tensor
  const Tensor y0 = qnum::softmax(x, 0);
  for (int k = 0; k < 5; ++k) {
    const auto ref = naive_softmax({x.values()[k], x.values()[5 + k], x.values()[10 + k]});
    for (int r = 0; r < 3; ++r) CHECK(y0.values()[r * 5 + k] == doctest::Approx(ref[r]).epsilon(1e-6));
  }
  // huge logits: no overflow
  const Tensor big({1, 3}, {1000.0f, 1001.0f, 999.0f});
  const auto ref = naive_softmax({0.0, 1.0, -1.0});
  for (int k = 0; k < 3; ++k) {
    CHECK(qnum::softmax(big).values()[k] == doctest::Approx(ref[k]).epsilon(1e-6));
    CHECK(qnum::log_softmax(big).values()[k] == doctest::Approx(std::log(ref[k])).epsilon(1e-6));
  }
  for (int dim : {-1, 0, 1}) {
    CAPTURE(dim);
    const Tensor a = Tensor::randn({2, 3, 4}, 2, 0.0f, 1.0f, true);
    CHECK(gradcheck([dim](const Inputs& in) { return qnum::softmax(in[0], dim); }, {a}) == 0);
    CHECK(gradcheck([dim](const Inputs& in) { return qnum::log_softmax(in[0], dim); }, {a}) == 0);
  }
  CHECK_THROWS_WITH_AS(qnum::softmax(x, 2), doctest::Contains("dimension 2 out of range"), qnum::Error);
  CHECK_THROWS_AS(qnum::log_softmax(Tensor::scalar(1.0f)), qnum::Error);
}

TEST_CASE("ops_nn: line_sums adds each line in order, grouped or not (bit for bit)") {
  // Terms of both signs over 60 binades, whose double sum depends on the order: interleaving
  // the lines' chains must not reorder any one line.
  const std::int64_t n = 41;
  auto term = [](int r, std::int64_t k) {
    return std::ldexp(1.0 + 0.1 * static_cast<double>(k) + r, static_cast<int>((k * 37) % 60) - 30) *
           (k % 2 ? -1.0 : 1.0);
  };
  for (const int nl : {8, 3, 1}) {
    CAPTURE(nl);
    double sum[qnum::detail::kLineGroup];
    qnum::detail::line_sums(nl, n, sum, term);
    for (int r = 0; r < nl; ++r) {
      double seq = 0;
      for (std::int64_t k = 0; k < n; ++k) seq += term(r, k);
      CHECK(std::bit_cast<std::uint64_t>(sum[r]) == std::bit_cast<std::uint64_t>(seq));
    }
  }
}

TEST_CASE("ops_nn: softmax lines are computed alike wherever they sit (grouped, strided, alone)") {
  // softmax works on lines 8 at a time with their sums interleaved, and on lanes along the
  // last dimension; each line must still get the bits of that line computed on its own
  // (a [1, n] tensor: one line, no group, no interleaving) — values and gradients, with
  // specials and tied zeros in the lines.
  const std::int64_t rows = 19, n = 37;  // two full groups and a partial one; n past a lane block
  Tensor x = Tensor::randn({rows, n}, 5, 0.0f, 3.0f);
  std::vector<float> xv(x.values().begin(), x.values().end());
  xv[1] = -std::numeric_limits<float>::infinity();
  xv[n + 2] = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t k = 0; k < n; ++k) xv[static_cast<std::size_t>(2 * n + k)] = -std::fabs(xv[2 * n + k]);
  xv[2 * n + 1] = -0.0f, xv[2 * n + 20] = 0.0f;  // row 2's maximum: two tied zeros
  xv[3 * n + 5] = 1e30f;
  const Tensor g = Tensor::randn({rows, n}, 6);
  for (const bool log_space : {false, true}) {
    for (const bool transposed : {false, true}) {  // lines along dim 1, or (the transpose) dim 0
      CAPTURE(log_space);
      CAPTURE(transposed);
      std::vector<float> full_in(xv.size()), full_g(xv.size());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < n; ++k) {
          const std::size_t at = static_cast<std::size_t>(transposed ? k * rows + r : r * n + k);
          full_in[at] = xv[static_cast<std::size_t>(r * n + k)];
          full_g[at] = g.values()[static_cast<std::size_t>(r * n + k)];
        }
      const qnum::Shape shape = transposed ? qnum::Shape{n, rows} : qnum::Shape{rows, n};
      Tensor all(shape, qnum::FloatBuffer(full_in.begin(), full_in.end()));
      all.set_requires_grad(true);
      const int dim = transposed ? 0 : 1;
      const Tensor y = log_space ? qnum::log_softmax(all, dim) : qnum::softmax(all, dim);
      y.backward(Tensor(shape, qnum::FloatBuffer(full_g.begin(), full_g.end())));
      int differ = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto row = std::vector<float>(xv.begin() + r * n, xv.begin() + (r + 1) * n);
        Tensor one({1, n}, qnum::FloatBuffer(row.begin(), row.end()));
        one.set_requires_grad(true);
        const Tensor y1 = log_space ? qnum::log_softmax(one) : qnum::softmax(one);
        y1.backward(Tensor({1, n}, qnum::FloatBuffer(g.values().begin() + r * n, g.values().begin() + (r + 1) * n)));
        for (std::int64_t k = 0; k < n; ++k) {
          const std::size_t at = static_cast<std::size_t>(transposed ? k * rows + r : r * n + k);
          differ += std::bit_cast<std::uint32_t>(y.values()[at]) != std::bit_cast<std::uint32_t>(y1.values()[k]);
          differ += std::bit_cast<std::uint32_t>(all.grad()[at]) != std::bit_cast<std::uint32_t>(one.grad()[k]);
        }
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("ops_nn: layer_norm values and gradients") {
  const Tensor x = Tensor::randn({4, 6}, 3, 1.0f, 3.0f);
  const Tensor y = qnum::layer_norm(x);
  for (int r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int k = 0; k < 6; ++k) m += y.values()[r * 6 + k];
    m /= 6;
    for (int k = 0; k < 6; ++k) v += (y.values()[r * 6 + k] - m) * (y.values()[r * 6 + k] - m);
    v /= 6;  // biased variance, as the op
    CHECK(std::fabs(m) < 1e-6);
    CHECK(v == doctest::Approx(1.0).epsilon(1e-4));  // eps = 1e-5 shrinks it slightly
  }
  // weight and bias against a naive double computation
  const Tensor w({6}, {1, 2, 3, -1, 0.5f, 0}), b({6}, {0, 1, 0, 1, 0, -2});
  const Tensor yw = qnum::layer_norm(x, w, b, 1e-3f);
  for (int r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int k = 0; k < 6; ++k) m += x.values()[r * 6 + k];
    m /= 6;
    for (int k = 0; k < 6; ++k) v += (x.values()[r * 6 + k] - m) * (x.values()[r * 6 + k] - m);
    v /= 6;
    for (int k = 0; k < 6; ++k) {
      const double ref = (x.values()[r * 6 + k] - m) / std::sqrt(v + 1e-3) * w.values()[k] + b.values()[k];
      CHECK(yw.values()[r * 6 + k] == doctest::Approx(ref).epsilon(1e-5));
    }
  }
  const Tensor a = Tensor::randn({2, 3, 5}, 4, 0.0f, 1.0f, true);
  const Tensor wa = Tensor::randn({5}, 5, 1.0f, 0.5f, true), ba = Tensor::randn({5}, 6, 0.0f, 1.0f, true);
  CHECK(gradcheck([](const Inputs& in) { return qnum::layer_norm(in[0], in[1], in[2]); }, {a, wa, ba}) == 0);
  CHECK(gradcheck([](const Inputs& in) { return qnum::layer_norm(in[0]); }, {a}) == 0);
  CHECK_THROWS_WITH_AS(qnum::layer_norm(x, Tensor::ones({5})), doctest::Contains("weight has shape [5], expected [6]"),
                       qnum::Error);
  CHECK_THROWS_AS(qnum::layer_norm(x, Tensor(), Tensor::ones({6, 1})), qnum::Error);
}

TEST_CASE("ops_nn: batch_norm training, running statistics and eval") {
  const Tensor x1 = Tensor::randn({4, 3}, 7, 2.0f, 3.0f), x2 = Tensor::randn({4, 3}, 8, -1.0f, 0.5f);
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  const Tensor y = qnum::batch_norm(x1, rm, rv, Tensor(), Tensor(), true, 0.1f);
  qnum::batch_norm(x2, rm, rv, Tensor(), Tensor(), true, 0.1f);
  for (int c = 0; c < 3; ++c) {
    double m = 0, v = 0;  // normalised output: per-channel mean 0, biased variance ~1
    for (int n = 0; n < 4; ++n) m += y.values()[n * 3 + c];
    for (int n = 0; n < 4; ++n) v += std::pow(y.values()[n * 3 + c] - m / 4, 2);
    CHECK(std::fabs(m / 4) < 1e-6);
    CHECK(v / 4 == doctest::Approx(1.0).epsilon(1e-3));
    // PyTorch's running statistics after two steps (unbiased variance for the update)
    double erm = 0, erv = 1;
    for (const Tensor* t : {&x1, &x2}) {
      double bm = 0, bv = 0;
      for (int n = 0; n < 4; ++n) bm += t->values()[n * 3 + c];
      bm /= 4;
      for (int n = 0; n < 4; ++n) bv += std::pow(t->values()[n * 3 + c] - bm, 2);
      erm = 0.9 * erm + 0.1 * bm;
      erv = 0.9 * erv + 0.1 * bv / 3;
    }
    CHECK(rm.values()[c] == doctest::Approx(erm).epsilon(1e-5));
    CHECK(rv.values()[c] == doctest::Approx(erv).epsilon(1e-5));
  }
  // eval uses the running statistics, and weight/bias
  const Tensor w({3}, {2, 1, -1}), b({3}, {0, 1, 2});
  const Tensor ye = qnum::batch_norm(x1, rm, rv, w, b, false);
  for (int j = 0; j < 12; ++j) {
    const int c = j % 3;
    const double ref =
        (x1.values()[j] - rm.values()[c]) / std::sqrt(rv.values()[c] + 1e-5) * w.values()[c] + b.values()[c];
    CHECK(ye.values()[j] == doctest::Approx(ref).epsilon(1e-5));
  }
  // [N, C, L] input: statistics over N and L
  const Tensor x3 = Tensor::randn({2, 3, 4}, 9, 1.0f, 2.0f);
  const Tensor y3 = qnum::batch_norm(x3, Tensor(), Tensor(), Tensor(), Tensor(), true);
  for (int c = 0; c < 3; ++c) {
    double m = 0;
    for (int n = 0; n < 2; ++n)
      for (int l = 0; l < 4; ++l) m += y3.values()[(n * 3 + c) * 4 + l];
    CHECK(std::fabs(m / 8) < 1e-6);
  }
}

TEST_CASE("ops_nn: batch_norm gradients and errors") {
  for (bool training : {true, false}) {
    for (const qnum::Shape& shape : {qnum::Shape{5, 3}, qnum::Shape{2, 3, 4}}) {
      CAPTURE(training);
      const Tensor x = Tensor::randn(shape, 10, 0.5f, 1.5f, true);
      const Tensor w = Tensor::randn({3}, 11, 1.0f, 0.3f, true), b = Tensor::randn({3}, 12, 0.0f, 1.0f, true);
      const Tensor rm({3}, {0.1f, -0.2f, 0.3f}), rv({3}, {1.5f, 0.7f, 2.0f});
      auto f = [&](const Inputs& in) { return qnum::batch_norm(in[0], rm, rv, in[1], in[2], training); };
      CHECK(gradcheck(f, {x, w, b}) == 0);
      auto f_plain = [&](const Inputs& in) { return qnum::batch_norm(in[0], rm, rv, Tensor(), Tensor(), training); };
      CHECK(gradcheck(f_plain, {x}) == 0);
    }
  }
  const Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  CHECK_THROWS_WITH_AS(qnum::batch_norm(Tensor::ones({1, 3}), rm, rv, Tensor(), Tensor(), true),
                       doctest::Contains("more than one value per channel"), qnum::Error);
  CHECK_THROWS_AS(qnum::batch_norm(Tensor::ones({1, 3, 1}), rm, rv, Tensor(), Tensor(), true), qnum::Error);
  CHECK(qnum::batch_norm(Tensor::ones({1, 3}), rm, rv, Tensor(), Tensor(), false).numel() == 3);  // eval: fine
  CHECK_THROWS_WITH_AS(qnum::batch_norm(Tensor::ones({2, 3}), Tensor(), rv, Tensor(), Tensor(), false),
                       doctest::Contains("running_mean is needed in eval mode"), qnum::Error);
  CHECK_THROWS_AS(qnum::batch_norm(Tensor::ones({2, 4}), rm, rv, Tensor(), Tensor(), true), qnum::Error);
  CHECK_THROWS_AS(qnum::batch_norm(Tensor::ones({2}), rm, rv), qnum::Error);
  CHECK_THROWS_AS(qnum::batch_norm(Tensor::ones({2, 3}), Tensor::zeros({3}, true), rv, Tensor(), Tensor(), true),
                  qnum::Error);
}

TEST_CASE("ops_nn: embedding values, weight gradient and bad indices") {
  const Tensor w = Tensor::randn({5, 3}, 13, 0.0f, 1.0f, true);
  const std::vector<std::int64_t> idx{4, 0, 4, 2};
  const Tensor y = qnum::embedding(idx, {2, 2}, w);
  CHECK(y.shape() == qnum::Shape{2, 2, 3});
  for (std::size_t i = 0; i < idx.size(); ++i)
    for (int k = 0; k < 3; ++k) CHECK(y.values()[i * 3 + k] == w.values()[idx[i] * 3 + k]);
  // gradient: ones scattered into rows (row 4 twice, row 1 and 3 never)
  Tensor w2 = w.detach().set_requires_grad(true);
  qnum::embedding(idx, {4}, w2).backward(Tensor::ones({4, 3}));
  const std::vector<float> expect{1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 2, 2};
  CHECK(grad_of(w2) == expect);
  CHECK(gradcheck([&](const Inputs& in) { return qnum::embedding(idx, {2, 2}, in[0]); }, {w}) == 0);
  const std::vector<std::int64_t> bad{1, 5};
  CHECK_THROWS_WITH_AS(qnum::embedding(bad, {2}, w), doctest::Contains("index 5 at position 1 is out of range [0, 5)"),
                       qnum::Error);
  const std::vector<std::int64_t> neg{-1};
  CHECK_THROWS_AS(qnum::embedding(neg, {1}, w), qnum::Error);
  CHECK_THROWS_AS(qnum::embedding(idx, {3}, w), qnum::Error);
  CHECK_THROWS_AS(qnum::embedding(idx, {4}, Tensor::ones({5})), qnum::Error);
}

TEST_CASE("ops_nn: dropout mask, scaling, identity modes and gradient") {
  const Tensor x = Tensor::randn({4000}, 14, 0.0f, 1.0f, true);
  const float p = 0.3f;
  const Tensor y = qnum::dropout(x, p, true, 42);
  const qnum::CounterRng rng(42);
  int dropped = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = rng.uniform4(static_cast<std::uint64_t>(i)) >= p;
    dropped += keep ? 0 : 1;
    CHECK(y.values()[i] == (keep ? x.values()[i] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f));
  }
  CHECK(std::fabs(dropped / 4000.0 - p) < 0.03);
  CHECK(qnum::dropout(x, p, true, 42).to_vector() == y.to_vector());  // same seed, same mask
  CHECK(qnum::dropout(x, p, true, 43).to_vector() != y.to_vector());
  CHECK(qnum::dropout(x, p, false, 42).id() == x.id());  // eval: identity
  CHECK(qnum::dropout(x, 0.0f, true, 42).id() == x.id());
  const Tensor a = Tensor::randn({3, 4}, 15, 0.0f, 1.0f, true);
  CHECK(gradcheck([](const Inputs& in) { return qnum::dropout(in[0], 0.5f, true, 7); }, {a}) == 0);
  CHECK_THROWS_WITH_AS(qnum::dropout(x, 1.0f, true, 1), doctest::Contains("must be in [0, 1)"), qnum::Error);
  CHECK_THROWS_AS(qnum::dropout(x, -0.1f, false, 1), qnum::Error);
  CHECK_THROWS_AS(qnum::dropout(x, std::numeric_limits<float>::quiet_NaN(), true, 1), qnum::Error);
}

TEST_CASE("ops_nn: cross_entropy values, ignore_index, gradients and errors") {
  const Tensor logits({3, 3}, {1, 2, 3, 1, 1, 1, 0, -1, 2});
  const std::vector<std::int64_t> t{2, 0, 1};
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  const double l1 = std::log(3.0);
  const double l2 = std::log(1.0 + std::exp(-1.0) + std::exp(2.0)) + 1.0;
  const Tensor loss = qnum::cross_entropy(logits, t);
  CHECK(loss.rank() == 0);
  CHECK(loss.item() == doctest::Approx((l0 + l1 + l2) / 3).epsilon(1e-6));
  // ignore_index: rows with it leave both the sum and the count
  const std::vector<std::int64_t> ti{2, -100, 1};
  CHECK(qnum::cross_entropy(logits, ti).item() == doctest::Approx((l0 + l2) / 2).epsilon(1e-6));
  const std::vector<std::int64_t> t7{7, 0, 7};
  CHECK(qnum::cross_entropy(logits, t7, 7).item() == doctest::Approx(l1).epsilon(1e-6));
  // gradient: (softmax - onehot) / count on used rows, 0 on ignored ones
  Tensor lg = logits.clone().set_requires_grad(true);
  qnum::cross_entropy(lg, ti).backward();
  for (int k = 0; k < 3; ++k) CHECK(lg.grad()[3 + k] == 0.0f);
  const auto sm = naive_softmax({1, 2, 3});
  for (int k = 0; k < 3; ++k) CHECK(lg.grad()[k] == doctest::Approx((sm[k] - (k == 2)) / 2).epsilon(1e-5));
  // all rows ignored: NaN loss (as PyTorch), zero gradient
  const std::vector<std::int64_t> all{-100, -100, -100};
  lg.zero_grad();
  const Tensor nan_loss = qnum::cross_entropy(lg, all);
  CHECK(std::isnan(nan_loss.item()));
  nan_loss.backward();
  for (float g : lg.grad()) CHECK(g == 0.0f);
  const Tensor a = Tensor::randn({4, 5}, 16, 0.0f, 2.0f, true);
  const std::vector<std::int64_t> ta{0, 4, -100, 2};
  CHECK(gradcheck([&](const Inputs& in) { return qnum::cross_entropy(in[0], ta); }, {a}) == 0);
  const std::vector<std::int64_t> bad{0, 3, 1};
  CHECK_THROWS_WITH_AS(qnum::cross_entropy(logits, bad), doctest::Contains("target 3 of row 1 is out of range [0, 3)"),
                       qnum::Error);
  const std::vector<std::int64_t> negative{0, -1, 1};
  CHECK_THROWS_AS(qnum::cross_entropy(logits, negative), qnum::Error);
  CHECK_THROWS_AS(qnum::cross_entropy(logits, std::vector<std::int64_t>{0, 1}), qnum::Error);
  CHECK_THROWS_AS(qnum::cross_entropy(Tensor::ones({3}), std::vector<std::int64_t>{0}), qnum::Error);
}

TEST_CASE("ops_nn: mse_loss values, gradients and shape mismatch") {
  const Tensor a({2, 2}, {1, 2, 3, 4}), b({2, 2}, {0, 2, 5, 3});
  CHECK(qnum::mse_loss(a, b).item() == doctest::Approx((1.0 + 0 + 4 + 1) / 4));
  const Tensor x = Tensor::randn({3, 4}, 17, 0.0f, 1.0f, true), y = Tensor::randn({3, 4}, 18, 0.0f, 1.0f, true);
  CHECK(gradcheck([](const Inputs& in) { return qnum::mse_loss(in[0], in[1]); }, {x, y}) == 0);
  CHECK_THROWS_WITH_AS(qnum::mse_loss(a, Tensor::ones({4})), doctest::Contains("differ"), qnum::Error);
}

TEST_CASE("ops_nn: fake_quantize forward is Format::quantize bit for bit") {
  const Tensor x = Tensor::randn({4, 32}, 19, 0.0f, 3.0f);
  for (const char* text :
       {"integer:width=8,frac_width=4", "integer:width=4,frac_width=1,rounding=stochastic", "fp8_e4m3", "fp8_e5m2",
        "log:width=8", "mxint8", "mxfp4_e2m1", "block_fp:width=8,exponent_width=8,block_size=16", "binary", "ternary",
        "scale_integer:width=8", "integer:width=8,frac_width=4,mode=mase"}) {
    CAPTURE(text);
    const auto f = qnum::Format::parse(text);
    const Tensor y = qnum::fake_quantize(x, f);
    const auto ref = f.quantize(x.values(), x.shape(), qnum::Role::activation);
    REQUIRE(y.numel() == static_cast<std::int64_t>(ref.size()));
    for (std::size_t i = 0; i < ref.size(); ++i)
      CHECK(std::bit_cast<std::uint32_t>(y.values()[i]) == std::bit_cast<std::uint32_t>(ref[i]));
  }
  CHECK(qnum::fake_quantize(Tensor::scalar(0.3f), qnum::Format::parse("integer:width=8,frac_width=2")).item() == 0.25f);
}

TEST_CASE("ops_nn: fake_quantize straight-through gradients (exact values)") {
  // integer W=4, F=1: values k/2, k in [-8, 7] -> range [-4, 3.5]
  const Tensor x0({8}, {-5.0f, -4.0f, -3.9f, 0.2f, 3.5f, 3.6f, 100.0f, std::numeric_limits<float>::quiet_NaN()});
  const Tensor g({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  const std::vector<float> gv = g.to_vector();
  {
    Tensor x = x0.clone().set_requires_grad(true);
    qnum::fake_quantize(x, qnum::Format::parse("integer:width=4,frac_width=1")).backward(g);
    CHECK(grad_of(x) == gv);  // identity (the default)
  }
  {
    Tensor x = x0.clone().set_requires_grad(true);
    qnum::fake_quantize(x, qnum::Format::parse("integer:width=4,frac_width=1,ste=clipped")).backward(g);
    CHECK(grad_of(x) == std::vector<float>{0, 2, 3, 4, 5, 0, 0, 0});
  }
  {  // unsigned: range [0, 15/2]
    Tensor x({4}, {-0.1f, 0.0f, 7.5f, 7.6f}, true);
    qnum::fake_quantize(x, qnum::Format::parse("integer:width=4,frac_width=1,is_signed=false,ste=clipped"))
        .backward(Tensor::ones({4}));
    CHECK(grad_of(x) == std::vector<float>{0, 1, 1, 0});
  }
  {  // minifloat: symmetric [-448, 448] for OCP E4M3
    Tensor x({4}, {-449.0f, -448.0f, 448.0f, 1000.0f}, true);
    qnum::fake_quantize(x, qnum::Format::parse("fp8_e4m3:ste=clipped")).backward(Tensor::ones({4}));
    CHECK(grad_of(x) == std::vector<float>{0, 1, 1, 0});
  }
  {  // scale_integer rescales each row: nothing saturates, clipped passes everything
    Tensor x({1, 3}, {-50.0f, 1.0f, 70.0f}, true);
    qnum::fake_quantize(x, qnum::Format::parse("scale_integer:width=8,ste=clipped")).backward(Tensor::ones({1, 3}));
    CHECK(grad_of(x) == std::vector<float>{1, 1, 1});
  }
  CHECK(qnum::ste_range(qnum::Format::parse("integer:width=4,frac_width=1")).lo == -4.0);
  CHECK(qnum::ste_range(qnum::Format::parse("integer:width=4,frac_width=1")).hi == 3.5);
  // no grad requested: no tape
  CHECK(!qnum::fake_quantize(x0, qnum::Format::parse("fp8_e4m3")).requires_grad());
}

TEST_CASE("ops_nn: fake_quantize rejects shape-changing formats") {
  const auto rs = qnum::Format::parse("residual_sign:levels=2,x_quantizer=none,means=0.7x0.3");
  CHECK_THROWS_WITH_AS(qnum::fake_quantize(Tensor::ones({2, 4}), rs), doctest::Contains("changes the tensor's shape"),
                       qnum::Error);
}
