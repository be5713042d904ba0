// scaled_dot_product_attention against the layer composition it replaces in training (head
// split, Q·Kᵀ, scale, mask, softmax, dropout, ·V, head merge): the same bits, values and
// gradients, with probabilities saved or recomputed for backward; thread-count independence;
// finite differences; bad input.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "qnum/kernel/attention.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/tensor/ops.hpp"

using qnum::Shape;
using qnum::Tensor;

namespace {

struct Case {
  std::int64_t B, Tq, T, heads, D;
  bool mask;
  float p;
};

/// The composition (BertSelfAttention's layer path, op for op).
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, std::int64_t heads, float scale,
                float p, std::uint64_t seed) {
  const std::int64_t B = q.shape()[0], Tq = q.shape()[1], T = k.shape()[1], HD = q.shape()[2], D = HD / heads;
  auto heads_first = [&](const Tensor& t, std::int64_t n) {
    return qnum::permute(qnum::reshape(t, {B, n, heads, D}), {0, 2, 1, 3});
  };
  Tensor s = qnum::mul_scalar(qnum::matmul(heads_first(q, Tq), qnum::transpose(heads_first(k, T), 2, 3)), scale);
  if (mask.defined()) s = qnum::add(s, mask);
  Tensor pr = qnum::softmax(s, -1);
  if (p > 0.0f) pr = qnum::dropout(pr, p, true, seed);
  const Tensor ctx = qnum::matmul(pr, heads_first(v, T));
  return qnum::reshape(qnum::permute(ctx, {0, 2, 1, 3}), {B, Tq, HD});
}

std::vector<std::uint32_t> bits(std::span<const float> x) {
  std::vector<std::uint32_t> b;
  for (const float f : x) b.push_back(std::bit_cast<std::uint32_t>(f));
  return b;
}

/// HF's padding mask (0, or float's lowest on the last b + 2 keys of row b); with `biased`,
/// the kept keys get arbitrary additive biases instead of 0 (so the op's scale and mask steps
/// must round apart, as mul_scalar then add do: an FMA of the two would show).
Tensor additive_mask(std::int64_t B, std::int64_t T, bool biased = false) {
  std::vector<float> m(static_cast<std::size_t>(B * T), 0.0f);
  if (biased) m = Tensor::randn({B * T}, 9, 0.0f, 2.0f).to_vector();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = std::max<std::int64_t>(1, T - b - 2); j < T; ++j)
      m[static_cast<std::size_t>(b * T + j)] = std::numeric_limits<float>::lowest();
  return Tensor({B, 1, 1, T}, qnum::FloatBuffer(m.begin(), m.end()));
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: the layer composition's bits, values and gradients, on any thread count") {
  const std::vector<Case> cases = {
      {2, 9, 9, 3, 5, true, 0.2f},      // odd sizes: every GEMM edge, masked, dropout
      {2, 40, 40, 2, 64, false, 0.1f},  // BERT's head size
      {3, 1, 33, 2, 16, true, 0.1f},    // the first-token path (one query)
      {1, 17, 300, 1, 8, true, 0.0f},   // K past one GEMM chunk (300 > 256) in P·V and dK
  };
  const int saved = qnum::num_threads();
  for (const Case& c : cases) {
    CAPTURE(c.T);
    CAPTURE(c.heads);
    const std::int64_t HD = c.heads * c.D;
    const float scale = qnum::detail::attention_scale(c.D);
    const std::uint64_t seed = 1234 + static_cast<std::uint64_t>(c.T);
    const Tensor q0 = Tensor::randn({c.B, c.Tq, HD}, 1, 0.0f, 1.5f);
    const Tensor k0 = Tensor::randn({c.B, c.T, HD}, 2, 0.0f, 1.5f);
    const Tensor v0 = Tensor::randn({c.B, c.T, HD}, 3);
    const Tensor g = Tensor::randn({c.B, c.Tq, HD}, 4);
    const Tensor mask = c.mask ? additive_mask(c.B, c.T, /*biased=*/c.T != 33) : Tensor();
    auto run = [&](bool fused, qnum::AttentionMemory memory = qnum::AttentionMemory::automatic) {
      Tensor q = q0.clone().set_requires_grad(true), k = k0.clone().set_requires_grad(true),
             v = v0.clone().set_requires_grad(true);
      const Tensor y = fused ? qnum::scaled_dot_product_attention(q, k, v, mask, c.heads, scale, c.p, seed, memory)
                             : composed(q, k, v, mask, c.heads, scale, c.p, seed);
      y.backward(g);
      return std::vector<std::vector<std::uint32_t>>{bits(y.values()), bits(q.grad()), bits(k.grad()), bits(v.grad())};
    };
    qnum::set_num_threads(1);
    const auto ref = run(false);
    // Probabilities and dropout mask saved for backward, or recomputed there: the same bits.
    for (const auto memory : {qnum::AttentionMemory::save, qnum::AttentionMemory::recompute})
      for (int threads : {1, 2, 3}) {
        CAPTURE(threads);
        CAPTURE(memory == qnum::AttentionMemory::save);
        qnum::set_num_threads(threads);
        const auto got = run(true, memory);
        CHECK(got[0] == ref[0]);  // values
        CHECK(got[1] == ref[1]);  // dQ
        CHECK(got[2] == ref[2]);  // dK
        CHECK(got[3] == ref[3]);  // dV
      }
    // Without gradients: the same values (nothing saved).
    qnum::autograd::NoGradGuard no_grad;
    CHECK(bits(qnum::scaled_dot_product_attention(q0, k0, v0, mask, c.heads, scale, c.p, seed).values()) == ref[0]);
  }
  qnum::set_num_threads(saved);
}

TEST_CASE("scaled_dot_product_attention: finite-difference gradients") {
  const Tensor q = Tensor::randn({2, 3, 4}, 5, 0.0f, 1.0f, true), k = Tensor::randn({2, 5, 4}, 6, 0.0f, 1.0f, true),
               v = Tensor::randn({2, 5, 4}, 7, 0.0f, 1.0f, true);
  const Tensor mask = additive_mask(2, 5);
  for (const float p : {0.0f, 0.3f})
    for (const auto memory : {qnum::AttentionMemory::save, qnum::AttentionMemory::recompute}) {
      CAPTURE(p);
      CHECK(qnum_test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return qnum::scaled_dot_product_attention(in[0], in[1], in[2], mask, 2, 0.7f, p, 42, memory);
                },
                {q, k, v}) == 0);
    }
}

TEST_CASE("scaled_dot_product_attention: bad shapes, masks and probabilities are errors that say why") {
  const Tensor q = Tensor::randn({2, 3, 8}, 1), k = Tensor::randn({2, 5, 8}, 2), v = Tensor::randn({2, 5, 8}, 3);
  auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m, std::int64_t h, float p) {
    return qnum::scaled_dot_product_attention(a, b, c, m, h, 0.5f, p, 1);
  };
  CHECK_THROWS_WITH_AS(sdpa(q, k, v, {}, 3, 0.0f), doctest::Contains("not a multiple of heads 3"), qnum::Error);
  CHECK_THROWS_WITH_AS(sdpa(q, k, Tensor::randn({2, 4, 8}, 4), {}, 2, 0.0f), doctest::Contains("do not match"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(sdpa(qnum::reshape(q, {6, 8}), k, v, {}, 2, 0.0f), doctest::Contains("must be [B, T, heads*D]"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(sdpa(q, k, v, Tensor::zeros({2, 1, 5}), 2, 0.0f),
                       doctest::Contains("mask must be an additive [2, 1, 1, 5]"), qnum::Error);
  CHECK_THROWS_WITH_AS(sdpa(q, k, v, Tensor::zeros({2, 1, 1, 5}, true), 2, 0.0f), doctest::Contains("requiring grad"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(sdpa(q, k, v, {}, 2, 1.0f), doctest::Contains("dropout probability 1 must be in [0, 1)"),
                       qnum::Error);
  // Empty sequences: an empty result, no crash.
  const Tensor e = sdpa(Tensor::zeros({2, 0, 8}), Tensor::zeros({2, 0, 8}), Tensor::zeros({2, 0, 8}), {}, 2, 0.0f);
  CHECK(e.shape() == Shape{2, 0, 8});
  // No keys: each query's weighted sum is over nothing, so the result and the gradients are zeros.
  Tensor q1 = Tensor::randn({2, 3, 8}, 5).set_requires_grad(true), k0 = Tensor::zeros({2, 0, 8}, true),
         v0 = Tensor::zeros({2, 0, 8}, true);
  const Tensor none = sdpa(q1, k0, v0, {}, 2, 0.0f);
  REQUIRE(none.shape() == Shape{2, 3, 8});
  for (float x : none.values()) CHECK(x == 0.0f);
  none.backward(Tensor::randn({2, 3, 8}, 6));
  REQUIRE(q1.grad().size() == 48);
  for (float x : q1.grad()) CHECK(x == 0.0f);
  CHECK(k0.grad().empty());
}
