// The bf16 matmul precision of the tensor layer (tensor/precision.hpp): linear, matmul and the
// attention op run their forward and backward products on the bf16 GEMM (each equal to the
// scalar bf16 chain on the rounded operands), within bf16's bound of a double-precision
// reference and outside fp32's (the rounding happens), the attention op still equal to its
// layer composition bit for bit; the scope restores the setting; names parse.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16_reference.hpp"
#include "qnum/core/error.hpp"
#include "qnum/kernel/attention.hpp"
#include "qnum/kernel/gemm.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/tensor/precision.hpp"

using qnum::Precision;
using qnum::PrecisionScope;
using qnum::Tensor;
using qnum_test::bf16_reference_nt;
using qnum_test::transposed;

namespace {

std::vector<std::uint32_t> bits_of(std::span<const float> x) {
  std::vector<std::uint32_t> b;
  for (const float f : x) b.push_back(std::bit_cast<std::uint32_t>(f));
  return b;
}

}  // namespace

TEST_CASE("precision: linear's forward and backward products are the bf16 chain of the rounded operands") {
  const std::int64_t rows = 37, in = 75, out = 19;  // odd sizes: every tile edge, K odd
  const Tensor x0 = Tensor::randn({rows, in}, 1), w0 = Tensor::randn({out, in}, 2), b0 = Tensor::randn({out}, 3);
  const Tensor g = Tensor::randn({rows, out}, 4);
  Tensor x = x0.clone().set_requires_grad(true), w = w0.clone().set_requires_grad(true),
         b = b0.clone().set_requires_grad(true);
  Tensor y;
  {
    const PrecisionScope bf16(Precision::bf16);
    y = qnum::linear(x, w, b);
  }
  {
    const PrecisionScope bf16(Precision::bf16);  // backward under the same precision, as the Trainer runs it
    y.backward(g);
  }
  const auto xv = x0.to_vector(), wv = w0.to_vector(), bv = b0.to_vector(), gv = g.to_vector();
  CHECK(bits_of(y.values()) == bits_of(bf16_reference_nt(xv, wv, rows, out, in, bv)));
  // dx = g·W: rows of g against columns of W; dW = gᵀ·x: columns of g against columns of x.
  CHECK(bits_of(x.grad()) == bits_of(bf16_reference_nt(gv, transposed(wv, out, in), rows, in, out)));
  CHECK(bits_of(w.grad()) == bits_of(bf16_reference_nt(transposed(gv, rows, out), transposed(xv, rows, in), out, in, rows)));
  // The bias gradient is a sum, not a product: fp32 as ever.
  const Tensor b2 = b0.clone().set_requires_grad(true);
  qnum::linear(x0, w0, b2).backward(g);
  CHECK(bits_of(b.grad()) == bits_of(b2.grad()));
  // fp32 again outside the scope: the fp32 GEMM's bits.
  CHECK(qnum::matmul_precision() == Precision::fp32);
  std::vector<float> f32(static_cast<std::size_t>(rows * out));
  qnum::gemm_f32_nt_bias(xv.data(), wv.data(), bv.data(), f32.data(), rows, out, in);
  CHECK(bits_of(qnum::linear(x0, w0, b0).values()) == bits_of(f32));
}

namespace {

/// Counts of the entries of `got` (fp32 results of x·y, x [M,K], y [K,N], both as row-major
/// doubles' sources) outside bf16's bound and outside fp32's bound of the double product.
struct BoundCounts {
  int outside_bf16 = 0, outside_fp32 = 0;
};
BoundCounts bound_counts(std::span<const float> got, const std::vector<double>& x, const std::vector<double>& y,
                         std::int64_t M, std::int64_t N, std::int64_t K) {
  // |bf16(a)·bf16(b) - a·b| <= (2^-8 + 2^-16)|a·b| per term, plus fp32's accumulation error.
  const double u = std::ldexp(1.0, -24), gamma = static_cast<double>(K) * u / (1 - static_cast<double>(K) * u);
  BoundCounts n;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0, abs = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = x[static_cast<std::size_t>(i * K + k)] * y[static_cast<std::size_t>(k * N + j)];
        s += p;
        abs += std::fabs(p);
      }
      const double e = std::fabs(got[static_cast<std::size_t>(i * N + j)] - s);
      n.outside_bf16 += e > (std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + gamma) * abs;
      n.outside_fp32 += e > gamma * abs;
    }
  return n;
}

std::vector<double> as_double(const Tensor& t, bool transpose = false) {
  const auto v = t.to_vector();
  if (!transpose) return {v.begin(), v.end()};
  const std::int64_t r = t.shape()[0], c = t.shape()[1];
  std::vector<double> d(v.size());
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) d[static_cast<std::size_t>(j * r + i)] = v[static_cast<std::size_t>(i * c + j)];
  return d;
}

}  // namespace

TEST_CASE("precision: bf16 products and gradients are within bf16's bound of double precision, outside fp32's") {
  const std::int64_t M = 24, N = 40, K = 300;
  const Tensor a0 = Tensor::randn({M, K}, 5), b0 = Tensor::randn({K, N}, 6), g = Tensor::randn({M, N}, 7);
  Tensor a = a0.clone().set_requires_grad(true), b = b0.clone().set_requires_grad(true);
  Tensor c;
  {
    const PrecisionScope bf16(Precision::bf16);
    c = qnum::matmul(a, b);
    c.backward(g);
  }
  const Tensor c32 = qnum::matmul(a0, b0);
  // The forward c = a·b, and the gradients dA = g·bᵀ, dB = aᵀ·g, each against double.
  const BoundCounts fwd = bound_counts(c.values(), as_double(a0), as_double(b0), M, N, K);
  const BoundCounts da = bound_counts(a.grad(), as_double(g), as_double(b0, true), M, K, N);
  const BoundCounts db = bound_counts(b.grad(), as_double(a0, true), as_double(g), K, N, M);
  CHECK(fwd.outside_bf16 == 0);
  CHECK(da.outside_bf16 == 0);
  CHECK(db.outside_bf16 == 0);
  CHECK(bound_counts(c32.values(), as_double(a0), as_double(b0), M, N, K).outside_fp32 == 0);
  // The operands were rounded: most bf16 results lie outside fp32's bound.
  CHECK(fwd.outside_fp32 > M * N / 2);
  CHECK(da.outside_fp32 > M * K / 2);
  CHECK(db.outside_fp32 > K * N / 2);
}

TEST_CASE("precision: the attention op equals its layer composition bit for bit under bf16 too") {
  const std::int64_t B = 2, T = 33, heads = 2, D = 16, HD = heads * D;
  const float scale = qnum::detail::attention_scale(D);
  const Tensor q0 = Tensor::randn({B, T, HD}, 1), k0 = Tensor::randn({B, T, HD}, 2), v0 = Tensor::randn({B, T, HD}, 3);
  const Tensor g = Tensor::randn({B, T, HD}, 4);
  const PrecisionScope bf16(Precision::bf16);
  auto run = [&](bool fused) {
    Tensor q = q0.clone().set_requires_grad(true), k = k0.clone().set_requires_grad(true),
           v = v0.clone().set_requires_grad(true);
    Tensor y;
    if (fused) {
      y = qnum::scaled_dot_product_attention(q, k, v, Tensor(), heads, scale, 0.0f, 1);
    } else {
      auto split = [&](const Tensor& t) { return qnum::permute(qnum::reshape(t, {B, T, heads, D}), {0, 2, 1, 3}); };
      const Tensor s = qnum::mul_scalar(qnum::matmul(split(q), qnum::transpose(split(k), 2, 3)), scale);
      const Tensor ctx = qnum::matmul(qnum::softmax(s, -1), split(v));
      y = qnum::reshape(qnum::permute(ctx, {0, 2, 1, 3}), {B, T, HD});
    }
    y.backward(g);
    return std::vector<std::vector<std::uint32_t>>{bits_of(y.values()), bits_of(q.grad()), bits_of(k.grad()), bits_of(v.grad())};
  };
  const auto fused = run(true), layers = run(false);
  CHECK(fused == layers);
  // ... and differs from fp32 (the products were rounded).
  qnum::detail::matmul_precision_slot().store(Precision::fp32);
  CHECK(run(true)[0] != fused[0]);
  qnum::detail::matmul_precision_slot().store(Precision::bf16);  // the scope restores fp32 at exit
}

TEST_CASE("precision: scopes nest and restore; names parse, unknown ones are errors listing the known") {
  CHECK(qnum::matmul_precision() == Precision::fp32);
  {
    const PrecisionScope a(Precision::bf16);
    CHECK(qnum::matmul_precision() == Precision::bf16);
    {
      const PrecisionScope b(Precision::fp32);
      CHECK(qnum::matmul_precision() == Precision::fp32);
    }
    CHECK(qnum::matmul_precision() == Precision::bf16);
  }
  CHECK(qnum::matmul_precision() == Precision::fp32);
  CHECK(qnum::parse_precision("bf16") == Precision::bf16);
  CHECK(qnum::parse_precision("bf16-mixed") == Precision::bf16);
  CHECK(qnum::parse_precision("32-true") == Precision::fp32);
  CHECK(qnum::to_string(Precision::bf16) == "bf16");
  CHECK_THROWS_WITH_AS(qnum::parse_precision("fp16"), doctest::Contains("precision 'fp16' is unknown (known: fp32, bf16"),
                       qnum::Error);
}
