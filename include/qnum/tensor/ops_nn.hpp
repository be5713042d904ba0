// Neural-network ops: softmax and log_softmax along a dimension, layer_norm, batch_norm
// (with running statistics), embedding lookup, seeded dropout, and the losses cross_entropy
// and mse_loss. Each computes its values eagerly (sums in double) and is differentiable
// through autograd::make_result; semantics follow PyTorch's torch.nn.functional.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "qnum/core/lane_sum.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"
#include "qnum/tensor/ops_elementwise.hpp"
#include "qnum/tensor/vec_math.hpp"

namespace qnum {

namespace detail {

using Grads = std::vector<FloatBuffer>;

/// `dim` (negative counts from the end) as an index into a shape of rank `rank`.
inline std::size_t normalize_dim(int dim, std::size_t rank, const char* op) {
  const int r = static_cast<int>(rank);
  require(dim >= -r && dim < r, op, ": dimension ", dim, " out of range for rank ", rank);
  return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

/// A tensor seen as [outer, n, inner] around one dimension: element (o, k, i) is at
/// o * n * inner + k * inner + i.
struct DimView {
  std::int64_t outer = 1, n = 1, inner = 1;
  std::size_t at(std::int64_t o, std::int64_t k, std::int64_t i) const {
    return static_cast<std::size_t>((o * n + k) * inner + i);
  }
};

inline DimView dim_view(const Shape& shape, std::size_t d) {
  DimView v;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < d) v.outer *= shape[i];
    if (i == d) v.n = shape[i];
    if (i > d) v.inner *= shape[i];
  }
  return v;
}

/// Calls f(o, i) for every line along the view's dimension.
template <class F>
void for_each_line(const DimView& v, F f) {
  for (std::int64_t o = 0; o < v.outer; ++o)
    for (std::int64_t i = 0; i < v.inner; ++i) f(o, i);
}

/// For lines r in [0, nl) (nl <= kLineGroup): sum[r] = Σ_k term(r, k) in double, each line
/// added in order k = 0, 1, ... (a plain loop's bits). With a full group the lines' chains
/// are interleaved, so their additions' latencies overlap: a line at a time, every line waited
/// on ~4 cycles per element.
inline constexpr int kLineGroup = 8;
template <class Term>
void line_sums(int nl, std::int64_t n, double* sum, Term term) {
  for (int r = 0; r < nl; ++r) sum[r] = 0.0;
  if (nl == kLineGroup) {
    for (std::int64_t k = 0; k < n; ++k)
#pragma GCC unroll 8
      for (int r = 0; r < kLineGroup; ++r) sum[r] += term(r, k);
    return;
  }
  for (int r = 0; r < nl; ++r)
    for (std::int64_t k = 0; k < n; ++k) sum[r] += term(r, k);
}

/// The first elements of lines l0.. l0 + nl - 1 (line l = (o, i): o = l / inner, i = l % inner,
/// for_each_line's order); a line's k-th element is inner·k past its first.
inline void line_bases(const DimView& v, std::int64_t l0, int nl, std::size_t* base) {
  for (int r = 0; r < nl; ++r) base[r] = v.at((l0 + r) / v.inner, 0, (l0 + r) % v.inner);
}

/// The largest non-NaN of x[0], x[st], ..., x[(n-1)·st] (-inf if none), as a loop of std::max
/// from -inf. Unit stride: on lanes, the same rule per lane and then across lanes. Only the
/// sign of a zero maximum can differ from the loop's, and softmax's outputs do not see it: x -
/// max is then ±0 only where x is a zero, exp(±0) = 1, and log_softmax subtracts log(Σ) >= log
/// 2 > 0 when two zeros tie.
template <class Stride>
float line_max(const float* x, std::int64_t n, Stride st) {
  float m = -std::numeric_limits<float>::infinity();
  std::int64_t k = 0;
  if constexpr (std::is_same_v<Stride, std::integral_constant<std::size_t, 1>>) {
    using B = xsimd::batch<float>;
    constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
    if (n >= L) {
      B mv(m);
      for (; k + L <= n; k += L) {
        const B xv = B::load_unaligned(x + k);
        mv = xsimd::select(mv < xv, xv, mv);
      }
      alignas(64) float lanes[B::size];
      mv.store_aligned(lanes);
      for (const float l : lanes) m = std::max(m, l);
    }
  }
  for (; k < n; ++k) m = std::max(m, x[static_cast<std::size_t>(k) * st]);
  return m;
}

/// softmax (log_space false) or log_softmax (true) of x along dimension d, stable. Lines are
/// taken kLineGroup at a time so that their sums interleave (line_sums); each line gets the
/// arithmetic of a line on its own. Lines along the last dimension (unit stride) take loops
/// compiled for that stride, which vectorise.
inline void softmax_lines(const float* x, float* y, const DimView& v, bool log_space) {
  const std::int64_t n = v.n, lines = v.outer * v.inner;
  // e: x - max per line, then exp of it in place (softmax); log_softmax keeps x - max in e
  // and takes the exps in w.
  std::vector<double> e(static_cast<std::size_t>(kLineGroup * n)), w(log_space ? e.size() : 0);
  auto run = [&](auto st) {
    for (std::int64_t l0 = 0; l0 < lines; l0 += kLineGroup) {
      const int nl = static_cast<int>(std::min<std::int64_t>(kLineGroup, lines - l0));
      std::size_t base[kLineGroup];
      line_bases(v, l0, nl, base);
      for (int r = 0; r < nl; ++r) {
        const float* __restrict xr = x + base[r];
        double* __restrict er = e.data() + r * n;
        const float m = line_max(xr, n, st);
        for (std::int64_t k = 0; k < n; ++k) er[k] = static_cast<double>(xr[static_cast<std::size_t>(k) * st]) - m;
      }
      const double* ex = log_space ? w.data() : e.data();
      exp_n(e.data(), log_space ? w.data() : e.data(), static_cast<std::size_t>(nl * n));  // each exp once
      double s[kLineGroup];
      line_sums(nl, n, s, [&](int r, std::int64_t k) { return ex[r * n + k]; });
      for (int r = 0; r < nl; ++r) {
        float* __restrict yr = y + base[r];
        const double* __restrict er = e.data() + r * n;
        if (!log_space) {
          const double sr = s[r];
          for (std::int64_t k = 0; k < n; ++k) yr[static_cast<std::size_t>(k) * st] = static_cast<float>(er[k] / sr);
        } else {
          const double log_s = std::log(s[r]);
          for (std::int64_t k = 0; k < n; ++k) yr[static_cast<std::size_t>(k) * st] = static_cast<float>(er[k] - log_s);
        }
      }
    }
  };
  if (v.inner == 1)
    run(std::integral_constant<std::size_t, 1>{});
  else
    run(static_cast<std::size_t>(v.inner));
}

inline FloatBuffer softmax_values(std::span<const float> x, const DimView& v, bool log_space) {
  FloatBuffer y(x.size());
  softmax_lines(x.data(), y.data(), v, log_space);
  return y;
}

/// d/dx of softmax: gx = y * (g - sum(g * y)) along each line (lines grouped as
/// softmax_lines'). gx may be g.
inline void softmax_backward_lines(const float* g, const float* y, float* gx, const DimView& v) {
  const std::int64_t n = v.n, lines = v.outer * v.inner;
  auto run = [&](auto st) {
    for (std::int64_t l0 = 0; l0 < lines; l0 += kLineGroup) {
      const int nl = static_cast<int>(std::min<std::int64_t>(kLineGroup, lines - l0));
      std::size_t base[kLineGroup];
      line_bases(v, l0, nl, base);
      double dot[kLineGroup];
      line_sums(nl, n, dot, [&](int r, std::int64_t k) {
        const std::size_t j = base[r] + static_cast<std::size_t>(k) * st;
        return static_cast<double>(g[j]) * y[j];
      });
      for (int r = 0; r < nl; ++r) {  // (no restrict on g and gx: they may be one buffer)
        const float* gr = g + base[r];
        const float* __restrict yr = y + base[r];
        float* out = gx + base[r];
        const double d = dot[r];
        for (std::int64_t k = 0; k < n; ++k) {
          const std::size_t j = static_cast<std::size_t>(k) * st;
          out[j] = static_cast<float>(yr[j] * (gr[j] - d));
        }
      }
    }
  };
  if (v.inner == 1)
    run(std::integral_constant<std::size_t, 1>{});
  else
    run(static_cast<std::size_t>(v.inner));
}

inline FloatBuffer softmax_backward(std::span<const float> g, std::span<const float> y, const DimView& v) {
  FloatBuffer gx(g.size());
  softmax_backward_lines(g.data(), y.data(), gx.data(), v);
  return gx;
}

/// d/dx of log_softmax: g - exp(y) * sum(g) along each line.
inline FloatBuffer log_softmax_backward(std::span<const float> g, std::span<const float> y, const DimView& v) {
  FloatBuffer gx(g.size());
  for_each_line(v, [&](std::int64_t o, std::int64_t i) {
    double sum = 0;
    for (std::int64_t k = 0; k < v.n; ++k) sum += g[v.at(o, k, i)];
    for (std::int64_t k = 0; k < v.n; ++k) {
      const std::size_t j = v.at(o, k, i);
      gx[j] = static_cast<float>(g[j] - std::exp(static_cast<double>(y[j])) * sum);
    }
  });
  return gx;
}

inline Tensor softmax_impl(const Tensor& x, int dim, bool log_space) {
  const char* name = log_space ? "log_softmax" : "softmax";
  if (x.rank() < 1) fail(name, ": needs a tensor of rank >= 1, got shape ", to_string(x.shape()));
  const std::size_t d = normalize_dim(dim, x.rank(), name);
  if (x.is_cuda()) {
    require(d + 1 == x.rank(), name, " on ", x.device().str(), ": only over the last dimension (dim ", dim,
            " of shape ", to_string(x.shape()), ")");
    return device_ops::softmax(x, log_space);
  }
  const DimView v = dim_view(x.shape(), d);
  Tensor out(x.shape(), softmax_values(x.values(), v, log_space));
  // Backward reads the output's own storage (shared, not copied; ops never write a result
  // in place, and the closure holds the values, not the tensor, so there is no cycle).
  std::shared_ptr<const FloatBuffer> sy = out.impl_ptr()->storage;
  return autograd::make_result(name, std::move(out), {x}, [sy, v, log_space](std::span<const float> g) {
    return autograd::one_grad(log_space ? log_softmax_backward(g, *sy, v) : softmax_backward(g, *sy, v));
  });
}

/// Checks that an optional per-channel parameter is undefined or of shape [c].
inline void check_channel_param(const Tensor& t, std::int64_t c, const char* op, const char* what) {
  if (!t.defined()) return;
  if (t.rank() != 1 || t.shape()[0] != c)  // if/fail: the message is built only on failure
    fail(op, ": ", what, " has shape ", to_string(t.shape()), ", expected [", c, "]");
}

inline float param_or(const Tensor& t, std::size_t c, float fallback) { return t.defined() ? t.values()[c] : fallback; }

/// Mean and biased variance of the n values at x (two passes, lane_sum order).
inline std::pair<double, double> mean_var(const float* x, std::int64_t n) {
  const double m = lane_sum(n, [x](std::int64_t k) { return static_cast<double>(x[k]); }) / static_cast<double>(n);
  const double v = lane_sum(n, [x, m](std::int64_t k) {
    const double d = x[k] - m;
    return d * d;
  });
  return {m, v / static_cast<double>(n)};
}

/// The gradient list [x, weight, bias] of a normalisation, leaving out inputs without grad.
inline Grads norm_grads(FloatBuffer gx, std::pair<FloatBuffer, FloatBuffer> gwb, const Tensor& x, const Tensor& w,
                        const Tensor& b) {
  Grads r(3);
  if (x.requires_grad()) r[0] = std::move(gx);
  if (w.defined() && w.requires_grad()) r[1] = std::move(gwb.first);
  if (b.defined() && b.requires_grad()) r[2] = std::move(gwb.second);
  return r;
}

// ---- batch_norm pieces -----------------------------------------------------------------

/// x as [N, C, L] (L = 1 for rank 2).
struct BatchView {
  std::int64_t n = 0, c = 0, l = 1;
  std::int64_t count() const { return n * l; }  // elements per channel
  /// Flat index of the k-th element (k in [0, n*l)) of channel ch.
  std::size_t at(std::int64_t ch, std::int64_t k) const {
    return static_cast<std::size_t>(((k / l) * c + ch) * l + k % l);
  }
  std::size_t channel_of(std::size_t j) const {
    return static_cast<std::size_t>((static_cast<std::int64_t>(j) / l) % c);
  }
};

/// f(channel, flat index) over every element of x [N, C, L] in storage order. [N, C]
/// (L = 1) gets a loop nest whose inner loop runs over channels, which vectorises.
template <class F>
void for_each_bn(const BatchView& v, F&& f) {
  const auto n = static_cast<std::size_t>(v.n), c = static_cast<std::size_t>(v.c), l = static_cast<std::size_t>(v.l);
  if (l == 1) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t u = 0; u < c; ++u) f(u, i * c + u);
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t u = 0; u < c; ++u)
      for (std::size_t k = 0; k < l; ++k) f(u, (i * c + u) * l + k);
}

inline BatchView batch_view(const Tensor& x) {
  if (x.rank() != 2 && x.rank() != 3) fail("batch_norm: input must be [N, C] or [N, C, L], got ", to_string(x.shape()));
  return {x.shape()[0], x.shape()[1], x.rank() == 3 ? x.shape()[2] : 1};
}

inline void check_running_stat(const Tensor& t, std::int64_t c, const char* what, bool needed) {
  if (!t.defined()) {
    require(!needed, "batch_norm: ", what, " is needed in eval mode (training=false)");
    return;
  }
  check_channel_param(t, c, "batch_norm", what);
  require(!t.requires_grad(), "batch_norm: ", what, " is a buffer updated in place and must not require grad");
}

/// PyTorch's update (rm and rv are handles: the buffers change in place): running = (1 - momentum) * running + momentum
/// * batch statistic, with the unbiased variance (count / (count - 1) times the biased one).
inline void update_running(Tensor rm, Tensor rv, std::span<const double> mean, std::span<const double> var,
                           std::int64_t count, float momentum) {
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  for (std::size_t c = 0; c < mean.size(); ++c) {
    if (rm.defined()) rm.values()[c] = static_cast<float>((1.0 - momentum) * rm.values()[c] + momentum * mean[c]);
    if (rv.defined())
      rv.values()[c] = static_cast<float>((1.0 - momentum) * rv.values()[c] + momentum * var[c] * unbias);
  }
}

// ---- cross_entropy pieces --------------------------------------------------------------

/// Checks targets against [0, C) (ignore_index exempt) and counts the rows that count.
inline std::int64_t check_targets(std::span<const std::int64_t> targets, std::int64_t n, std::int64_t c,
                                  std::int64_t ignore_index) {
  require(static_cast<std::int64_t>(targets.size()) == n, "cross_entropy: ", targets.size(), " targets for ", n,
          " rows of logits");
  std::int64_t used = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] == ignore_index) continue;
    require(targets[i] >= 0 && targets[i] < c, "cross_entropy: target ", targets[i], " of row ", i,
            " is out of range [0, ", c, ")");
    ++used;
  }
  return used;
}

}  // namespace detail

/// Softmax along `dim` (negative counts from the end), computed as exp(x - max) / sum so
/// large inputs do not overflow.
inline Tensor softmax(const Tensor& x, int dim = -1) { return detail::softmax_impl(x, dim, false); }

/// log(softmax(x)) along `dim`, computed stably as (x - max) - log(sum(exp(x - max))).
inline Tensor log_softmax(const Tensor& x, int dim = -1) { return detail::softmax_impl(x, dim, true); }

namespace detail {

/// layer_norm's weight and bias as one array [w | b] of 2c (1 and 0 where undefined: the
/// same arithmetic either way).
inline FloatBuffer layer_norm_params(const Tensor& weight, const Tensor& bias, std::int64_t c) {
  FloatBuffer wb(static_cast<std::size_t>(2 * c));
  for (std::int64_t k = 0; k < c; ++k) {
    wb[static_cast<std::size_t>(k)] = param_or(weight, static_cast<std::size_t>(k), 1.0f);
    wb[static_cast<std::size_t>(c + k)] = param_or(bias, static_cast<std::size_t>(k), 0.0f);
  }
  return wb;
}

/// One row of layer_norm: yr = (xr - mean)·rstd·w + b (yr may be xr); hr, when not null,
/// receives x̂ = (xr - mean)·rstd for backward. Returns rstd = 1/sqrt(var + eps).
inline double layer_norm_row(const float* xr, float* yr, float* hr, std::int64_t c, const float* pw, const float* pb,
                             float eps) {
  const auto [m, var] = mean_var(xr, c);
  const double s = 1.0 / std::sqrt(var + eps);
  if (hr) {
    for (std::int64_t k = 0; k < c; ++k) {
      hr[k] = static_cast<float>((xr[k] - m) * s);
      yr[k] = hr[k] * pw[k] + pb[k];
    }
  } else {
    for (std::int64_t k = 0; k < c; ++k) yr[k] = static_cast<float>((xr[k] - m) * s) * pw[k] + pb[k];
  }
  return s;
}

}  // namespace detail

/// Layer normalisation over the last dimension (size C), as torch.nn.functional.layer_norm:
/// (x - mean) / sqrt(biased var + eps) * weight + bias, per row; weight and bias are [C] or
/// undefined (then 1 and 0).
inline Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                         float eps = 1e-5f) {
  detail::require(x.rank() >= 1 && x.size(-1) >= 1, "layer_norm: needs a last dimension of size >= 1, got shape ",
                  to_string(x.shape()));
  const std::int64_t c = x.size(-1), rows = x.numel() / c;
  detail::check_channel_param(weight, c, "layer_norm", "weight");
  detail::check_channel_param(bias, c, "layer_norm", "bias");
  if (device_ops::any_on_device({&x, &weight, &bias})) return device_ops::layer_norm(x, weight, bias, eps);
  const auto n = static_cast<std::size_t>(x.numel());
  const bool with_grad =
      autograd::grad_enabled() &&
      (x.requires_grad() || (weight.defined() && weight.requires_grad()) || (bias.defined() && bias.requires_grad()));
  // x̂ and 1/σ are kept for backward only.
  auto xhat = std::make_shared<FloatBuffer>(with_grad ? n : 0);
  auto rstd = std::make_shared<std::vector<double>>(static_cast<std::size_t>(rows));
  auto wb = std::make_shared<FloatBuffer>(detail::layer_norm_params(weight, bias, c));
  FloatBuffer y(n);
  const float *xv = x.data(), *pw = wb->data(), *pb = wb->data() + c;
  for (std::int64_t r = 0; r < rows; ++r)
    (*rstd)[static_cast<std::size_t>(r)] = detail::layer_norm_row(
        xv + r * c, y.data() + r * c, with_grad ? xhat->data() + r * c : nullptr, c, pw, pb, eps);
  if (!with_grad) return autograd::make_result("layer_norm", x.shape(), std::move(y), {x, weight, bias}, nullptr);
  return autograd::make_result(
      "layer_norm", x.shape(), std::move(y), {x, weight, bias},
      [xhat, rstd, wb, x, weight, bias, c, rows](std::span<const float> g) {
        const float* pw = wb->data();
        const float* xh = xhat->data();
        FloatBuffer gx(x.requires_grad() ? g.size() : 0);
        for (std::int64_t r = 0; r < rows && !gx.empty(); ++r) {
          // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w
          const float* gr = g.data() + r * c;
          const float* hr = xh + r * c;
          const double m1 = detail::lane_sum(c, [&](std::int64_t k) { return static_cast<double>(gr[k]) * pw[k]; }) /
                            static_cast<double>(c);
          const double m2 =
              detail::lane_sum(c, [&](std::int64_t k) { return static_cast<double>(gr[k]) * pw[k] * hr[k]; }) /
              static_cast<double>(c);
          const double s = (*rstd)[static_cast<std::size_t>(r)];
          float* out = gx.data() + r * c;
          for (std::int64_t k = 0; k < c; ++k)
            out[k] = static_cast<float>(s * (static_cast<double>(gr[k]) * pw[k] - m1 - hr[k] * m2));
        }
        // gw[k] = Σ_rows g·xhat, gb[k] = Σ_rows g, rows in order.
        std::vector<double> gw(static_cast<std::size_t>(c), 0.0), gb(gw);
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* gr = g.data() + r * c;
          const float* hr = xh + r * c;
          for (std::int64_t k = 0; k < c; ++k) {
            gw[static_cast<std::size_t>(k)] += static_cast<double>(gr[k]) * hr[k];
            gb[static_cast<std::size_t>(k)] += gr[k];
          }
        }
        return detail::norm_grads(std::move(gx), {FloatBuffer(gw.begin(), gw.end()), FloatBuffer(gb.begin(), gb.end())},
                                  x, weight, bias);
      });
}

/// layer_norm(add(a, b), weight, bias, eps) for a and b of one shape (a residual connection),
/// forming each row's sum in the output and normalising it there: the same bits, one buffer
/// and one pass over memory less. For forward use: when a gradient is needed or the shapes
/// differ, it is the two ops.
inline Tensor add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& weight = Tensor(),
                             const Tensor& bias = Tensor(), float eps = 1e-5f) {
  const bool with_grad = autograd::grad_enabled() &&
                         (a.requires_grad() || b.requires_grad() || (weight.defined() && weight.requires_grad()) ||
                          (bias.defined() && bias.requires_grad()));
  if (with_grad || a.shape() != b.shape() || a.rank() < 1 || a.size(-1) < 1 || device_ops::any_on_device({&a, &b}))
    return layer_norm(add(a, b), weight, bias, eps);
  const std::int64_t c = a.size(-1), rows = a.numel() / c;
  detail::check_channel_param(weight, c, "layer_norm", "weight");
  detail::check_channel_param(bias, c, "layer_norm", "bias");
  const FloatBuffer wb = detail::layer_norm_params(weight, bias, c);
  FloatBuffer y(static_cast<std::size_t>(a.numel()));
  const float *pa = a.data(), *pb = b.data();
  for (std::int64_t r = 0; r < rows; ++r) {
    float* yr = y.data() + r * c;
    for (std::int64_t k = 0; k < c; ++k) yr[k] = pa[r * c + k] + pb[r * c + k];
    detail::layer_norm_row(yr, yr, nullptr, c, wb.data(), wb.data() + c, eps);
  }
  return autograd::make_result("add_layer_norm", a.shape(), std::move(y), {a, b, weight, bias}, nullptr);
}

/// Batch normalisation of x [N, C] or [N, C, L] per channel C, as
/// torch.nn.functional.batch_norm. Training: normalises with the batch mean and biased
/// variance over N*L values, and (when defined) updates running_mean / running_var in place
/// with running = (1 - momentum) * running + momentum * batch statistic, the variance
/// unbiased (N*L / (N*L - 1)); N*L == 1 is an error. Eval: normalises with the running
/// statistics (both required). running_* are buffers of shape [C] that must not require
/// grad; weight and bias are [C] or undefined.
inline Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                         float momentum = 0.1f, float eps = 1e-5f) {
  const detail::BatchView bv = detail::batch_view(x);
  detail::check_running_stat(running_mean, bv.c, "running_mean", !training);
  detail::check_running_stat(running_var, bv.c, "running_var", !training);
  detail::check_channel_param(weight, bv.c, "batch_norm", "weight");
  detail::check_channel_param(bias, bv.c, "batch_norm", "bias");
  if (training && bv.count() <= 1)
    detail::fail("batch_norm: training needs more than one value per channel, input ", to_string(x.shape()),
                 " has N*L = ", bv.count());
  // Loops run over the storage in order (rows, channels, positions) with one accumulator
  // per channel (detail::for_each_bn), so each channel still sums its values in index order
  // (the same bits as a per-channel gather) while [N, C] inputs vectorise across channels.
  const float* xv = x.data();
  const auto channels = static_cast<std::size_t>(bv.c);
  const auto total = static_cast<std::size_t>(x.numel());
  std::vector<double> mean(channels, 0.0), var(channels, 0.0);
  if (training) {
    const auto count = static_cast<double>(bv.count());
    double* pm = mean.data();
    double* pv = var.data();
    detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) { pm[u] += xv[j]; });
    for (auto& m : mean) m /= count;
    detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) {
      const double d = xv[j] - pm[u];
      pv[u] += d * d;
    });
    for (auto& v : var) v /= count;
  } else {
    for (std::size_t ch = 0; ch < channels; ++ch)
      mean[ch] = running_mean.values()[ch], var[ch] = running_var.values()[ch];
  }
  auto rstd = std::make_shared<std::vector<double>>(channels);
  for (std::size_t ch = 0; ch < channels; ++ch) (*rstd)[ch] = 1.0 / std::sqrt(var[ch] + eps);
  // weight and bias as per-channel arrays (1 and 0 when undefined).
  FloatBuffer wv(channels, 1.0f), bvals(channels, 0.0f);
  if (weight.defined()) std::copy_n(weight.data(), channels, wv.begin());
  if (bias.defined()) std::copy_n(bias.data(), channels, bvals.begin());
  auto xhat = std::make_shared<FloatBuffer>(total);
  FloatBuffer y(total);
  {
    float* xh = xhat->data();
    float* py = y.data();
    const double *pm = mean.data(), *pr = rstd->data();
    const float *pw = wv.data(), *pb = bvals.data();
    detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) {
      xh[j] = static_cast<float>((xv[j] - pm[u]) * pr[u]);
      py[j] = xh[j] * pw[u] + pb[u];
    });
  }
  if (training) detail::update_running(running_mean, running_var, mean, var, bv.count(), momentum);
  return autograd::make_result(
      "batch_norm", x.shape(), std::move(y), {x, weight, bias},
      [xhat, rstd, x, weight, bias, bv, training, wv = std::move(wv)](std::span<const float> g) {
        const auto channels = static_cast<std::size_t>(bv.c);
        const float* xh = xhat->data();
        const float* pg = g.data();
        const float* pw = wv.data();
        // Per channel: m1 = Σ dxhat, m2 = Σ dxhat·xhat (dxhat = g·w), gw = Σ g·xhat, gb = Σ g,
        // each summed in index order.
        std::vector<double> m1(channels, 0.0), m2(channels, 0.0), gw(channels, 0.0), gb(channels, 0.0);
        double *s1 = m1.data(), *s2 = m2.data(), *sw = gw.data(), *sb = gb.data();
        detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) {
          const double d = static_cast<double>(pg[j]) * pw[u];
          s1[u] += d;
          s2[u] += d * xh[j];
          sw[u] += static_cast<double>(pg[j]) * xh[j];
          sb[u] += pg[j];
        });
        FloatBuffer gx(x.requires_grad() ? g.size() : 0);
        if (!gx.empty()) {
          const auto count = static_cast<double>(bv.count());
          for (std::size_t u = 0; u < channels; ++u) s1[u] /= count, s2[u] /= count;
          float* px = gx.data();
          const double* pr = rstd->data();
          if (training)
            detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) {
              const double d = static_cast<double>(pg[j]) * pw[u];
              px[j] = static_cast<float>(pr[u] * (d - s1[u] - xh[j] * s2[u]));
            });
          else
            detail::for_each_bn(bv, [&](std::size_t u, std::size_t j) {
              px[j] = static_cast<float>(static_cast<double>(pg[j]) * pw[u] * pr[u]);
            });
        }
        return detail::norm_grads(std::move(gx), {FloatBuffer(gw.begin(), gw.end()), FloatBuffer(gb.begin(), gb.end())},
                                  x, weight, bias);
      });
}

/// Rows of `weight` [V, D] picked by `indices` (numel(index_shape) of them, C order): the
/// result has shape index_shape + [D]. The gradient is scattered (summed) into the picked
/// rows of weight. An index outside [0, V) is an error naming it.
namespace detail {

/// embedding's checks of the indices: as many as index_shape holds, each in [0, v).
inline void check_embedding_indices(std::span<const std::int64_t> indices, const Shape& index_shape, std::int64_t v) {
  require(static_cast<std::int64_t>(indices.size()) == numel(index_shape), "embedding: ", indices.size(),
          " indices for index shape ", to_string(index_shape));
  for (std::size_t i = 0; i < indices.size(); ++i)
    require(indices[i] >= 0 && indices[i] < v, "embedding: index ", indices[i], " at position ", i,
            " is out of range [0, ", v, ")");
}

}  // namespace detail

inline Tensor embedding(std::span<const std::int64_t> indices, const Shape& index_shape, const Tensor& weight) {
  detail::require(weight.rank() == 2, "embedding: weight must be [V, D], got ", to_string(weight.shape()));
  detail::require(index_shape.size() < kMaxTensorRank, "embedding: index shape ", to_string(index_shape), " has rank ",
                  index_shape.size(), "; the result's rank must stay <= ", kMaxTensorRank);
  const std::int64_t v = weight.shape()[0], d = weight.shape()[1];
  detail::check_embedding_indices(indices, index_shape, v);
  if (weight.is_cuda()) return device_ops::embedding(indices, index_shape, weight);
  FloatBuffer y(indices.size() * static_cast<std::size_t>(d));
  const float* w = weight.data();
  for (std::size_t i = 0; i < indices.size(); ++i)
    std::copy(w + indices[i] * d, w + (indices[i] + 1) * d, y.begin() + static_cast<std::ptrdiff_t>(i) * d);
  Shape shape = index_shape;
  shape.push_back(d);
  auto idx = std::make_shared<const std::vector<std::int64_t>>(indices.begin(), indices.end());
  // The gradient is dense ([V, D], as PyTorch's default). When weight is a leaf that has no
  // gradient yet, the rows are scattered straight into its gradient buffer (kept allocated
  // by zero_grad), which is what accumulating a fresh zero-filled [V, D] would give, without
  // a second 4M-value buffer per step for a BERT vocabulary.
  return autograd::make_result("embedding", std::move(shape), std::move(y), {weight},
                               [idx, weight, d](std::span<const float> g) {
                                 const auto scatter = [&](float* gw) {
                                   for (std::size_t i = 0; i < idx->size(); ++i) {
                                     float* row = gw + (*idx)[i] * d;
                                     const float* gi = g.data() + i * static_cast<std::size_t>(d);
                                     for (std::int64_t k = 0; k < d; ++k) row[k] += gi[k];
                                   }
                                 };
                                 auto impl = weight.impl_ptr();
                                 if (!impl->grad_fn && impl->grad.empty()) {
                                   impl->grad.assign(impl->storage->size(), 0.0f);
                                   scatter(impl->grad.data());
                                   return detail::Grads{{}};
                                 }
                                 FloatBuffer gw(static_cast<std::size_t>(weight.numel()), 0.0f);
                                 scatter(gw.data());
                                 return autograd::one_grad(std::move(gw));
                               });
}

namespace detail {
inline constexpr std::size_t kMaskChunk = 1024;

/// y[i] = x[i] · (keep[i] ? scale : 0) for i < n (dropout's product, forward and backward;
/// y apart from x). Restrict pointers and a scale by value, so no store may alias it: the
/// loop vectorises (with a captured scale it stayed scalar, a branch per element).
inline void mask_product(const float* __restrict x, const std::uint8_t* __restrict keep, float scale,
                         float* __restrict y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * (keep[i] ? scale : 0.0f);
}

/// Dropout's mask and product over n elements whose flat indices start at `first`: element i
/// kept (keep[i] = 1, y[i] = x[i]·scale) when CounterRng(seed).uniform4(first + i) >= p, else
/// dropped (0, 0·x[i]). Uniforms drawn a chunk at a time, four per Philox draw. The dropout op
/// and the fused attention (a block of the [B, heads, Tq, T] scores) both draw through it.
inline void dropout_mask_product(const CounterRng& rng, std::uint64_t first, float p, float scale, const float* x,
                                 std::uint8_t* keep, float* y, std::size_t n) {
  float u[kMaskChunk];
  for (std::size_t i0 = 0; i0 < n; i0 += kMaskChunk) {
    const std::size_t m = std::min(kMaskChunk, n - i0);
    rng.uniform4_n(first + i0, m, u);
    std::uint8_t* __restrict k = keep + i0;
    for (std::size_t i = 0; i < m; ++i) k[i] = u[i] >= p;
    mask_product(x + i0, k, scale, y + i0, m);
  }
}
}  // namespace detail

/// Inverted dropout: element i is kept when CounterRng(seed).uniform4(i) >= p and scaled by
/// 1 / (1 - p), else zeroed (so the same seed gives the same mask on every machine). Returns
/// x itself when !training or p == 0; p outside [0, 1) is an error.
inline Tensor dropout(const Tensor& x, float p, bool training, std::uint64_t seed) {
  detail::require(p >= 0.0f && p < 1.0f, "dropout: probability ", p, " must be in [0, 1)");
  if (!training || p == 0.0f) return x;
  if (x.is_cuda()) return device_ops::dropout(x, p, seed);
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  const CounterRng rng(seed);
  // The mask as one byte per element (kept or not); each factor is scale or 0 either way.
  auto keep = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(x.numel()));
  FloatBuffer y(keep->size());
  const float* px = x.data();
  std::uint8_t* pk = keep->data();
  detail::dropout_mask_product(rng, 0, p, scale, px, pk, y.data(), y.size());
  return autograd::make_result("dropout", x.shape(), std::move(y), {x}, [keep, scale](std::span<const float> g) {
    FloatBuffer gx(g.size());
    detail::mask_product(g.data(), keep->data(), scale, gx.data(), gx.size());
    return autograd::one_grad(std::move(gx));
  });
}

namespace detail {
/// cross_entropy's computation; `labels` (may be undefined) is the tensor the targets came
/// from, recorded as the op's second input so that a trace links it to the loss.
inline Tensor cross_entropy_op(const Tensor& logits, std::span<const std::int64_t> targets, std::int64_t ignore_index,
                               const Tensor& labels) {
  if (logits.rank() != 2) detail::fail("cross_entropy: logits must be [N, C], got ", to_string(logits.shape()));
  const std::int64_t n = logits.shape()[0], c = logits.shape()[1];
  const std::int64_t used = detail::check_targets(targets, n, c, ignore_index);
  if (logits.is_cuda()) return device_ops::cross_entropy(logits, targets, ignore_index, labels);
  const detail::DimView v = detail::dim_view(logits.shape(), 1);
  auto lp = std::make_shared<const FloatBuffer>(detail::softmax_values(logits.values(), v, true));
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (targets[static_cast<std::size_t>(i)] != ignore_index)
      sum -= (*lp)[v.at(i, targets[static_cast<std::size_t>(i)], 0)];
  const float loss =
      used == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(sum / static_cast<double>(used));
  auto t = std::make_shared<const std::vector<std::int64_t>>(targets.begin(), targets.end());
  auto backward = [lp, t, v, used, ignore_index](std::span<const float> g) {
    FloatBuffer gx(lp->size(), 0.0f);
    const double scale = used == 0 ? 0.0 : static_cast<double>(g[0]) / static_cast<double>(used);
    for (std::int64_t i = 0; i < v.outer; ++i) {
      const std::int64_t ti = (*t)[static_cast<std::size_t>(i)];
      if (ti == ignore_index) continue;
      for (std::int64_t k = 0; k < v.n; ++k) {
        const std::size_t j = v.at(i, k, 0);
        gx[j] = static_cast<float>(scale * (std::exp(static_cast<double>((*lp)[j])) - (k == ti ? 1.0 : 0.0)));
      }
    }
    return detail::Grads{std::move(gx)};
  };
  if (!labels.defined()) return autograd::make_result("cross_entropy", {}, {loss}, {logits}, std::move(backward));
  return autograd::make_result("cross_entropy", {}, {loss}, {logits, labels},
                               [backward = std::move(backward)](std::span<const float> g) {
                                 detail::Grads r = backward(g);
                                 r.emplace_back();  // labels: no gradient
                                 return r;
                               });
}
}  // namespace detail

/// Cross-entropy of logits [N, C] against class indices `targets` (N of them): the mean of
/// -log_softmax(logits)[i, targets[i]] over the rows whose target is not `ignore_index`, as
/// torch.nn.functional.cross_entropy. When every row is ignored the loss is NaN (0 / 0, as
/// PyTorch) and the gradient is zero. A target outside [0, C) (other than ignore_index) is
/// an error. Returns a rank-0 tensor.
inline Tensor cross_entropy(const Tensor& logits, std::span<const std::int64_t> targets,
                            std::int64_t ignore_index = -100) {
  return detail::cross_entropy_op(logits, targets, ignore_index, Tensor());
}

/// The same with the targets held in a tensor `labels` [N] of whole numbers (how a graph
/// input carries them: a trace links the labels to the loss). No gradient flows to labels.
inline Tensor cross_entropy(const Tensor& logits, const Tensor& labels, std::int64_t ignore_index = -100) {
  detail::require(labels.rank() == 1, "cross_entropy: labels must be [N], got ", to_string(labels.shape()));
  std::vector<std::int64_t> targets(static_cast<std::size_t>(labels.numel()));
  const std::vector<float> label_values = labels.to_vector();  // labels on a device: read back, they are few
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const float y = label_values[i];
    detail::require(std::nearbyint(y) == y, "cross_entropy: label ", y, " at position ", i, " is not a whole number");
    targets[i] = static_cast<std::int64_t>(y);
  }
  return detail::cross_entropy_op(logits, targets, ignore_index, labels);
}

/// Mean squared error mean((a - b)^2) over all elements; a and b must have the same shape.
/// Returns a rank-0 tensor (NaN for empty inputs, as PyTorch).
inline Tensor mse_loss(const Tensor& a, const Tensor& b) {
  detail::require(a.shape() == b.shape(), "mse_loss: shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                  " differ");
  const auto av = a.values(), bv = b.values();
  double sum = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    const double d = static_cast<double>(av[i]) - bv[i];
    sum += d * d;
  }
  const float loss = static_cast<float>(sum / static_cast<double>(av.size()));
  return autograd::make_result("mse_loss", {}, {loss}, {a, b}, [a, b](std::span<const float> g) {
    const auto av = a.values(), bv = b.values();
    const double k = 2.0 * static_cast<double>(g[0]) / static_cast<double>(av.size());
    FloatBuffer ga(av.size()), gb(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) {
      ga[i] = static_cast<float>(k * (static_cast<double>(av[i]) - bv[i]));
      gb[i] = -ga[i];
    }
    detail::Grads r(2);
    if (a.requires_grad()) r[0] = std::move(ga);
    if (b.requires_grad()) r[1] = std::move(gb);
    return r;
  });
}

}  // namespace qnum
