// The tensor ops on device tensors: each public op (ops_*.hpp) hands its call here when an
// input lives on a device. Values come from DeviceBackend's kernels; the gradient is
// recorded as a device node (autograd::make_device_result) whose backward calls the
// kernels' backward forms. Inputs must all be on one device: moving values is the caller's
// explicit to(). Index inputs (embedding ids, class targets) are host spans, uploaded per call.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum {
class Format;
}  // namespace qnum

namespace qnum::device_ops {

using Binary = DeviceBackend::Binary;
using Unary = DeviceBackend::Unary;
using Grads = std::vector<DeviceArray>;

/// Whether any defined input is on a device (the op then runs here).
inline bool any_on_device(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->is_cuda()) return true;
  return false;
}

/// The one device of the op's defined inputs; a tensor elsewhere is an error naming both.
inline Device common_device(const char* op, std::initializer_list<const Tensor*> ts) {
  Device d{};
  bool first = true;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (first) d = t->device(), first = false;
    else if (t->device() != d)
      detail::fail(op, ": inputs on ", d.str(), " and ", t->device().str(),
                   "; move them to one device with to() (qnum never copies between devices by itself)");
  }
  return d;
}

namespace detail {

inline std::size_t count(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }
inline DeviceBackend& backend(const Device& d) { return device_backend(d); }
inline DeviceArray alloc(const Device& d, std::size_t n) { return DeviceArray(d, n); }
inline DeviceArray zeros(const Device& d, std::size_t n) {
  DeviceArray a(d, n);
  if (n > 0) a.backend().fill(a.data(), 0.0f, n);
  return a;
}
template <class T>
DeviceBytes<T> upload(const Device& d, std::span<const T> v) {
  DeviceBytes<T> out(d, v.size());
  if (!v.empty()) backend(d).copy_to_device(out.data(), v.data(), v.size() * sizeof(T));
  return out;
}
inline Grads one(DeviceArray g) {
  Grads r(1);
  r[0] = std::move(g);
  return r;
}

/// Σ of g [n] over the repeats of a period nb (the gradient of a broadcast operand).
inline DeviceArray reduce_repeats(const Device& d, const float* g, std::size_t n, std::size_t nb, float scale) {
  DeviceArray out = alloc(d, nb);
  backend(d).reduce_sum(g, 1, static_cast<std::int64_t>(n / nb), static_cast<std::int64_t>(nb), scale, out.data());
  return out;
}

}  // namespace detail

// ---- elementwise ------------------------------------------------------------------------

/// a ∘ b for equal shapes, b broadcast as a suffix of a (a bias) or a one-element b; for add
/// and mul also the mirror case (a the smaller).
inline Tensor binary(const Tensor& a, const Tensor& b, Binary op) {
  static constexpr const char* names[] = {"add", "sub", "mul", "div"};
  const char* name = names[static_cast<int>(op)];
  const Device d = common_device(name, {&a, &b});
  if ((op == Binary::add || op == Binary::mul) && a.numel() < b.numel() && repeats_as_suffix(a.shape(), b.shape()))
    return binary(b, a, op);
  const bool same = a.shape() == b.shape();
  if (!same && !(b.numel() == 1 || repeats_as_suffix(b.shape(), a.shape())))
    qnum::detail::fail(name, " on ", d.str(), ": shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                       " broadcast only as equal shapes, a trailing suffix or one element on a device");
  const std::size_t n = detail::count(a), nb = same ? n : detail::count(b);
  Tensor out = Tensor::empty(a.shape(), d);
  if (n > 0) detail::backend(d).binary(op, a.device_data(), b.device_data(), n, nb, out.device_data());
  DeviceArray av = a.device_array(), bv = b.device_array();
  return autograd::make_device_result(name, out, {a, b}, [d, op, av, bv, n, nb](const DeviceArray& g) {
    DeviceBackend& be = detail::backend(d);
    Grads r(2);
    if (n == 0) return r;
    switch (op) {
      case Binary::add:
      case Binary::sub:
        r[0] = g;
        r[1] = nb == n && op == Binary::add ? g : detail::reduce_repeats(d, g.data(), n, nb, op == Binary::add ? 1.f : -1.f);
        break;
      case Binary::mul: {
        r[0] = detail::alloc(d, n);
        be.binary(Binary::mul, g.data(), bv.data(), n, nb, r[0].data());
        DeviceArray ga = detail::alloc(d, n);
        be.binary(Binary::mul, g.data(), av.data(), n, n, ga.data());
        r[1] = nb == n ? ga : detail::reduce_repeats(d, ga.data(), n, nb, 1.0f);
        break;
      }
      case Binary::div: {
        r[0] = detail::alloc(d, n);
        be.binary(Binary::div, g.data(), bv.data(), n, nb, r[0].data());
        DeviceArray t = detail::alloc(d, n);  // -g·a / b²
        be.binary(Binary::mul, r[0].data(), av.data(), n, n, t.data());
        be.binary(Binary::div, t.data(), bv.data(), n, nb, t.data());
        r[1] = detail::reduce_repeats(d, t.data(), n, nb, -1.0f);
        break;
      }
    }
    return r;
  });
}

/// x·scale + shift.
inline Tensor affine(const char* name, const Tensor& x, float scale, float shift) {
  const Device d = x.device();
  Tensor out = Tensor::empty(x.shape(), d);
  const std::size_t n = detail::count(x);
  if (n > 0) detail::backend(d).affine(x.device_data(), scale, shift, out.device_data(), n);
  return autograd::make_device_result(name, out, {x}, [d, scale, n](const DeviceArray& g) {
    if (scale == 1.0f) return detail::one(g);
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) detail::backend(d).affine(g.data(), scale, 0.0f, gx.data(), n);
    return detail::one(std::move(gx));
  });
}

inline Tensor unary(const char* name, const Tensor& x, Unary f) {
  const Device d = x.device();
  Tensor out = Tensor::empty(x.shape(), d);
  const std::size_t n = detail::count(x);
  if (n > 0) detail::backend(d).unary(f, x.device_data(), out.device_data(), n);
  DeviceArray xv = x.device_array(), yv = out.device_array();
  return autograd::make_device_result(name, out, {x}, [d, f, xv, yv, n](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) detail::backend(d).unary_backward(f, g.data(), xv.data(), yv.data(), gx.data(), n);
    return detail::one(std::move(gx));
  });
}

// ---- shapes -----------------------------------------------------------------------------

/// A view of x with shape `to` (same count, checked by the caller).
inline Tensor reshape(const Tensor& x, Shape to) {
  Tensor out = Tensor::from_device(std::move(to), x.device_array());
  return autograd::passes_gradient(
      autograd::make_device_result("reshape", out, {x}, [](const DeviceArray& g) { return detail::one(g); }));
}

/// x's dimensions reordered (perm resolved by the caller).
inline Tensor permute(const char* name, const Tensor& x, const std::vector<std::size_t>& perm) {
  const Device d = x.device();
  const int rank = static_cast<int>(perm.size());
  qnum::detail::require(rank <= 4, name, ": rank ", rank, " above 4");
  Shape out_shape(perm.size());
  std::int64_t in[4] = {1, 1, 1, 1}, outdims[4] = {1, 1, 1, 1};
  int p[4] = {0, 1, 2, 3}, inv[4] = {0, 1, 2, 3};
  for (int i = 0; i < rank; ++i) {
    out_shape[static_cast<std::size_t>(i)] = x.shape()[perm[static_cast<std::size_t>(i)]];
    in[i] = x.shape()[static_cast<std::size_t>(i)];
    p[i] = static_cast<int>(perm[static_cast<std::size_t>(i)]);
    inv[p[i]] = i;
  }
  for (int i = 0; i < rank; ++i) outdims[i] = out_shape[static_cast<std::size_t>(i)];
  Tensor out = Tensor::empty(out_shape, d);
  const std::size_t n = detail::count(x);
  if (n > 0) detail::backend(d).permute(x.device_data(), in, p, rank, out.device_data());
  std::vector<std::int64_t> od(outdims, outdims + 4);
  std::vector<int> iv(inv, inv + 4);
  return autograd::make_device_result(name, out, {x}, [d, od, iv, rank, n](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) detail::backend(d).permute(g.data(), od.data(), iv.data(), rank, gx.data());
    return detail::one(std::move(gx));
  });
}

/// x[..., start:start+length, ...] along d (checked by the caller).
inline Tensor narrow(const Tensor& x, std::size_t d_index, std::int64_t start, std::int64_t length) {
  const Device d = x.device();
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d_index; ++i) outer *= x.shape()[i];
  for (std::size_t i = d_index + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  Shape out_shape = x.shape();
  out_shape[d_index] = length;
  const std::int64_t run = length * inner, stride = x.shape()[d_index] * inner, offset = start * inner;
  Tensor out = Tensor::empty(out_shape, d);
  if (outer * run > 0)
    detail::backend(d).copy_rows(out.device_data(), run, x.device_data() + offset, stride, outer, run);
  const std::size_t n = detail::count(x);
  return autograd::make_device_result("narrow", out, {x}, [d, outer, run, stride, offset, n](const DeviceArray& g) {
    DeviceArray gx = detail::zeros(d, n);
    if (outer * run > 0) detail::backend(d).copy_rows(gx.data() + offset, stride, g.data(), run, outer, run);
    return detail::one(std::move(gx));
  });
}

// ---- linear algebra ---------------------------------------------------------------------

/// x [.., K] · weightᵀ [N, K] + bias [N].
inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Device d = common_device("linear", {&x, &weight, &bias});
  const std::int64_t K = x.size(-1), N = weight.shape()[0], M = x.numel() / std::max<std::int64_t>(K, 1);
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor out = Tensor::empty(out_shape, d);
  DeviceBackend& be = detail::backend(d);
  if (M * N > 0) {
    be.gemm(false, true, M, N, K, 1.0f, x.device_data(), K, 0, weight.device_data(), K, 0, 0.0f, out.device_data(),
            N, 0, 1);
    if (bias.defined())
      be.binary(Binary::add, out.device_data(), bias.device_data(), static_cast<std::size_t>(M * N),
                static_cast<std::size_t>(N), out.device_data());
  }
  DeviceArray xv = x.device_array(), wv = weight.device_array();
  const bool has_bias = bias.defined();
  auto backward = [d, xv, wv, M, N, K, has_bias](const DeviceArray& g) {
    DeviceBackend& b = detail::backend(d);
    Grads r(has_bias ? 3 : 2);
    r[0] = detail::alloc(d, static_cast<std::size_t>(M * K));
    r[1] = detail::alloc(d, static_cast<std::size_t>(N * K));
    if (M * N * K == 0) {
      if (M * K > 0) b.fill(r[0].data(), 0.0f, static_cast<std::size_t>(M * K));
      if (N * K > 0) b.fill(r[1].data(), 0.0f, static_cast<std::size_t>(N * K));
    } else {
      b.gemm(false, false, M, K, N, 1.0f, g.data(), N, 0, wv.data(), K, 0, 0.0f, r[0].data(), K, 0, 1);  // g·W
      b.gemm(true, false, N, K, M, 1.0f, g.data(), N, 0, xv.data(), K, 0, 0.0f, r[1].data(), K, 0, 1);   // gᵀ·x
    }
    if (has_bias) {
      r[2] = detail::alloc(d, static_cast<std::size_t>(N));
      if (N > 0) b.reduce_sum(g.data(), 1, M, N, 1.0f, r[2].data());
    }
    return r;
  };
  if (has_bias) return autograd::make_device_result("linear", out, {x, weight, bias}, std::move(backward));
  return autograd::make_device_result("linear", out, {x, weight}, std::move(backward));
}

/// a [..., M, K] · b [..., K, N]: b rank 2 (shared), or the same leading dimensions as a.
inline Tensor matmul(const Tensor& a, const Tensor& b) {
  const Device d = common_device("matmul", {&a, &b});
  qnum::detail::require(a.rank() >= 2 && b.rank() >= 2, "matmul on ", d.str(), ": operands of rank >= 2, got ",
                        to_string(a.shape()), " and ", to_string(b.shape()));
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  qnum::detail::require(b.size(-2) == K, "matmul: inner dimensions differ: ", to_string(a.shape()), " and ",
                        to_string(b.shape()));
  const bool shared_b = b.rank() == 2;
  if (!shared_b)
    qnum::detail::require(a.rank() == b.rank() && std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin()),
                          "matmul on ", d.str(), ": batch dimensions of ", to_string(a.shape()), " and ",
                          to_string(b.shape()), " must be equal (or b a matrix)");
  const std::int64_t batch = a.numel() / std::max<std::int64_t>(M * K, 1);
  Shape out_shape = a.shape();
  out_shape.back() = N;
  Tensor out = Tensor::empty(out_shape, d);
  DeviceBackend& be = detail::backend(d);
  const std::int64_t Mr = shared_b ? M * batch : M, B = shared_b ? 1 : batch;
  if (Mr * N > 0 && K > 0)
    be.gemm(false, false, Mr, N, K, 1.0f, a.device_data(), K, M * K, b.device_data(), N, shared_b ? 0 : K * N, 0.0f,
            out.device_data(), N, M * N, B);
  else if (out.numel() > 0)
    be.fill(out.device_data(), 0.0f, detail::count(out));
  DeviceArray av = a.device_array(), bv = b.device_array();
  return autograd::make_device_result("matmul", out, {a, b}, [d, av, bv, Mr, N, K, B, M](const DeviceArray& g) {
    DeviceBackend& be2 = detail::backend(d);
    Grads r(2);
    const bool empty = Mr * N * K == 0;
    r[0] = empty ? detail::zeros(d, static_cast<std::size_t>(Mr * K * B)) : detail::alloc(d, static_cast<std::size_t>(Mr * K * B));
    r[1] = empty ? detail::zeros(d, static_cast<std::size_t>(K * N * B)) : detail::alloc(d, static_cast<std::size_t>(K * N * B));
    if (empty) return r;
    be2.gemm(false, true, Mr, K, N, 1.0f, g.data(), N, M * N, bv.data(), N, B > 1 ? K * N : 0, 0.0f, r[0].data(), K,
             M * K, B);                                                                   // g·bᵀ
    be2.gemm(true, false, K, N, Mr, 1.0f, av.data(), K, M * K, g.data(), N, M * N, 0.0f, r[1].data(), N, K * N, B);  // aᵀ·g
    return r;
  });
}

// ---- neural-network ops -----------------------------------------------------------------

/// softmax or log_softmax over the last dimension.
inline Tensor softmax(const Tensor& x, bool log_space) {
  const Device d = x.device();
  const std::int64_t n = x.rank() == 0 ? 1 : x.size(-1), rows = x.numel() / std::max<std::int64_t>(n, 1);
  Tensor out = Tensor::empty(x.shape(), d);
  if (rows * n > 0) detail::backend(d).softmax(x.device_data(), rows, n, log_space, out.device_data());
  DeviceArray yv = out.device_array();
  return autograd::make_device_result(log_space ? "log_softmax" : "softmax", out, {x},
                                      [d, yv, rows, n, log_space](const DeviceArray& g) {
                                        DeviceArray gx = detail::alloc(d, static_cast<std::size_t>(rows * n));
                                        if (rows * n > 0)
                                          detail::backend(d).softmax_backward(g.data(), yv.data(), rows, n, log_space,
                                                                              gx.data());
                                        return detail::one(std::move(gx));
                                      });
}

inline Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const Device d = common_device("layer_norm", {&x, &weight, &bias});
  const std::int64_t c = x.size(-1), rows = x.numel() / c;
  Tensor out = Tensor::empty(x.shape(), d);
  DeviceArray mean = detail::alloc(d, static_cast<std::size_t>(rows)), rstd = detail::alloc(d, static_cast<std::size_t>(rows));
  const float* w = weight.defined() ? weight.device_data() : nullptr;
  const float* b = bias.defined() ? bias.device_data() : nullptr;
  if (rows > 0) detail::backend(d).layer_norm(x.device_data(), rows, c, w, b, eps, out.device_data(), mean.data(), rstd.data());
  DeviceArray xv = x.device_array(), wv = weight.defined() ? weight.device_array() : DeviceArray();
  const bool has_w = weight.defined(), has_b = bias.defined();
  return autograd::make_device_result(
      "layer_norm", out, {x, weight, bias}, [d, xv, wv, mean, rstd, rows, c, has_w, has_b](const DeviceArray& g) {
        Grads r(3);
        r[0] = detail::alloc(d, static_cast<std::size_t>(rows * c));
        if (has_w) r[1] = detail::alloc(d, static_cast<std::size_t>(c));
        if (has_b) r[2] = detail::alloc(d, static_cast<std::size_t>(c));
        if (rows == 0) {
          for (auto& a : r)
            if (!a.empty()) detail::backend(d).fill(a.data(), 0.0f, a.size());
          return r;
        }
        detail::backend(d).layer_norm_backward(g.data(), xv.data(), mean.data(), rstd.data(),
                                               has_w ? wv.data() : nullptr, rows, c, r[0].data(),
                                               has_w ? r[1].data() : nullptr, has_b ? r[2].data() : nullptr);
        return r;
      });
}

/// weight's rows for the host indices (checked by the caller), shape index_shape + [D].
inline Tensor embedding(std::span<const std::int64_t> indices, const Shape& index_shape, const Tensor& weight) {
  const Device d = weight.device();
  const std::int64_t c = weight.shape()[1], n = static_cast<std::int64_t>(indices.size());
  Shape out_shape = index_shape;
  out_shape.push_back(c);
  Tensor out = Tensor::empty(out_shape, d);
  auto idx = std::make_shared<DeviceBytes<std::int64_t>>(detail::upload(d, indices));
  if (n * c > 0) detail::backend(d).embedding(idx->data(), n, weight.device_data(), c, out.device_data());
  const std::size_t wn = detail::count(weight);
  return autograd::make_device_result("embedding", out, {weight}, [d, idx, n, c, wn](const DeviceArray& g) {
    DeviceArray gw = detail::zeros(d, wn);
    if (n * c > 0) detail::backend(d).embedding_backward(idx->data(), n, g.data(), c, gw.data());
    return detail::one(std::move(gw));
  });
}

/// Inverted dropout with the CPU's mask (training, 0 < p < 1: checked by the caller).
inline Tensor dropout(const Tensor& x, float p, std::uint64_t seed) {
  const Device d = x.device();
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  const std::size_t n = detail::count(x);
  Tensor out = Tensor::empty(x.shape(), d);
  auto keep = std::make_shared<DeviceBytes<std::uint8_t>>(d, n);
  if (n > 0) detail::backend(d).dropout(x.device_data(), n, p, scale, seed, 0, keep->data(), out.device_data());
  return autograd::make_device_result("dropout", out, {x}, [d, keep, scale, n](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) detail::backend(d).mask_product(g.data(), keep->data(), scale, gx.data(), n);
    return detail::one(std::move(gx));
  });
}

/// Mean cross-entropy of logits [N, C] against host targets (checked by the caller); `labels`
/// (may be undefined) is recorded as the second input, as on the CPU.
inline Tensor cross_entropy(const Tensor& logits, std::span<const std::int64_t> targets, std::int64_t ignore_index,
                            const Tensor& labels) {
  const Device d = logits.device();
  const std::int64_t rows = logits.shape()[0], c = logits.shape()[1];
  auto t = std::make_shared<DeviceBytes<std::int64_t>>(detail::upload(d, targets));
  DeviceArray logp = detail::alloc(d, static_cast<std::size_t>(rows * c));
  Tensor loss = Tensor::empty({}, d);
  detail::backend(d).cross_entropy(logits.device_data(), t->data(), rows, c, ignore_index, logp.data(),
                                   loss.device_data());
  auto backward = [d, t, logp, rows, c, ignore_index](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, static_cast<std::size_t>(rows * c));
    detail::backend(d).cross_entropy_backward(g.data(), logp.data(), t->data(), rows, c, ignore_index, gx.data());
    return detail::one(std::move(gx));
  };
  if (!labels.defined()) return autograd::make_device_result("cross_entropy", loss, {logits}, std::move(backward));
  return autograd::make_device_result("cross_entropy", loss, {logits, labels},
                                      [backward = std::move(backward)](const DeviceArray& g) {
                                        Grads r = backward(g);
                                        r.emplace_back();
                                        return r;
                                      });
}

/// scale · Σ of every element (sum: 1, mean: 1/n), a rank-0 tensor.
inline Tensor reduce_all(const char* name, const Tensor& x, float scale) {
  const Device d = x.device();
  const std::size_t n = detail::count(x);
  Tensor out = Tensor::empty({}, d);
  if (n > 0)
    detail::backend(d).reduce_sum(x.device_data(), 1, static_cast<std::int64_t>(n), 1, scale, out.device_data());
  else
    detail::backend(d).fill(out.device_data(), 0.0f, 1);
  return autograd::make_device_result(name, out, {x}, [d, n, scale](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) {
      DeviceBackend& be = detail::backend(d);
      be.fill(gx.data(), scale, n);
      be.binary(Binary::mul, gx.data(), g.data(), n, 1, gx.data());
    }
    return detail::one(std::move(gx));
  });
}

/// softmax(q·kᵀ·scale + mask)·v with dropout p (seed), heads token-major as Linear gives
/// them; mask undefined or additive [B, 1, 1, T] without gradient (checked by the caller).
inline Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, std::int64_t heads,
                        float scale, float p, std::uint64_t seed) {
  const Device d = common_device("scaled_dot_product_attention", {&q, &k, &v, &mask});
  const std::int64_t B = q.shape()[0], Tq = q.shape()[1], T = k.shape()[1], D = q.shape()[2] / heads;
  Tensor out = Tensor::empty(q.shape(), d);
  const auto probs_n = static_cast<std::size_t>(B * heads * Tq * T);
  DeviceArray probs = detail::alloc(d, probs_n);
  auto keep = std::make_shared<DeviceBytes<std::uint8_t>>(d, p > 0.0f ? probs_n : 0);
  if (out.numel() > 0)
    detail::backend(d).attention(q.device_data(), k.device_data(), v.device_data(),
                                 mask.defined() ? mask.device_data() : nullptr, B, Tq, T, heads, D, scale, p, seed,
                                 probs.data(), p > 0.0f ? keep->data() : nullptr, out.device_data());
  DeviceArray qv = q.device_array(), kv = k.device_array(), vv = v.device_array();
  return autograd::make_device_result(
      "scaled_dot_product_attention", out, {q, k, v},
      [d, qv, kv, vv, probs, keep, B, Tq, T, heads, D, scale, p](const DeviceArray& g) {
        Grads r(3);
        r[0] = detail::alloc(d, qv.size());
        r[1] = detail::alloc(d, kv.size());
        r[2] = detail::alloc(d, vv.size());
        if (qv.size() > 0 && kv.size() > 0)
          detail::backend(d).attention_backward(g.data(), qv.data(), kv.data(), vv.data(), probs.data(),
                                                p > 0.0f ? keep->data() : nullptr, B, Tq, T, heads, D, scale, p,
                                                r[0].data(), r[1].data(), r[2].data());
        return r;
      });
}

/// f.quantize(x) with the straight-through gradient (clipped: passes inside [lo, hi]).
inline Tensor fake_quantize(const Tensor& x, const Format& f, const Shape& qshape, bool weight_role, bool clipped,
                            double lo, double hi) {
  const Device d = x.device();
  const std::size_t n = detail::count(x);
  Tensor out = Tensor::empty(x.shape(), d);
  std::int64_t shape[4] = {1, 1, 1, 1};
  for (std::size_t i = 0; i < qshape.size() && i < 4; ++i) shape[i] = qshape[i];
  if (n > 0)
    detail::backend(d).quantize(f, x.device_data(), shape, static_cast<int>(qshape.size()), weight_role,
                                out.device_data());
  if (!clipped) {
    return autograd::passes_gradient(
        autograd::make_device_result("fake_quantize", out, {x}, [](const DeviceArray& g) { return detail::one(g); }));
  }
  auto keep = std::make_shared<DeviceBytes<std::uint8_t>>(d, n);
  if (n > 0 && autograd::grad_enabled() && x.requires_grad())
    detail::backend(d).range_mask(x.device_data(), n, lo, hi, keep->data());
  return autograd::make_device_result("fake_quantize", out, {x}, [d, keep, n](const DeviceArray& g) {
    DeviceArray gx = detail::alloc(d, n);
    if (n > 0) detail::backend(d).mask_product(g.data(), keep->data(), 1.0f, gx.data(), n);
    return detail::one(std::move(gx));
  });
}

}  // namespace qnum::device_ops
