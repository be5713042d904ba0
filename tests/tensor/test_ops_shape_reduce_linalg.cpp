// Shape ops (reshape, flatten, transpose, permute), reductions (sum, mean) and matrix
// products (matmul, linear): values against hand-computed or naive-loop results, a
// finite-difference gradient check for every op, and shape errors.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gradcheck.hpp"
#include "qnum/tensor/ops_elementwise.hpp"
#include "qnum/tensor/ops_linalg.hpp"
#include "qnum/tensor/ops_nn.hpp"
#include "qnum/tensor/ops_reduce.hpp"
#include "qnum/tensor/ops_shape.hpp"

using qnum::Shape;
using qnum::Tensor;
using qnum_test::gradcheck;

namespace {

using Inputs = std::vector<Tensor>;

std::vector<float> vec(const Tensor& t) { return t.to_vector(); }
std::vector<float> grad_vec(const Tensor& t) { return {t.grad().begin(), t.grad().end()}; }

/// Naive C[M,N] = A[M,K]·B[K,N] in double, plus Σ_k |a_ik b_kj| per element (the scale of
/// the float32 rounding error).
struct Reference {
  std::vector<double> c, scale;
};
Reference naive_mm(const float* a, const float* b, std::int64_t M, std::int64_t N, std::int64_t K) {
  Reference r{std::vector<double>(static_cast<std::size_t>(M * N)),
              std::vector<double>(static_cast<std::size_t>(M * N))};
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(a[i * K + k]) * b[k * N + j];
        r.c[static_cast<std::size_t>(i * N + j)] += p;
        r.scale[static_cast<std::size_t>(i * N + j)] += std::fabs(p);
      }
  return r;
}

/// Every element of `got` within 1e-5 (relative to Σ|a·b|) of the reference; returns misses.
int count_far(const float* got, const Reference& ref) {
  int bad = 0;
  for (std::size_t i = 0; i < ref.c.size(); ++i)
    if (std::fabs(got[i] - ref.c[i]) > 1e-5 * ref.scale[i] + 1e-30) ++bad;
  return bad;
}

/// matmul(a, b) for a [batch..., M, K] and b [batch..., K, N] (or b [K, N] when !b_batched)
/// against the naive loop, matrix by matrix.
int check_matmul_values(const Shape& sa, const Shape& sb, std::uint64_t seed) {
  const Tensor a = Tensor::randn(sa, seed), b = Tensor::randn(sb, seed + 1);
  const Tensor c = qnum::matmul(a, b);
  const std::int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  const bool b_batched = sb.size() > 2;
  const std::int64_t batch = a.numel() / (M * K);
  Shape expected = sa;
  expected.back() = N;
  CHECK(c.shape() == expected);
  int bad = 0;
  for (std::int64_t i = 0; i < batch; ++i) {
    const Reference ref = naive_mm(a.data() + i * M * K, b.data() + (b_batched ? i * K * N : 0), M, N, K);
    bad += count_far(c.data() + i * M * N, ref);
  }
  return bad;
}

auto fn_matmul = [](const Inputs& in) { return qnum::matmul(in[0], in[1]); };

}  // namespace

// ---- reshape / flatten ---------------------------------------------------------------------

TEST_CASE("reshape: shapes, -1 inference and a shared storage") {
  Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor y = qnum::reshape(x, {3, 2});
  CHECK(y.shape() == Shape{3, 2});
  CHECK(vec(y) == vec(x));
  CHECK(qnum::reshape(x, {-1}).shape() == Shape{6});
  CHECK(qnum::reshape(x, {1, -1, 2}).shape() == Shape{1, 3, 2});
  CHECK(qnum::reshape(x, {6, 1, 1, 1}).shape() == Shape{6, 1, 1, 1});
  CHECK(qnum::reshape(Tensor::scalar(4.0f), {1, 1}).shape() == Shape{1, 1});
  CHECK(qnum::reshape(Tensor({1}, {4.0f}), {}).item() == 4.0f);
  CHECK(qnum::reshape(Tensor::zeros({0, 3}), {3, -1, 2}).shape() == Shape{3, 0, 2});
  // a view: an in-place change of either is seen by the other
  x.values()[0] = 10.0f;
  CHECK(y.values()[0] == 10.0f);
  Tensor z = qnum::reshape(x, {6});
  z.values()[5] = -6.0f;
  CHECK(x.values()[5] == -6.0f);
  // no grad flows without a parameter; with one, the result requires it
  CHECK(!y.requires_grad());
  CHECK(qnum::reshape(Tensor({2}, {1, 2}, true), {2, 1}).requires_grad());
}

TEST_CASE("reshape: errors") {
  const Tensor x = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH_AS(qnum::reshape(x, {4, 2}),
                       doctest::Contains("reshape: cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::reshape(x, {-1, -1}), doctest::Contains("more than one -1"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::reshape(x, {4, -1}), doctest::Contains("cannot reshape [2, 3]"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::reshape(x, {-2, -3}), doctest::Contains("invalid dimension -2"), qnum::Error);
  CHECK_THROWS_AS(qnum::reshape(x, {0, -1}), qnum::Error);
  CHECK_THROWS_AS(qnum::reshape(x, {1, 1, 1, 2, 3}), qnum::Error);  // rank 5
  CHECK_THROWS_AS(qnum::reshape(Tensor(), {1}), qnum::Error);
}

TEST_CASE("reshape and flatten: gradients") {
  for (const Shape& to : {Shape{6, 4}, Shape{-1}, Shape{2, 2, -1}, Shape{4, 3, 2, 1}}) {
    CAPTURE(qnum::to_string(to));
    const Tensor x = Tensor::randn({2, 3, 4}, 1, 0.0f, 1.0f, true);
    // multiply after reshaping, so the gradient differs per element
    const Tensor w = Tensor::randn(qnum::reshape(x, to).shape(), 2);
    CHECK(gradcheck([&](const Inputs& in) { return qnum::mul(qnum::reshape(in[0], to), w); }, {x}) == 0);
  }
  const Tensor x = Tensor::randn({2, 3, 2, 2}, 3, 0.0f, 1.0f, true);
  for (int start : {0, 1, 2, -2}) {
    CAPTURE(start);
    CHECK(gradcheck([&](const Inputs& in) { return qnum::exp(qnum::flatten(in[0], start)); }, {x}) == 0);
  }
  // the gradient of a view reaches the tensor it views
  Tensor p({2, 2}, {1, 2, 3, 4}, true);
  qnum::mul(qnum::reshape(p, {4}), Tensor({4}, {1, 2, 3, 4})).backward(Tensor::ones({4}));
  CHECK(grad_vec(p) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("flatten: shapes and errors") {
  const Tensor x = Tensor::zeros({2, 3, 4, 5});
  CHECK(qnum::flatten(x).shape() == Shape{2, 60});
  CHECK(qnum::flatten(x, 0).shape() == Shape{120});
  CHECK(qnum::flatten(x, 1, 2).shape() == Shape{2, 12, 5});
  CHECK(qnum::flatten(x, -2).shape() == Shape{2, 3, 20});
  CHECK(qnum::flatten(x, 3).shape() == Shape{2, 3, 4, 5});
  CHECK(qnum::flatten(Tensor::scalar(1.0f)).shape() == Shape{1});
  CHECK_THROWS_WITH_AS(qnum::flatten(x, 2, 1), doctest::Contains("start_dim 2 comes after end_dim 1"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::flatten(x, 4),
                       doctest::Contains("flatten: dimension 4 out of range for shape [2, 3, 4, 5]"), qnum::Error);
  CHECK_THROWS_AS(qnum::flatten(Tensor::zeros({3})), qnum::Error);  // start_dim 1 of a 1-D tensor
}

// ---- transpose / permute -------------------------------------------------------------------

TEST_CASE("transpose and permute: values") {
  const Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor t = qnum::transpose(x, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(vec(t) == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(vec(qnum::transpose(x, -1, -2)) == vec(t));
  CHECK(vec(qnum::transpose(x, 1, 1)) == vec(x));
  CHECK(vec(qnum::permute(x, {1, 0})) == vec(t));
  // t is a copy
  CHECK(t.id() != x.id());

  // 4-D against a naive loop: y[a][b][c][d] = x[index by the permutation]
  const Tensor u = Tensor::randn({2, 3, 4, 5}, 11);
  const std::vector<int> dims{2, 0, 3, 1};
  const Tensor p = qnum::permute(u, dims);
  CHECK(p.shape() == Shape{4, 2, 5, 3});
  const std::int64_t st[4] = {60, 20, 5, 1};
  int bad = 0;
  std::int64_t flat = 0;
  for (std::int64_t i0 = 0; i0 < 4; ++i0)
    for (std::int64_t i1 = 0; i1 < 2; ++i1)
      for (std::int64_t i2 = 0; i2 < 5; ++i2)
        for (std::int64_t i3 = 0; i3 < 3; ++i3) {
          const std::int64_t src = i0 * st[2] + i1 * st[0] + i2 * st[3] + i3 * st[1];
          bad += p.values()[flat++] != u.values()[src];
        }
  CHECK(bad == 0);
  // negative dims, and a permutation followed by its inverse is the identity
  CHECK(vec(qnum::permute(u, {-2, -4, -1, -3})) == vec(p));
  CHECK(vec(qnum::permute(p, {1, 3, 0, 2})) == vec(u));
  // transpose of dims 1 and 3 of a 4-D tensor = the matching permutation
  CHECK(vec(qnum::transpose(u, 1, -1)) == vec(qnum::permute(u, {0, 3, 2, 1})));
  CHECK(qnum::transpose(u, 1, -1).shape() == Shape{2, 5, 4, 3});
  // rank 1, size-1 and empty dimensions
  CHECK(vec(qnum::permute(Tensor({3}, {1, 2, 3}), {0})) == std::vector<float>{1, 2, 3});
  CHECK(qnum::transpose(Tensor::zeros({1, 0, 3}), 0, 2).shape() == Shape{3, 0, 1});
}

TEST_CASE("transpose and permute: gradients") {
  const Tensor x2 = Tensor::randn({3, 5}, 4, 0.0f, 1.0f, true);
  const Tensor x3 = Tensor::randn({2, 3, 4}, 5, 0.0f, 1.0f, true);
  const Tensor x4 = Tensor::randn({2, 1, 3, 2}, 6, 0.0f, 1.0f, true);
  CHECK(gradcheck([](const Inputs& in) { return qnum::transpose(in[0], 0, 1); }, {x2}) == 0);
  CHECK(gradcheck([](const Inputs& in) { return qnum::tanh(qnum::transpose(in[0], -1, 0)); }, {x3}) == 0);
  CHECK(gradcheck([](const Inputs& in) { return qnum::transpose(in[0], 1, 2); }, {x3}) == 0);
  CHECK(gradcheck([](const Inputs& in) { return qnum::exp(qnum::permute(in[0], {2, 0, 1})); }, {x3}) == 0);
  CHECK(gradcheck([](const Inputs& in) { return qnum::tanh(qnum::permute(in[0], {3, -2, 0, 1})); }, {x4}) == 0);
  // transposed twice and multiplied with the original: x·xᵀᵀ = x², gradient 2x
  Tensor y({2, 2}, {1, 2, 3, 4}, true);
  qnum::mul(y, qnum::transpose(qnum::transpose(y, 0, 1), 1, 0)).backward(Tensor::ones({2, 2}));
  CHECK(grad_vec(y) == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("transpose and permute: errors") {
  const Tensor x = Tensor::zeros({2, 3, 4});
  CHECK_THROWS_WITH_AS(qnum::transpose(x, 0, 3),
                       doctest::Contains("transpose: dimension 3 out of range for shape [2, 3, 4]"), qnum::Error);
  CHECK_THROWS_AS(qnum::transpose(x, -4, 0), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::permute(x, {0, 1}),
                       doctest::Contains("permute: dims (0, 1) has 2 entries for shape [2, 3, 4]"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::permute(x, {0, 1, -2}), doctest::Contains("repeat dimension 1"), qnum::Error);
  CHECK_THROWS_AS(qnum::permute(x, {0, 1, 3}), qnum::Error);
  CHECK_THROWS_AS(qnum::transpose(Tensor::scalar(1.0f), 0, 0), qnum::Error);
}

// ---- sum / mean ----------------------------------------------------------------------------

TEST_CASE("sum and mean: values and shapes") {
  const Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor s = qnum::sum(x);
  CHECK(s.rank() == 0);
  CHECK(s.item() == 21.0f);
  CHECK(qnum::mean(x).item() == 3.5f);
  CHECK(qnum::mean(x).rank() == 0);
  CHECK(qnum::sum(Tensor::zeros({0, 3})).item() == 0.0f);
  CHECK(std::isnan(qnum::mean(Tensor::zeros({0})).item()));
  CHECK(qnum::sum(Tensor::scalar(2.5f)).item() == 2.5f);

  CHECK(vec(qnum::sum(x, 0)) == std::vector<float>{5, 7, 9});
  CHECK(qnum::sum(x, 0).shape() == Shape{3});
  CHECK(qnum::sum(x, 0, true).shape() == Shape{1, 3});
  CHECK(vec(qnum::sum(x, 1)) == std::vector<float>{6, 15});
  CHECK(vec(qnum::sum(x, -1, true)) == std::vector<float>{6, 15});
  CHECK(qnum::sum(x, -1, true).shape() == Shape{2, 1});
  CHECK(vec(qnum::mean(x, 0)) == std::vector<float>{2.5f, 3.5f, 4.5f});
  CHECK(vec(qnum::mean(x, -1)) == std::vector<float>{2, 5});
  CHECK(qnum::mean(x, 1, true).shape() == Shape{2, 1});
  CHECK(qnum::sum(Tensor({3}, {1, 2, 3}), 0).rank() == 0);
  CHECK(qnum::sum(Tensor::zeros({2, 0}), 1).shape() == Shape{2});
  CHECK(vec(qnum::sum(Tensor::zeros({2, 0}), 1)) == std::vector<float>{0, 0});

  // 4-D, every dimension, against a naive loop
  const Tensor u = Tensor::randn({2, 3, 4, 5}, 21);
  const Shape sh = u.shape();
  for (int d = 0; d < 4; ++d) {
    CAPTURE(d);
    std::vector<double> ref(static_cast<std::size_t>(u.numel() / sh[static_cast<std::size_t>(d)]), 0.0);
    std::int64_t flat = 0;
    for (std::int64_t i0 = 0; i0 < sh[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < sh[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < sh[2]; ++i2)
          for (std::int64_t i3 = 0; i3 < sh[3]; ++i3) {
            std::int64_t idx[4] = {i0, i1, i2, i3}, o = 0;
            for (int k = 0; k < 4; ++k)
              if (k != d) o = o * sh[static_cast<std::size_t>(k)] + idx[k];
            ref[static_cast<std::size_t>(o)] += u.values()[flat++];
          }
    const Tensor sd = qnum::sum(u, d), md = qnum::mean(u, d - 4, true);
    Shape kept = sh;
    kept[static_cast<std::size_t>(d)] = 1;
    CHECK(md.shape() == kept);
    int bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      bad += std::fabs(sd.values()[i] - ref[i]) > 1e-6 * (1 + std::fabs(ref[i]));
      bad += std::fabs(md.values()[i] - ref[i] / sh[static_cast<std::size_t>(d)]) > 1e-6 * (1 + std::fabs(ref[i]));
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("sum and mean: gradients") {
  const Tensor x1 = Tensor::randn({7}, 30, 0.0f, 1.0f, true);
  const Tensor x2 = Tensor::randn({3, 4}, 31, 0.0f, 1.0f, true);
  const Tensor x4 = Tensor::randn({2, 3, 1, 4}, 32, 0.0f, 1.0f, true);
  for (const Tensor& x : {x1, x2, x4}) {
    CAPTURE(qnum::to_string(x.shape()));
    CHECK(gradcheck([](const Inputs& in) { return qnum::sum(in[0]); }, {x}) == 0);
    CHECK(gradcheck([](const Inputs& in) { return qnum::mean(qnum::exp(in[0])); }, {x}) == 0);
    const int r = static_cast<int>(x.rank());
    for (int d = -r; d < r; ++d)
      for (bool keep : {false, true}) {
        CAPTURE(d);
        CAPTURE(keep);
        CHECK(gradcheck([&](const Inputs& in) { return qnum::sum(in[0], d, keep); }, {x}) == 0);
        CHECK(gradcheck([&](const Inputs& in) { return qnum::tanh(qnum::mean(in[0], d, keep)); }, {x}) == 0);
      }
  }
  // exact gradients: d sum / dx = 1, d mean / dx = 1/n
  Tensor y({2, 2}, {1, 2, 3, 4}, true);
  qnum::mean(y).backward();
  CHECK(grad_vec(y) == std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f});
  y.zero_grad();
  qnum::sum(y, 0).backward(Tensor({2}, {1, 2}));
  CHECK(grad_vec(y) == std::vector<float>{1, 2, 1, 2});
}

TEST_CASE("sum and mean: errors") {
  const Tensor x = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH_AS(qnum::sum(x, 2), doctest::Contains("sum: dimension 2 out of range for shape [2, 3]"),
                       qnum::Error);
  CHECK_THROWS_AS(qnum::mean(x, -3), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::sum(Tensor::scalar(1.0f), 0), doctest::Contains("rank-0"), qnum::Error);
  CHECK_THROWS_AS(qnum::sum(Tensor()), qnum::Error);
}

// ---- matmul --------------------------------------------------------------------------------

TEST_CASE("matmul: hand-computed values") {
  const Tensor a({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b({3, 2}, {7, 8, 9, 10, 11, 12});
  const Tensor c = qnum::matmul(a, b);
  CHECK(c.shape() == Shape{2, 2});
  CHECK(vec(c) == std::vector<float>{58, 64, 139, 154});
  // batched: the second matrix of each operand is the first times 2 / the identity
  const Tensor ab({2, 2, 2}, {1, 2, 3, 4, 2, 4, 6, 8});
  const Tensor bb({2, 2, 2}, {1, 1, 0, 1, 1, 0, 0, 1});
  CHECK(vec(qnum::matmul(ab, bb)) == std::vector<float>{1, 3, 3, 7, 2, 4, 6, 8});
  // shared b
  CHECK(vec(qnum::matmul(ab, Tensor({2, 1}, {1, -1}))) == std::vector<float>{-1, -1, -2, -2});
  // K = 0 gives zeros; M or N = 0 an empty result
  CHECK(vec(qnum::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}))) == std::vector<float>(6, 0.0f));
  CHECK(qnum::matmul(Tensor::zeros({0, 4}), Tensor::zeros({4, 3})).shape() == Shape{0, 3});
}

TEST_CASE("matmul: values within 1e-5 of a double-precision loop") {
  // single rows, odd sizes, K beyond one 256-long kernel chunk, sizes past the register tile
  const std::vector<std::vector<std::int64_t>> mkn = {{1, 1, 1},    {1, 7, 3},   {5, 1, 9},     {7, 13, 5},
                                                      {33, 65, 17}, {1, 300, 3}, {20, 257, 31}, {64, 64, 64}};
  std::uint64_t seed = 100;
  for (const auto& s : mkn) {
    const std::int64_t M = s[0], K = s[1], N = s[2];
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    CHECK(check_matmul_values({M, K}, {K, N}, seed += 2) == 0);
    CHECK(check_matmul_values({3, M, K}, {3, K, N}, seed += 2) == 0);
    CHECK(check_matmul_values({2, 3, M, K}, {2, 3, K, N}, seed += 2) == 0);
    CHECK(check_matmul_values({3, M, K}, {K, N}, seed += 2) == 0);
    CHECK(check_matmul_values({2, 1, M, K}, {K, N}, seed += 2) == 0);
  }
}

TEST_CASE("matmul: gradients") {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{1, 1}, {1, 1}},    {{2, 3}, {3, 4}},       {{1, 5}, {5, 3}},       {{4, 1}, {1, 3}},
      {{3, 7}, {7, 1}},    {{2, 3, 4}, {2, 4, 3}}, {{3, 1, 5}, {3, 5, 2}}, {{2, 2, 3, 2}, {2, 2, 2, 3}},
      {{2, 3, 4}, {4, 5}}, {{2, 2, 1, 3}, {3, 2}}, {{1, 2, 3}, {3, 3}}};
  std::uint64_t seed = 200;
  for (const Case& c : cases) {
    CAPTURE(qnum::to_string(c.a));
    CAPTURE(qnum::to_string(c.b));
    const Tensor a = Tensor::randn(c.a, ++seed, 0.0f, 1.0f, true);
    const Tensor b = Tensor::randn(c.b, ++seed, 0.0f, 1.0f, true);
    CHECK(gradcheck(fn_matmul, {a, b}) == 0);
    // one operand a constant: only the other gets a gradient
    const Tensor a_const = a.detach();
    CHECK(gradcheck(fn_matmul, {a_const, b}) == 0);
    CHECK(gradcheck(fn_matmul, {a, b.detach()}) == 0);
    CHECK(!a_const.has_grad());
  }
  // exact: d(sum(A·B))/dA = row sums of B broadcast, /dB = column sums of A
  Tensor a({2, 2}, {1, 2, 3, 4}, true), b({2, 2}, {5, 6, 7, 8}, true);
  qnum::sum(qnum::matmul(a, b)).backward();
  CHECK(grad_vec(a) == std::vector<float>{11, 15, 11, 15});
  CHECK(grad_vec(b) == std::vector<float>{4, 4, 6, 6});
  // a shared b accumulates over the batch
  Tensor ab = Tensor::ones({3, 2, 2}), bs({2, 2}, {1, 0, 0, 1}, true);
  qnum::sum(qnum::matmul(ab, bs)).backward();
  CHECK(grad_vec(bs) == std::vector<float>{6, 6, 6, 6});
}

TEST_CASE("matmul: errors name both shapes") {
  const auto err = [](const Shape& a, const Shape& b) { return qnum::matmul(Tensor::zeros(a), Tensor::zeros(b)); };
  CHECK_THROWS_WITH_AS(err({2, 3}, {4, 5}), "matmul: [2, 3] x [4, 5]: inner dimensions 3 and 4 differ", qnum::Error);
  CHECK_THROWS_WITH_AS(err({2, 3, 4}, {3, 4, 5}),
                       doctest::Contains("matmul: [2, 3, 4] x [3, 4, 5]: batch dimensions [2] and [3] differ"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(err({2, 2, 3, 4}, {2, 4, 5}), doctest::Contains("batch dimensions [2, 2] and [2] differ"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(err({3, 4}, {2, 4, 5}), doctest::Contains("matmul: [3, 4] x [2, 4, 5]"), qnum::Error);
  CHECK_THROWS_WITH_AS(err({4}, {4, 5}), doctest::Contains("matmul: [4] x [4, 5]: both operands need rank 2"),
                       qnum::Error);
  CHECK_THROWS_AS(err({2, 3, 4}, {2, 5, 4}), qnum::Error);
  CHECK_THROWS_AS(qnum::matmul(Tensor(), Tensor::zeros({2, 2})), qnum::Error);
}

// ---- linear --------------------------------------------------------------------------------

TEST_CASE("linear: values") {
  const Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor w({2, 3}, {1, 0, -1, 2, 1, 0});  // [out = 2, in = 3]
  const Tensor b({2}, {10, 20});
  CHECK(vec(qnum::linear(x, w)) == std::vector<float>{-2, 4, -2, 13});
  CHECK(vec(qnum::linear(x, w, b)) == std::vector<float>{8, 24, 8, 33});
  const Tensor y1 = qnum::linear(Tensor({3}, {1, 2, 3}), w, b);
  CHECK(y1.shape() == Shape{2});
  CHECK(vec(y1) == std::vector<float>{8, 24});
  // 3-D input against matmul with the transposed weight
  const Tensor x3 = Tensor::randn({2, 5, 17}, 40), w3 = Tensor::randn({9, 17}, 41), b3 = Tensor::randn({9}, 42);
  const Tensor y3 = qnum::linear(x3, w3, b3);
  CHECK(y3.shape() == Shape{2, 5, 9});
  const Tensor wt = qnum::transpose(w3, 0, 1);
  const Reference ref = naive_mm(x3.data(), wt.data(), 10, 9, 17);
  int bad = 0;
  for (std::int64_t r = 0; r < 10; ++r)
    for (std::int64_t j = 0; j < 9; ++j) {
      const auto i = static_cast<std::size_t>(r * 9 + j);
      const double expect = ref.c[i] + b3.values()[static_cast<std::size_t>(j)];
      bad += std::fabs(y3.values()[i] - expect) >
             1e-5 * (ref.scale[i] + std::fabs(b3.values()[static_cast<std::size_t>(j)]));
    }
  CHECK(bad == 0);
  CHECK(count_far(qnum::linear(x3, w3).data(), ref) == 0);
}

TEST_CASE("linear: gradients with and without bias") {
  struct Case {
    Shape x;
    std::int64_t out;
  };
  const std::vector<Case> cases = {{{1, 1}, 1}, {{1, 4}, 3}, {{3, 5}, 1}, {{5}, 2}, {{2, 3, 7}, 5}, {{2, 1, 2, 3}, 4}};
  std::uint64_t seed = 300;
  for (const Case& c : cases) {
    CAPTURE(qnum::to_string(c.x));
    CAPTURE(c.out);
    const Tensor x = Tensor::randn(c.x, ++seed, 0.0f, 1.0f, true);
    const Tensor w = Tensor::randn({c.out, c.x.back()}, ++seed, 0.0f, 1.0f, true);
    const Tensor b = Tensor::randn({c.out}, ++seed, 0.0f, 1.0f, true);
    CHECK(gradcheck([](const Inputs& in) { return qnum::linear(in[0], in[1], in[2]); }, {x, w, b}) == 0);
    CHECK(gradcheck([](const Inputs& in) { return qnum::linear(in[0], in[1]); }, {x, w}) == 0);
    CHECK(gradcheck([](const Inputs& in) { return qnum::linear(in[0], in[1], in[2]); }, {x.detach(), w, b}) == 0);
    CHECK(gradcheck([](const Inputs& in) { return qnum::linear(in[0], in[1], in[2]); }, {x, w.detach(), b}) == 0);
  }
  // a small MLP: linear -> relu -> linear -> mean, gradients to every parameter
  const Tensor x = Tensor::randn({4, 3}, 400, 0.0f, 1.0f, true);
  const Tensor w1 = Tensor::randn({6, 3}, 401, 0.0f, 1.0f, true), b1 = Tensor::randn({6}, 402, 0.0f, 1.0f, true);
  const Tensor w2 = Tensor::randn({2, 6}, 403, 0.0f, 1.0f, true), b2 = Tensor::randn({2}, 404, 0.0f, 1.0f, true);
  CHECK(gradcheck(
            [](const Inputs& in) {
              return qnum::mean(qnum::linear(qnum::tanh(qnum::linear(in[0], in[1], in[2])), in[3], in[4]), 0);
            },
            {x, w1, b1, w2, b2}) == 0);
  // exact bias gradient: the row sum of the output gradient
  Tensor bb({2}, {0, 0}, true);
  qnum::linear(Tensor::ones({3, 2}), Tensor::ones({2, 2}), bb).backward(Tensor({3, 2}, {1, 2, 3, 4, 5, 6}));
  CHECK(grad_vec(bb) == std::vector<float>{9, 12});
}

namespace {
/// n values k·2^-frac with random int8 codes k (the first ones at -128 and 127).
Tensor on_fixed8_grid(Shape shape, int frac, std::uint32_t seed, bool grad) {
  std::mt19937 g(seed);
  std::vector<float> v(static_cast<std::size_t>(qnum::numel(shape)));
  for (auto& x : v) x = std::ldexp(static_cast<float>(static_cast<int>(g() % 256) - 128), -frac);
  v[0] = std::ldexp(-128.0f, -frac);
  if (v.size() > 1) v[1] = std::ldexp(127.0f, -frac);
  return Tensor(std::move(shape), v, grad);
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("linear_fixed8: the int8 product gives linear()'s values and gradients, bit for bit") {
  struct Case {
    Shape x;
    std::int64_t out;
    int xf, wf;
  };
  const std::vector<Case> cases = {{{1, 1}, 1, 4, 7},      {{7, 13}, 29, 4, 7},   {{2, 64, 128}, 384, 4, 7},
                                   {{33, 1024}, 40, 0, 0}, {{5, 70}, 33, -2, 12}, {{3, 9}, 70, 40, 45}};
  std::uint32_t seed = 500;
  for (const Case& c : cases) {
    CAPTURE(qnum::to_string(c.x));
    CAPTURE(c.out);
    Tensor x = on_fixed8_grid(c.x, c.xf, ++seed, true), w = on_fixed8_grid({c.out, c.x.back()}, c.wf, ++seed, true);
    Tensor b = Tensor::randn({c.out}, ++seed, 0.0f, 1.0f, true);
    for (const bool with_bias : {true, false}) {
      const Tensor bias = with_bias ? b : Tensor();
      const Tensor y = qnum::linear_fixed8(x, c.xf, w, c.wf, bias), want = qnum::linear(x, w, bias);
      CHECK(same_bits(vec(y), vec(want)));
      const Tensor gy = Tensor::randn(y.shape(), ++seed);
      x.zero_grad();
      w.zero_grad();
      b.zero_grad();
      y.backward(gy);
      const auto gx = grad_vec(x), gw = grad_vec(w), gb = grad_vec(b);
      x.zero_grad();
      w.zero_grad();
      b.zero_grad();
      want.backward(gy);
      CHECK(same_bits(gx, grad_vec(x)));
      CHECK(same_bits(gw, grad_vec(w)));
      CHECK(same_bits(gb, grad_vec(b)));
    }
  }
}

TEST_CASE("linear_fixed8: values off the grid, NaN, Inf and long rows take linear()") {
  const Tensor w = on_fixed8_grid({6, 21}, 7, 1, false), b = Tensor::randn({6}, 2);
  for (const float odd : {0.01f, std::nanf(""), INFINITY, -300.0f, 8.0f /* = 128·2^-4: out of range */}) {
    CAPTURE(odd);
    for (const std::size_t at : {std::size_t{37}, std::size_t{83}}) {  // a vector lane; the scalar tail (84 values)
      Tensor x = on_fixed8_grid({4, 21}, 4, 3, false);
      x.values()[at] = odd;
      const auto y = vec(qnum::linear_fixed8(x, 4, w, 7, b)), want = vec(qnum::linear(x, w, b));
      CHECK(same_bits(y, want));
    }
  }
  Tensor w2 = w.detach().clone();
  w2.values()[5] = 0.5f / 256.0f;  // a multiple of 2^-9, not of 2^-7
  const Tensor x = on_fixed8_grid({4, 21}, 4, 3, false);
  CHECK(same_bits(vec(qnum::linear_fixed8(x, 4, w2, 7, b)), vec(qnum::linear(x, w2, b))));
  // in > kGemmFixed8ExactK: the fp32 product rounds, so linear() it is.
  const Tensor xl = on_fixed8_grid({3, 1100}, 4, 4, false), wl = on_fixed8_grid({2, 1100}, 7, 5, false);
  CHECK(same_bits(vec(qnum::linear_fixed8(xl, 4, wl, 7)), vec(qnum::linear(xl, wl))));
  CHECK_THROWS_AS(qnum::linear_fixed8(x, 4, Tensor::zeros({6, 22}), 7), qnum::Error);
}

TEST_CASE("linear: errors") {
  const Tensor x = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH_AS(
      qnum::linear(x, Tensor::zeros({4, 5})),
      doctest::Contains("linear: input [2, 3] and weight [4, 5]: the input's last dimension must be in = 5"),
      qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::linear(x, Tensor::zeros({4, 3}), Tensor::zeros({3})),
                       doctest::Contains("linear: bias [3] does not match weight [4, 3] (expected [4])"), qnum::Error);
  CHECK_THROWS_AS(qnum::linear(x, Tensor::zeros({4, 3}), Tensor::zeros({1, 4})), qnum::Error);
  CHECK_THROWS_AS(qnum::linear(x, Tensor::zeros({3})), qnum::Error);
  CHECK_THROWS_AS(qnum::linear(Tensor::scalar(1.0f), Tensor::zeros({1, 1})), qnum::Error);
}

TEST_CASE("narrow: values, gradient and bad ranges") {
  const Tensor x = Tensor::uniform({2, 4, 3}, 11, -1.0f, 1.0f, true);
  const Tensor y = qnum::narrow(x, 1, 1, 2);
  CHECK(y.shape() == qnum::Shape{2, 2, 3});
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 3; ++c)
        CHECK(y.values()[static_cast<std::size_t>((b * 2 + t) * 3 + c)] ==
              x.values()[static_cast<std::size_t>((b * 4 + t + 1) * 3 + c)]);
  CHECK(gradcheck([](const auto& in) { return qnum::narrow(in[0], -1, 2, 1); }, {x}) == 0);
  CHECK(gradcheck([](const auto& in) { return qnum::narrow(in[0], 0, 0, 1); }, {x}) == 0);
  CHECK(qnum::narrow(x, 1, 4, 0).numel() == 0);
  CHECK_THROWS_WITH_AS(qnum::narrow(x, 1, 3, 2), doctest::Contains("range [3, 5) is outside dimension 1 of size 4"),
                       qnum::Error);
  CHECK_THROWS_AS(qnum::narrow(x, 3, 0, 1), qnum::Error);
}

// ---- fused inference ops -------------------------------------------------------------------

TEST_CASE("add_layer_norm: the bits of add then layer_norm, on row lengths, shapes and with a gradient") {
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape()) return false;
    return std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.numel())) == 0;
  };
  for (const auto [rows, cols] : {std::array<std::int64_t, 2>{1, 1}, {13, 7}, {15, 33}, {29, 128}, {70, 513}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    const auto seed = static_cast<std::uint64_t>(rows * 1000 + cols);
    const Tensor h = Tensor::randn({rows, cols}, seed, 0.5f, 3.0f), r = Tensor::randn({rows, cols}, seed + 1),
                 g = Tensor::randn({cols}, seed + 2), beta = Tensor::randn({cols}, seed + 3);
    CHECK(same_bits(qnum::add_layer_norm(h, r, g, beta, 1e-12f), qnum::layer_norm(qnum::add(h, r), g, beta, 1e-12f)));
    CHECK(same_bits(qnum::add_layer_norm(h, r), qnum::layer_norm(qnum::add(h, r))));
  }
  // 3-D, and a broadcast residual (the two ops then)
  const Tensor a = Tensor::randn({2, 5, 37}, 1), r = Tensor::randn({2, 5, 37}, 2), rb = Tensor::randn({37}, 3);
  CHECK(same_bits(qnum::add_layer_norm(a, r), qnum::layer_norm(qnum::add(a, r))));
  CHECK(same_bits(qnum::add_layer_norm(a, rb), qnum::layer_norm(qnum::add(a, rb))));
  // with a gradient needed: the two ops, and their gradients
  Tensor x = Tensor::randn({4, 9}, 5);
  x.set_requires_grad(true);
  const Tensor res = Tensor::randn({4, 9}, 6), g = Tensor::randn({9}, 7), beta = Tensor::randn({9}, 8);
  const Tensor y = qnum::add_layer_norm(x, res, g, beta);
  CHECK(y.requires_grad());
  qnum::sum(qnum::mul(y, y)).backward();
  const std::vector<float> fused_grad = grad_vec(x);
  x.zero_grad();
  const Tensor y2 = qnum::layer_norm(qnum::add(x, res), g, beta);
  qnum::sum(qnum::mul(y2, y2)).backward();
  CHECK(grad_vec(x) == fused_grad);
  CHECK_THROWS_AS(qnum::add_layer_norm(a, r, Tensor::ones({36})), qnum::Error);
}
