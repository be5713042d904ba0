// Shape ops, each differentiable: reshape (one -1 inferred) and flatten, which are views that
// share the input's storage (as tensor.hpp promises for reshape-style ops), and transpose /
// permute, which copy the values into the new order (tensors are always contiguous).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"

namespace qnum {

namespace detail {

/// Dimension d of `shape` as 0..rank-1 (negative d counts from the end).
inline std::size_t resolve_dim(const char* op, int d, const Shape& shape) {
  const int r = static_cast<int>(shape.size());
  require(d >= -r && d < r, op, ": dimension ", d, " out of range for shape ", to_string(shape), " (rank ", r, ")");
  return static_cast<std::size_t>(d < 0 ? d + r : d);
}

/// `to` with its one -1 (if any) replaced so that it holds as many elements as `from`.
inline Shape infer_reshape(const Shape& from, Shape to) {
  const std::int64_t n = numel(from);
  std::int64_t known = 1;
  std::size_t inferred = to.size();
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      require(inferred == to.size(), "reshape: more than one -1 in ", to_string(to));
      inferred = i;
    } else {
      require(to[i] >= 0, "reshape: invalid dimension ", to[i], " in ", to_string(to));
      known *= to[i];
    }
  }
  if (inferred < to.size()) {
    require(known != 0 && n % known == 0, "reshape: cannot reshape ", to_string(from), " (", n, " elements) into ",
            to_string(to));
    to[inferred] = n / known;
  }
  require(numel(to) == n, "reshape: cannot reshape ", to_string(from), " (", n, " elements) into ", to_string(to), " (",
          numel(to), " elements)");
  return to;
}

/// The values of a tensor of shape `in` (C order) rearranged so that output dimension i is
/// input dimension perm[i].
inline FloatBuffer permute_values(const float* src, const Shape& in, const std::vector<std::size_t>& perm) {
  const std::size_t r = in.size();
  std::vector<std::int64_t> in_stride(r), stride(r);
  std::int64_t s = 1;
  for (std::size_t i = r; i-- > 0;) in_stride[i] = s, s *= in[i];
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) out[i] = in[perm[i]], stride[i] = in_stride[perm[i]];
  FloatBuffer y(static_cast<std::size_t>(numel(in)));
  if (y.empty()) return y;
  std::vector<std::int64_t> pos(r, 0);
  std::int64_t flat = 0;
  if (r >= 2 && perm[r - 1] == r - 1) {
    // The last dimension stays last: copy whole rows of it (attention's head split/merge).
    const std::int64_t run = in[r - 1];
    for (std::int64_t o = 0; o < static_cast<std::int64_t>(y.size()); o += run) {
      std::copy_n(src + flat, run, y.data() + o);
      for (std::size_t d = r - 1; d-- > 0;) {
        flat += stride[d];
        if (++pos[d] < out[d]) break;
        flat -= stride[d] * out[d];
        pos[d] = 0;
      }
    }
    return y;
  }
  if (r >= 2 && perm[r - 1] == r - 2 && perm[r - 2] == r - 1) {
    bool leading_kept = true;
    for (std::size_t d = 0; d + 2 < r; ++d) leading_kept = leading_kept && perm[d] == d;
    if (leading_kept) {  // a batch of matrix transposes, in cache-sized tiles
      constexpr std::int64_t kTile = 32;
      const std::int64_t rows = in[r - 2], cols = in[r - 1], mats = numel(in) / (rows * cols);
      for (std::int64_t b = 0; b < mats; ++b) {
        const float* s = src + b * rows * cols;
        float* dst = y.data() + b * rows * cols;
        for (std::int64_t r0 = 0; r0 < rows; r0 += kTile)
          for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
            for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
              for (std::int64_t i = r0; i < std::min(rows, r0 + kTile); ++i) dst[c * rows + i] = s[i * cols + c];
      }
      return y;
    }
  }
  for (float& v : y) {
    v = src[flat];
    for (std::size_t d = r; d-- > 0;) {  // odometer increment over the output
      flat += stride[d];
      if (++pos[d] < out[d]) break;
      flat -= stride[d] * out[d];
      pos[d] = 0;
    }
  }
  return y;
}

/// `dims` resolved against `shape`, checked to be a permutation of its dimensions.
inline std::vector<std::size_t> resolve_permutation(const Shape& shape, const std::vector<int>& dims) {
  auto describe = [&dims] {
    std::string s = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + ")";
  };
  require(dims.size() == shape.size(), "permute: dims ", describe(), " has ", dims.size(), " entries for shape ",
          to_string(shape), " (rank ", shape.size(), ")");
  std::vector<std::size_t> perm(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    perm[i] = resolve_dim("permute", dims[i], shape);
    require(!used[perm[i]], "permute: dims ", describe(), " repeat dimension ", perm[i], " of shape ",
            to_string(shape));
    used[perm[i]] = true;
  }
  return perm;
}

/// The permutation op itself (named for the tape).
inline Tensor permute_op(const char* name, const Tensor& x, std::vector<std::size_t> perm) {
  Shape out(perm.size());
  std::vector<std::size_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out[i] = x.shape()[perm[i]], inverse[perm[i]] = i;
  if (x.is_cuda()) return device_ops::permute(name, x, perm);
  return autograd::make_result(
      name, out, permute_values(x.data(), x.shape(), perm), {x},
      [out, inverse](std::span<const float> g) { return autograd::one_grad(permute_values(g.data(), out, inverse)); });
}

}  // namespace detail

/// x with a new shape of the same element count; one dimension may be -1 (inferred). The
/// result is a view: it shares x's storage (an in-place change of one is seen by the other).
inline Tensor reshape(const Tensor& x, Shape shape) {
  Shape to = detail::infer_reshape(x.shape(), std::move(shape));
  detail::check_tensor_shape(to);
  if (x.is_cuda()) return device_ops::reshape(x, std::move(to));
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->shape = std::move(to);
  impl->storage = x.impl_ptr()->storage;  // a view: the very same values
  return autograd::passes_gradient(
      autograd::make_result("reshape", Tensor::from_impl(std::move(impl)), {x}, [](std::span<const float> g) {
        return autograd::one_grad({g.begin(), g.end()});
      }));
}

/// Dimensions start_dim..end_dim of x merged into one (negative dims count from the end); a
/// view like reshape. The default keeps the first (batch) dimension: [B, C, H, W] -> [B, CHW].
/// A rank-0 tensor becomes [1].
inline Tensor flatten(const Tensor& x, int start_dim = 1, int end_dim = -1) {
  if (x.rank() == 0) return reshape(x, {1});
  const std::size_t s = detail::resolve_dim("flatten", start_dim, x.shape());
  const std::size_t e = detail::resolve_dim("flatten", end_dim, x.shape());
  detail::require(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, " in shape ",
                  to_string(x.shape()));
  Shape to(x.shape().begin(), x.shape().begin() + static_cast<std::ptrdiff_t>(s));
  std::int64_t merged = 1;
  for (std::size_t i = s; i <= e; ++i) merged *= x.shape()[i];
  to.push_back(merged);
  to.insert(to.end(), x.shape().begin() + static_cast<std::ptrdiff_t>(e + 1), x.shape().end());
  return reshape(x, std::move(to));
}

/// x with its dimensions reordered: output dimension i is x's dimension dims[i] (negative
/// entries count from the end); dims must be a permutation of 0..rank-1. Copies the values.
inline Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  return detail::permute_op("permute", x, detail::resolve_permutation(x.shape(), dims));
}

/// x with dimensions d0 and d1 swapped (negative dims count from the end). Copies the values.
inline Tensor transpose(const Tensor& x, int d0, int d1) {
  const std::size_t a = detail::resolve_dim("transpose", d0, x.shape());
  const std::size_t b = detail::resolve_dim("transpose", d1, x.shape());
  std::vector<std::size_t> perm(x.rank());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::swap(perm[a], perm[b]);
  return detail::permute_op("transpose", x, std::move(perm));
}

/// x[..., start:start+length, ...] along `dim` (negative counts from the end), as
/// torch.narrow; copies the values. Its gradient scatters into zeros elsewhere.
inline Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length) {
  const std::size_t d = detail::resolve_dim("narrow", dim, x.shape());
  const std::int64_t size = x.shape()[d];
  detail::require(start >= 0 && length >= 0 && start + length <= size, "narrow: range [", start, ", ", start + length,
                  ") is outside dimension ", dim, " of size ", size, " in shape ", to_string(x.shape()));
  if (x.is_cuda()) return device_ops::narrow(x, d, start, length);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (std::size_t i = d + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  Shape out = x.shape();
  out[d] = length;
  const std::int64_t run = length * inner, stride = size * inner, offset = start * inner;
  FloatBuffer y(static_cast<std::size_t>(outer * run));
  for (std::int64_t o = 0; o < outer; ++o) std::copy_n(x.data() + o * stride + offset, run, y.data() + o * run);
  return autograd::make_result("narrow", std::move(out), std::move(y), {x},
                               [outer, run, stride, offset](std::span<const float> g) {
                                 FloatBuffer gx(static_cast<std::size_t>(outer * stride), 0.0f);
                                 for (std::int64_t o = 0; o < outer; ++o)
                                   std::copy_n(g.data() + o * run, run, gx.data() + o * stride + offset);
                                 return autograd::one_grad(std::move(gx));
                               });
}

}  // namespace qnum
