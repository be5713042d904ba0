// Elementwise ops with NumPy broadcasting (add, sub, mul, div), scalar forms, and unary
// functions (neg, exp, log, relu, gelu with exact erf, tanh, sigmoid), each differentiable.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"
#include "qnum/tensor/gelu_math.hpp"

namespace qnum {

namespace detail {

/// The broadcast shape of a and b (NumPy rules: align right, sizes equal or 1).
inline Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)  // if/fail: the message is built only on failure
      fail(op, ": shapes ", to_string(a), " and ", to_string(b), " do not broadcast (dimension ", i, ": ", da, " vs ",
           db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// For every element of `out` (C order), the flat index of the element of `in` it reads
/// under broadcasting (in's shape right-aligned to out's).
inline std::vector<std::int64_t> broadcast_index(const Shape& in, const Shape& out) {
  const std::size_t r = out.size(), off = r - in.size();
  std::vector<std::int64_t> stride(r, 0);
  std::int64_t s = 1;
  for (std::size_t i = r; i-- > off;) {
    const std::int64_t d = in[i - off];
    stride[i] = d == 1 ? 0 : s;
    s *= d;
  }
  std::vector<std::int64_t> idx(static_cast<std::size_t>(numel(out)));
  std::vector<std::int64_t> pos(r, 0);
  std::int64_t flat = 0;
  for (auto& v : idx) {
    v = flat;
    for (std::size_t d = r; d-- > 0;) {  // odometer increment
      flat += stride[d];
      if (++pos[d] < out[d]) break;
      flat -= stride[d] * out[d];
      pos[d] = 0;
    }
  }
  return idx;
}

/// Sums a gradient of the broadcast shape back onto an input's shape.
inline FloatBuffer reduce_to(std::span<const float> g, const std::vector<std::int64_t>& index, std::int64_t n) {
  FloatBuffer r(static_cast<std::size_t>(n), 0.0f);
  for (std::size_t i = 0; i < g.size(); ++i) r[static_cast<std::size_t>(index[i])] += g[i];
  return r;
}

enum class BinaryOp : std::uint8_t { add, sub, mul, div };

/// f(std::integral_constant<BinaryOp, op>{}): each op's loops compiled on their own, with no
/// switch per element, so they vectorise.
template <class F>
void with_binary_op(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::add:
      return f(std::integral_constant<BinaryOp, BinaryOp::add>{});
    case BinaryOp::sub:
      return f(std::integral_constant<BinaryOp, BinaryOp::sub>{});
    case BinaryOp::mul:
      return f(std::integral_constant<BinaryOp, BinaryOp::mul>{});
    case BinaryOp::div:
      return f(std::integral_constant<BinaryOp, BinaryOp::div>{});
  }
}

template <BinaryOp o>
float apply_binary(float x0, float x1) {
  if constexpr (o == BinaryOp::add)
    return x0 + x1;
  else if constexpr (o == BinaryOp::sub)
    return x0 - x1;
  else if constexpr (o == BinaryOp::mul)
    return x0 * x1;
  else
    return x0 / x1;
}

/// a + b with a of the result's shape and b repeated along the leading dimensions (BERT's
/// position and token-type embeddings): the same values and gradient sums as the general
/// broadcast, without its per-element index tables.
inline Tensor add_repeated(const Tensor& a, const Tensor& b, const Shape& shape) {
  const auto n = static_cast<std::size_t>(numel(shape)), nb = static_cast<std::size_t>(b.numel());
  FloatBuffer y(n);
  const float* pa = a.data();
  const float* pb = b.data();
  for (std::size_t o = 0; o < n; o += nb)
    for (std::size_t k = 0; k < nb; ++k) y[o + k] = pa[o + k] + pb[k];
  return autograd::make_result("add", shape, std::move(y), {a, b}, [a, b, nb](std::span<const float> g) {
    std::vector<FloatBuffer> r(2);
    if (a.requires_grad()) r[0].assign(g.begin(), g.end());
    if (b.requires_grad()) {
      r[1].assign(nb, 0.0f);
      for (std::size_t o = 0; o < g.size(); o += nb)
        for (std::size_t k = 0; k < nb; ++k) r[1][k] += g[o + k];
    }
    return r;
  });
}

inline Tensor binary_op(const Tensor& a, const Tensor& b, BinaryOp op) {
  if (device_ops::any_on_device({&a, &b})) return device_ops::binary(a, b, static_cast<device_ops::Binary>(op));
  static constexpr const char* names[] = {"add", "sub", "mul", "div"};
  const char* name = names[static_cast<int>(op)];
  const Shape shape = broadcast_shape(a.shape(), b.shape(), name);
  const auto n = static_cast<std::size_t>(numel(shape));
  const bool same = a.shape() == shape && b.shape() == shape;
  if (op == BinaryOp::add && !same && n > 0 && b.numel() > 0 && a.shape() == shape &&
      repeats_as_suffix(b.shape(), shape))
    return add_repeated(a, b, shape);
  std::vector<std::int64_t> ia, ib;
  if (!same) {
    ia = broadcast_index(a.shape(), shape);
    ib = broadcast_index(b.shape(), shape);
  }
  FloatBuffer y(n);
  with_binary_op(op, [&](auto kind) {
    constexpr BinaryOp o = decltype(kind)::value;
    const float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    float* __restrict py = y.data();
    if (same)
      for (std::size_t i = 0; i < n; ++i) py[i] = apply_binary<o>(pa[i], pb[i]);
    else
      for (std::size_t i = 0; i < n; ++i)
        py[i] = apply_binary<o>(pa[static_cast<std::size_t>(ia[i])], pb[static_cast<std::size_t>(ib[i])]);
  });
  const Tensor sa = a, sb = b;  // saved for backward (mul/div need the values)
  return autograd::make_result(name, shape, std::move(y), {a, b},
                               [sa, sb, op, same, ia = std::move(ia), ib = std::move(ib), na = a.numel(),
                                nb = b.numel()](std::span<const float> g) {
                                 const std::size_t n = g.size();
                                 std::vector<FloatBuffer> r(2);
                                 const bool need_a = sa.requires_grad(), need_b = sb.requires_grad();
                                 FloatBuffer ga(need_a ? n : 0), gb(need_b ? n : 0);
                                 with_binary_op(op, [&](auto kind) {
                                   constexpr BinaryOp o = decltype(kind)::value;
                                   const float* __restrict pg = g.data();
                                   const float* __restrict pa = sa.data();
                                   const float* __restrict pb = sb.data();
                                   float* __restrict da = ga.data();
                                   float* __restrict db = gb.data();
                                   // Per element: ∂/∂a = g (add, sub), g·b (mul), g/b (div); ∂/∂b = g, -g, g·a,
                                   // -g·a/(b·b). Inputs are read only where the derivative needs them.
                                   auto grads = [&](auto x0, auto x1) {
                                     if (need_a)
                                       for (std::size_t i = 0; i < n; ++i) {
                                         if constexpr (o == BinaryOp::add || o == BinaryOp::sub)
                                           da[i] = pg[i];
                                         else if constexpr (o == BinaryOp::mul)
                                           da[i] = pg[i] * x1(i);
                                         else
                                           da[i] = pg[i] / x1(i);
                                       }
                                     if (need_b)
                                       for (std::size_t i = 0; i < n; ++i) {
                                         if constexpr (o == BinaryOp::add)
                                           db[i] = pg[i];
                                         else if constexpr (o == BinaryOp::sub)
                                           db[i] = -pg[i];
                                         else if constexpr (o == BinaryOp::mul)
                                           db[i] = pg[i] * x0(i);
                                         else
                                           db[i] = -pg[i] * x0(i) / (x1(i) * x1(i));
                                       }
                                   };
                                   if (same)
                                     grads([&](std::size_t i) { return pa[i]; }, [&](std::size_t i) { return pb[i]; });
                                   else
                                     grads([&](std::size_t i) { return pa[static_cast<std::size_t>(ia[i])]; },
                                           [&](std::size_t i) { return pb[static_cast<std::size_t>(ib[i])]; });
                                 });
                                 if (need_a) r[0] = same ? std::move(ga) : reduce_to(ga, ia, na);
                                 if (need_b) r[1] = same ? std::move(gb) : reduce_to(gb, ib, nb);
                                 return r;
                               });
}

/// y = f(x) elementwise with dy/dx = df(x, y). kUsesY false: df ignores y, and backward keeps
/// only x; otherwise it also shares the output's storage (never a copy).
template <bool kUsesY = true, class F, class DF>
Tensor unary_op(const char* name, const Tensor& x, F f, DF df) {
  // Loops over restrict pointers with a local copy of df: a store through a plain pointer may
  // alias the closure's captures (a scalar's c), which keeps the loop scalar.
  const auto n = static_cast<std::size_t>(x.numel());
  FloatBuffer y(n);
  {
    const float* __restrict px = x.data();
    float* __restrict py = y.data();
    for (std::size_t i = 0; i < n; ++i) py[i] = f(px[i]);
  }
  const Tensor sx = x;
  if constexpr (!kUsesY) {
    return autograd::make_result(name, x.shape(), std::move(y), {x}, [sx, df](std::span<const float> g) {
      FloatBuffer gx(g.size());
      const DF d = df;
      const float* __restrict px = sx.data();
      const float* __restrict pg = g.data();
      float* __restrict out = gx.data();
      for (std::size_t i = 0; i < g.size(); ++i) out[i] = pg[i] * d(px[i], 0.0f);
      return autograd::one_grad(std::move(gx));
    });
  }
  Tensor out(x.shape(), std::move(y));
  std::shared_ptr<const FloatBuffer> sy = out.impl_ptr()->storage;  // shared, as softmax's
  return autograd::make_result(name, std::move(out), {x}, [sx, sy, df](std::span<const float> g) {
    FloatBuffer gx(g.size());
    const DF d = df;
    const float* __restrict px = sx.data();
    const float* __restrict py = sy->data();
    const float* __restrict pg = g.data();
    float* __restrict o = gx.data();
    for (std::size_t i = 0; i < g.size(); ++i) o[i] = pg[i] * d(px[i], py[i]);
    return autograd::one_grad(std::move(gx));
  });
}

}  // namespace detail

/// a + b, a - b, a * b, a / b with NumPy broadcasting.
inline Tensor add(const Tensor& a, const Tensor& b) { return detail::binary_op(a, b, detail::BinaryOp::add); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return detail::binary_op(a, b, detail::BinaryOp::sub); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return detail::binary_op(a, b, detail::BinaryOp::mul); }
inline Tensor div(const Tensor& a, const Tensor& b) { return detail::binary_op(a, b, detail::BinaryOp::div); }
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

/// x + c and x * c for a constant c.
inline Tensor add_scalar(const Tensor& x, float c) {
  if (x.is_cuda()) return device_ops::affine("add_scalar", x, 1.0f, c);
  return detail::unary_op<false>(
      "add_scalar", x, [c](float v) { return v + c; }, [](float, float) { return 1.0f; });
}
inline Tensor mul_scalar(const Tensor& x, float c) {
  if (x.is_cuda()) return device_ops::affine("mul_scalar", x, c, 0.0f);
  return detail::unary_op<false>(
      "mul_scalar", x, [c](float v) { return v * c; }, [c](float, float) { return c; });
}
inline Tensor neg(const Tensor& x) { return mul_scalar(x, -1.0f); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

inline Tensor exp(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("exp", x, device_ops::Unary::exp);
  return detail::unary_op(
      "exp", x, [](float v) { return std::exp(v); }, [](float, float y) { return y; });
}
/// Natural log (NaN below 0, -inf at 0, as std::log).
inline Tensor log(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("log", x, device_ops::Unary::log);
  return detail::unary_op<false>(
      "log", x, [](float v) { return std::log(v); }, [](float v, float) { return 1.0f / v; });
}
/// max(x, 0); the gradient at 0 is 0 (as PyTorch).
inline Tensor relu(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("relu", x, device_ops::Unary::relu);
  return detail::unary_op<false>(
      "relu", x, [](float v) { return v > 0.0f ? v : 0.0f; }, [](float v, float) { return v > 0.0f ? 1.0f : 0.0f; });
}
/// GELU with the exact erf form: x/2 (1 + erf(x / sqrt 2)) (PyTorch's default, BERT's), in
/// float to within ~3 ulp of the exact value (detail::gelu_n; tensor/gelu_math.hpp).
inline Tensor gelu(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("gelu", x, device_ops::Unary::gelu);
  const auto n = static_cast<std::size_t>(x.numel());
  FloatBuffer y(n);
  const bool with_grad = autograd::grad_enabled() && x.requires_grad();
  // The derivative (a float, as backward multiplies it) is computed with the forward.
  auto dy = with_grad ? std::make_shared<FloatBuffer>(n) : nullptr;
  detail::gelu_n(x.data(), y.data(), dy ? dy->data() : nullptr, x.numel());
  if (!with_grad) return autograd::make_result("gelu", x.shape(), std::move(y), {x}, nullptr);
  return autograd::make_result("gelu", x.shape(), std::move(y), {x}, [dy](std::span<const float> g) {
    FloatBuffer gx(g.size());
    const float* __restrict pd = dy->data();
    const float* __restrict pg = g.data();
    float* __restrict out = gx.data();
    for (std::size_t i = 0; i < g.size(); ++i) out[i] = pg[i] * pd[i];
    return autograd::one_grad(std::move(gx));
  });
}
inline Tensor tanh(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("tanh", x, device_ops::Unary::tanh);
  return detail::unary_op(
      "tanh", x, [](float v) { return std::tanh(v); }, [](float, float y) { return 1.0f - y * y; });
}
inline Tensor sigmoid(const Tensor& x) {
  if (x.is_cuda()) return device_ops::unary("sigmoid", x, device_ops::Unary::sigmoid);
  return detail::unary_op(
      "sigmoid", x, [](float v) { return 1.0f / (1.0f + std::exp(-v)); },
      [](float, float y) { return y * (1.0f - y); });
}

}  // namespace qnum
