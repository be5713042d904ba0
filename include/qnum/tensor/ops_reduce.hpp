// Reductions, each differentiable: sum and mean over all elements (a rank-0 result) or over
// one dimension (dropped, or kept with size 1). Sums accumulate in double, so the result is
// the exact sum rounded once for all but enormous reductions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"
#include "qnum/tensor/ops_shape.hpp"

namespace qnum {

namespace detail {

/// A tensor seen as [outer, n, inner] around the reduced dimension.
struct ReduceSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};

inline ReduceSplit reduce_split(const Shape& s, std::size_t d) {
  ReduceSplit r;
  for (std::size_t i = 0; i < d; ++i) r.outer *= s[i];
  r.n = s[d];
  for (std::size_t i = d + 1; i < s.size(); ++i) r.inner *= s[i];
  return r;
}

/// scale · Σ x over every element, as a rank-0 tensor.
inline Tensor reduce_all(const char* name, const Tensor& x, double scale) {
  if (x.is_cuda()) return device_ops::reduce_all(name, x, static_cast<float>(scale));
  double s = 0;
  for (float v : x.values()) s += v;
  const auto n = static_cast<std::size_t>(x.numel());
  return autograd::make_result(name, {}, {static_cast<float>(s * scale)}, {x}, [n, scale](std::span<const float> g) {
    return std::vector<FloatBuffer>{FloatBuffer(n, static_cast<float>(g[0] * scale))};
  });
}

/// scale · Σ x over dimension `dim` (mean: scale = 1/n).
inline Tensor reduce_dim(const char* name, const Tensor& x, int dim, bool keepdim, bool mean) {
  require(x.rank() > 0, name, ": a dimension of a rank-0 tensor (use ", name, "(x) for all elements)");
  const std::size_t d = resolve_dim(name, dim, x.shape());
  const ReduceSplit r = reduce_split(x.shape(), d);
  const double scale = mean ? 1.0 / static_cast<double>(r.n) : 1.0;
  Shape out = x.shape();
  if (keepdim) {
    out[d] = 1;
  } else {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  }
  FloatBuffer y(static_cast<std::size_t>(r.outer * r.inner));
  std::vector<double> acc(static_cast<std::size_t>(r.inner));
  const float* px = x.data();
  for (std::int64_t o = 0; o < r.outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::int64_t k = 0; k < r.n; ++k) {
      const float* row = px + (o * r.n + k) * r.inner;
      for (std::int64_t i = 0; i < r.inner; ++i) acc[static_cast<std::size_t>(i)] += row[i];
    }
    for (std::int64_t i = 0; i < r.inner; ++i)
      y[static_cast<std::size_t>(o * r.inner + i)] = static_cast<float>(acc[i] * scale);
  }
  return autograd::make_result(name, out, std::move(y), {x}, [r, scale](std::span<const float> g) {
    FloatBuffer gx(static_cast<std::size_t>(r.outer * r.n * r.inner));
    for (std::int64_t o = 0; o < r.outer; ++o)
      for (std::int64_t k = 0; k < r.n; ++k)
        for (std::int64_t i = 0; i < r.inner; ++i)
          gx[static_cast<std::size_t>((o * r.n + k) * r.inner + i)] =
              static_cast<float>(g[static_cast<std::size_t>(o * r.inner + i)] * scale);
    return std::vector<FloatBuffer>{std::move(gx)};
  });
}

}  // namespace detail

/// Σ of all elements of x, as a rank-0 tensor (0 for an empty x).
inline Tensor sum(const Tensor& x) { return detail::reduce_all("sum", x, 1.0); }

/// Σ of x over dimension `dim` (negative counts from the end); the dimension is dropped, or
/// kept with size 1 when `keepdim`.
inline Tensor sum(const Tensor& x, int dim, bool keepdim = false) {
  return detail::reduce_dim("sum", x, dim, keepdim, false);
}

/// Mean of all elements of x, as a rank-0 tensor (NaN for an empty x, as PyTorch).
inline Tensor mean(const Tensor& x) { return detail::reduce_all("mean", x, 1.0 / static_cast<double>(x.numel())); }

/// Mean of x over dimension `dim` (negative counts from the end); the dimension is dropped,
/// or kept with size 1 when `keepdim`.
inline Tensor mean(const Tensor& x, int dim, bool keepdim = false) {
  return detail::reduce_dim("mean", x, dim, keepdim, true);
}

}  // namespace qnum
