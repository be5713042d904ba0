// Matrix products, each differentiable, on the library's fp32 GEMM (kernel/gemm.hpp):
// matmul (2-D x 2-D; batched [..., M, K] x [..., K, N] with equal batch dimensions; and
// [..., M, K] x [K, N] with b shared by the batch) and linear (y = x·Wᵀ + b, PyTorch's
// weight layout [out, in]). Backward: dA = dC·Bᵀ and dB = Aᵀ·dC, also on the GEMM. Under
// matmul_precision() bf16 (tensor/precision.hpp) every one of them runs on the bf16 GEMM.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "qnum/kernel/gemm.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"
#include "qnum/tensor/precision.hpp"

namespace qnum {

namespace detail {

/// C[M,N] = A[M,K]·B[N,K]ᵀ for any sizes (the kernel wants positive ones; K = 0 gives zeros).
inline void mm_nt(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill_n(C, M * N, 0.0f);
    return;
  }
  if (matmul_precision() == Precision::bf16)
    gemm_bf16_nt(A, B, C, M, N, K);
  else
    gemm_f32_nt(A, B, C, M, N, K);
}

/// C[M,N] = A[M,K]·B[K,N] for any sizes.
inline void mm_nn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill_n(C, M * N, 0.0f);
    return;
  }
  if (matmul_precision() == Precision::bf16)
    gemm_bf16_nn(A, B, C, M, N, K);
  else
    gemm_f32_nn(A, B, C, M, N, K);
}

/// C[M,N] = A[K,M]ᵀ·B[K,N] for any sizes (the kernel reads A transposed; no copy).
inline void mm_tn(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill_n(C, M * N, 0.0f);
    return;
  }
  if (matmul_precision() == Precision::bf16)
    gemm_bf16_tn(A, B, C, M, N, K);
  else
    gemm_f32_tn(A, B, C, M, N, K);
}

/// How matmul maps its operands onto GEMMs: `batch` products of [M,K]·[K,N]; b advances by
/// K·N per product unless it is shared (a 2-D b; then the batch is folded into M).
struct MatmulPlan {
  std::int64_t batch = 1, M = 0, K = 0, N = 0;
  bool b_batched = false;
  Shape out;
};

inline MatmulPlan plan_matmul(const Shape& a, const Shape& b) {
  const auto fail_shapes = [&](auto&&... why) { fail("matmul: ", to_string(a), " x ", to_string(b), ": ", why...); };
  if (a.size() < 2 || b.size() < 2)
    fail_shapes("both operands need rank 2 or more (got ", a.size(), " and ", b.size(), ")");
  const std::int64_t ka = a[a.size() - 1], kb = b[b.size() - 2];
  if (ka != kb) fail_shapes("inner dimensions ", ka, " and ", kb, " differ");
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  MatmulPlan p;
  p.K = ka;
  p.N = b.back();
  p.M = a[a.size() - 2];
  p.b_batched = !b_batch.empty();
  if (p.b_batched) {
    if (a_batch != b_batch)
      fail_shapes("batch dimensions ", to_string(a_batch), " and ", to_string(b_batch),
                  " differ (supported: equal batch dimensions, or a 2-D b shared by the batch)");
    p.batch = numel(a_batch);
  } else {
    p.M *= numel(a_batch);  // a [..., M, K] x b [K, N]: one GEMM over all rows
  }
  p.out = a;
  p.out.back() = p.N;
  return p;
}

/// The rows of x [..., in] (the product of its leading dimensions).
inline std::int64_t leading_rows(const Shape& x) {
  std::int64_t r = 1;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) r *= x[i];
  return r;
}

inline void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  // if/fail: the messages (to_string of shapes) are built only when a check fails.
  if (weight.rank() != 2) fail("linear: weight ", to_string(weight.shape()), " must be 2-D [out, in]");
  if (x.rank() < 1 || x.shape().back() != weight.shape()[1])
    fail("linear: input ", to_string(x.shape()), " and weight ", to_string(weight.shape()),
         ": the input's last dimension must be in = ", weight.shape()[1]);
  if (bias.defined() && !(bias.rank() == 1 && bias.shape()[0] == weight.shape()[0]))
    fail("linear: bias ", to_string(bias.shape()), " does not match weight ", to_string(weight.shape()), " (expected [",
         weight.shape()[0], "])");
}

}  // namespace detail

/// The matrix product of a [..., M, K] and b: b [..., K, N] with the same batch dimensions
/// (ranks 2 to 4), or b [K, N] applied to every matrix of a. Result [..., M, N]. Shape errors
/// name both shapes ("matmul: [2, 3] x [4, 5]: inner dimensions 3 and 4 differ").
inline Tensor matmul(const Tensor& a, const Tensor& b) {
  const detail::MatmulPlan p = detail::plan_matmul(a.shape(), b.shape());
  if (device_ops::any_on_device({&a, &b})) return device_ops::matmul(a, b);
  FloatBuffer y(static_cast<std::size_t>(numel(p.out)));
  const std::int64_t sa = p.M * p.K, sb = p.b_batched ? p.K * p.N : 0, sc = p.M * p.N;
  for (std::int64_t i = 0; i < p.batch; ++i)
    detail::mm_nn(a.data() + i * sa, b.data() + i * sb, y.data() + i * sc, p.M, p.N, p.K);
  return autograd::make_result("matmul", p.out, std::move(y), {a, b}, [a, b, p](std::span<const float> g) {
    const std::int64_t sa = p.M * p.K, sb = p.b_batched ? p.K * p.N : 0, sc = p.M * p.N;
    std::vector<FloatBuffer> r(2);
    if (a.requires_grad()) {  // dA = dC·Bᵀ
      r[0].resize(static_cast<std::size_t>(a.numel()));
      for (std::int64_t i = 0; i < p.batch; ++i)
        detail::mm_nt(g.data() + i * sc, b.data() + i * sb, r[0].data() + i * sa, p.M, p.K, p.N);
    }
    if (b.requires_grad()) {  // dB = Aᵀ·dC (summed over the batch when b is shared)
      r[1].resize(static_cast<std::size_t>(b.numel()));
      for (std::int64_t i = 0; i < p.batch; ++i)
        detail::mm_tn(a.data() + i * sa, g.data() + i * sc, r[1].data() + i * sb, p.K, p.N, p.M);
    }
    return r;
  });
}

namespace detail {

/// linear's backward: dx = dy·W, dW = dyᵀ·x, db = Σ_rows dy (in double, then rounded).
inline autograd::BackwardFn linear_backward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                            std::int64_t rows, std::int64_t in, std::int64_t out) {
  return [x, weight, bias, rows, in, out](std::span<const float> g) {
    std::vector<FloatBuffer> r(3);
    if (x.requires_grad()) {  // dx = dy·W
      r[0].resize(static_cast<std::size_t>(rows * in));
      mm_nn(g.data(), weight.data(), r[0].data(), rows, in, out);
    }
    if (weight.requires_grad()) {  // dW = dyᵀ·x
      r[1].resize(static_cast<std::size_t>(out * in));
      mm_tn(g.data(), x.data(), r[1].data(), out, in, rows);
    }
    if (bias.defined() && bias.requires_grad()) {  // db = Σ_rows dy
      std::vector<double> acc(static_cast<std::size_t>(out), 0.0);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < out; ++j)
          acc[static_cast<std::size_t>(j)] += g[static_cast<std::size_t>(i * out + j)];
      r[2].assign(acc.begin(), acc.end());
    }
    return r;
  };
}

/// The codes of n values quantized to signed fixed point with `frac` fraction bits and codes in
/// [kmin, kmax] ⊆ [-128, 127], round to nearest even, saturating: k = clamp(RNE(x·2^frac)) — the
/// fixed-point reference's mantissa (exact and mase semantics alike: ±Inf saturate) in one
/// pass, for |frac| <= 100 (x·2^frac then rounds only where the result rounds to 0 anyway).
/// false (codes unspecified) when a value is NaN, which has no code.
inline bool quantize_fixed8_codes(const float* x, std::size_t n, int frac, int kmin, int kmax, std::int8_t* codes) {
  using FB = xsimd::batch<float>;
  constexpr std::size_t L = FB::size, kChunk = 256;
  const FB up(static_cast<float>(pow2(frac))), lo(static_cast<float>(kmin)), hi(static_cast<float>(kmax));
  alignas(64) std::int32_t k32[kChunk];
  xsimd::batch_bool<float> nan(false);
  auto code = [&](FB xv) {
    const FB v = xv * up;
    nan = nan | xsimd::isnan(v);
    return xsimd::batch_cast<std::int32_t>(xsimd::min(xsimd::max(xsimd::nearbyint(v), lo), hi));
  };
  for (std::size_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - c0);
    std::size_t i = 0;
    for (; i + L <= m; i += L) code(FB::load_unaligned(x + c0 + i)).store_aligned(k32 + i);
    for (; i < m; ++i) k32[i] = code(FB(x[c0 + i])).get(0);  // the tail through the same arithmetic
    for (std::size_t j = 0; j < m; ++j) codes[c0 + j] = static_cast<std::int8_t>(k32[j]);
  }
  return !xsimd::any(nan);
}

/// The int8 codes k of n values on the 8-bit fixed-point grid k·2^-frac (k in [-128, 127]);
/// false (codes unspecified) when a value is off that grid: NaN, Inf, out of range, or not
/// a multiple of 2^-frac. Exact test: each code must map back to the value itself. xsimd by
/// hand: GCC does not vectorise the float -> int conversion under -ftrapping-math.
inline bool fixed8_codes(const float* x, std::size_t n, int frac, std::int8_t* codes) {
  using FB = xsimd::batch<float>;
  using IB = xsimd::batch<std::int32_t>;
  constexpr std::size_t L = FB::size, kChunk = 256;
  const float up = static_cast<float>(pow2(frac)), down = static_cast<float>(pow2(-frac));
  auto code = [&](FB xv, auto& bad) {  // NaN, Inf, out of range -> 0, then fails the round trip
    const FB v = xv * FB(up);
    const IB k = xsimd::batch_cast<std::int32_t>(xsimd::select((v >= FB(-128.0f)) & (v <= FB(127.0f)), v, FB(0.0f)));
    bad = bad | !(xsimd::batch_cast<float>(k) * FB(down) == xv);  // == is false for NaN; != may be too
    return k;
  };
  alignas(64) std::int32_t k32[kChunk];
  xsimd::batch_bool<float> bad(false);
  for (std::size_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - c0);
    std::size_t i = 0;
    for (; i + L <= m; i += L) code(FB::load_unaligned(x + c0 + i), bad).store_aligned(k32 + i);
    for (; i < m; ++i) {  // the tail, one lane at a time through the same arithmetic
      xsimd::batch_bool<float> b1(false);
      k32[i] = code(FB(x[c0 + i]), b1).get(0);
      bad = bad | b1;
    }
    for (std::size_t j = 0; j < m; ++j) codes[c0 + j] = static_cast<std::int8_t>(k32[j]);
  }
  return !xsimd::any(bad);
}

}  // namespace detail

/// y = x·weightᵀ + bias for x [..., in], weight [out, in] (PyTorch's layout) and bias [out]
/// or an undefined Tensor (no bias). Result [..., out].
inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor()) {
  detail::check_linear(x, weight, bias);
  if (device_ops::any_on_device({&x, &weight, &bias})) return device_ops::linear(x, weight, bias);
  const std::int64_t rows = detail::leading_rows(x.shape()), in = weight.shape()[1], out = weight.shape()[0];
  Shape shape = x.shape();
  shape.back() = out;
  FloatBuffer y(static_cast<std::size_t>(rows * out));
  if (bias.defined() && rows > 0 && out > 0 && in > 0) {  // bias added in the GEMM's epilogue
    if (matmul_precision() == Precision::bf16)
      gemm_bf16_nt_bias(x.data(), weight.data(), bias.data(), y.data(), rows, out, in);
    else
      gemm_f32_nt_bias(x.data(), weight.data(), bias.data(), y.data(), rows, out, in);
  } else {
    detail::mm_nt(x.data(), weight.data(), y.data(), rows, out, in);
    if (bias.defined()) {
      const float* pb = bias.data();
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < out; ++j) y[static_cast<std::size_t>(r * out + j)] += pb[j];
    }
  }
  return autograd::make_result("linear", std::move(shape), std::move(y), {x, weight, bias},
                               detail::linear_backward(x, weight, bias, rows, in, out));
}

/// linear() of operands on 8-bit signed fixed-point grids: x = k_x·2^-x_frac and weight =
/// k_w·2^-w_frac with int8 k (what fake_quantize to integer:width<=8 produces). The forward
/// product then runs on the int8 GEMM (VNNI where present: ~2-3.5x the fp32 GEMM) and, for
/// in <= kGemmFixed8ExactK, gives linear()'s bits exactly (every partial sum is exact in
/// both). Larger in, scales outside 2^±90, or any value off its grid (NaN, Inf): linear().
/// Gradients are linear()'s (straight-through quantizers sit outside this op).
inline Tensor linear_fixed8(const Tensor& x, int x_frac, const Tensor& weight, int w_frac,
                            const Tensor& bias = Tensor()) {
  detail::check_linear(x, weight, bias);
  const std::int64_t rows = detail::leading_rows(x.shape()), in = weight.shape()[1], out = weight.shape()[0];
  const int e = -(x_frac + w_frac);
  if (rows == 0 || in == 0 || out == 0 || in > kGemmFixed8ExactK || e < -90 || e > 90) return linear(x, weight, bias);
  thread_local std::vector<std::int8_t> xk, wk;  // reused: codes are rebuilt every call
  xk.resize(static_cast<std::size_t>(rows * in));
  wk.resize(static_cast<std::size_t>(out * in));
  if (!detail::fixed8_codes(x.data(), xk.size(), x_frac, xk.data()) ||
      !detail::fixed8_codes(weight.data(), wk.size(), w_frac, wk.data()))
    return linear(x, weight, bias);
  Shape shape = x.shape();
  shape.back() = out;
  FloatBuffer y(static_cast<std::size_t>(rows * out));
  gemm_fixed8_nt(xk.data(), x_frac, wk.data(), w_frac, y.data(), rows, out, in, bias.defined() ? bias.data() : nullptr);
  return autograd::make_result("linear", std::move(shape), std::move(y), {x, weight, bias},
                               detail::linear_backward(x, weight, bias, rows, in, out));
}

}  // namespace qnum
