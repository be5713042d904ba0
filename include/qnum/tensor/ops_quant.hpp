// Quantization-aware training op: fake_quantize(x, format) rounds x onto a qnum::Format in
// the forward pass (kernel::quantize, bit-identical to Format::quantize) and passes the
// gradient back through the straight-through estimator chosen by the format's policy.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "qnum/format/format.hpp"
#include "qnum/kernel/quantize.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/device_ops.hpp"

namespace qnum {

/// The closed interval of inputs the clipped straight-through estimator passes gradients for.
struct SteRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool contains(float x) const { return x >= lo && x <= hi; }  // false for NaN
};

/// The representable range [min, max] of `f`: max is info().max; min is the most negative
/// value (-max for sign-symmetric families, k_min * 2^-F for two's-complement fixed point,
/// 0 for unsigned fixed point). Families that scale each row by its own maximum
/// (scale_integer) never saturate, so their range is unbounded. Block and data-scaled
/// families (block_fp, mx*, binary, ternary) use their global nominal range from info().
inline SteRange ste_range(const Format& f) {
  if (!f.saturates()) return {};
  const double hi = f.info().max;
  if (const auto* s = std::get_if<FixedSpec>(&f.spec))
    return {detail::scale2(static_cast<double>(s->kmin()), -s->frac_width), hi};
  return {-hi, hi};
}

namespace detail {

/// Where the clipped straight-through estimator passes the gradient (1) or blocks it (0):
/// inside / outside ste_range(f).
inline std::vector<std::uint8_t> ste_keep(const Format& f, std::span<const float> x) {
  const SteRange r = ste_range(f);
  std::vector<std::uint8_t> keep(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) keep[i] = r.contains(x[i]) ? 1 : 0;
  return keep;
}

inline Tensor with_ste(const Tensor& x, const Format& f, FloatBuffer y);

}  // namespace detail

/// Fake quantization: the values of `f.quantize(x, shape, role)` (computed by
/// kernel::quantize, bit for bit the same) with the straight-through gradient of
/// f.policy.ste: `identity` passes the gradient unchanged, `clipped` passes it where x lies
/// in ste_range(f) and zeroes it elsewhere. Formats whose output shape differs from the
/// input's (residual_sign) are an error (fake_quantize_levels_summed takes them). A rank-0
/// tensor is quantized as shape [1].
inline Tensor fake_quantize(const Tensor& x, const Format& f, Role role = Role::activation) {
  f.validate();
  const Shape qshape = x.rank() == 0 ? Shape{1} : x.shape();
  detail::require(f.output_shape(qshape) == qshape, "fake_quantize: format '", f.to_string(),
                  "' changes the tensor's shape (", to_string(qshape), " -> ", to_string(f.output_shape(qshape)),
                  "); only shape-preserving formats can be fake-quantized");
  if (x.is_cuda()) {
    const SteRange r = ste_range(f);
    return device_ops::fake_quantize(x, f, qshape, role == Role::weight, f.policy.ste == Ste::clipped, r.lo, r.hi);
  }
  FloatBuffer y(static_cast<std::size_t>(x.numel()));
  kernel::quantize(f, x.values(), y, qshape, role);
  return detail::with_ste(x, f, std::move(y));
}

/// Fake quantization by a format that stacks levels ([L, ...shape]: residual_sign): the sum
/// of the levels, x-hat = sum_l o_l, the value MASE's LinearBinaryResidualSign multiplies
/// (spec/formats.md 2.9), with fake_quantize's straight-through gradient. Host tensors only.
inline Tensor fake_quantize_levels_summed(const Tensor& x, const Format& f, Role role = Role::activation) {
  f.validate();
  detail::require(!x.is_cuda(), "fake_quantize: format '", f.to_string(),
                  "' stacks levels and runs on the host; use --device cpu");
  const Shape qshape = x.rank() == 0 ? Shape{1} : x.shape();
  const auto n = static_cast<std::size_t>(x.numel());
  FloatBuffer levels(static_cast<std::size_t>(numel(f.output_shape(qshape))));
  kernel::quantize(f, x.values(), levels, qshape, role);
  FloatBuffer y(levels.begin(), levels.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::size_t l = 1; l < levels.size() / n; ++l)
    for (std::size_t i = 0; i < n; ++i) y[i] += levels[l * n + i];  // float32, level by level as torch's sum
  return detail::with_ste(x, f, std::move(y));
}

namespace detail {

/// `y` (the quantized values of x) as fake_quantize's result: the gradient of f.policy.ste.
inline Tensor with_ste(const Tensor& x, const Format& f, FloatBuffer y) {
  std::shared_ptr<const std::vector<std::uint8_t>> keep;  // null: identity STE
  if (f.policy.ste == Ste::clipped && autograd::grad_enabled() && x.requires_grad())
    keep = std::make_shared<const std::vector<std::uint8_t>>(detail::ste_keep(f, x.values()));
  Tensor out = autograd::make_result("fake_quantize", x.shape(), std::move(y), {x}, [keep](std::span<const float> g) {
    FloatBuffer gx(g.begin(), g.end());
    if (keep)
      for (std::size_t i = 0; i < gx.size(); ++i) gx[i] = (*keep)[i] ? gx[i] : 0.0f;  // exact zero, even for inf/NaN g
    return std::vector<FloatBuffer>{std::move(gx)};
  });
  return keep ? out : autograd::passes_gradient(std::move(out));  // identity STE: no copy
}

}  // namespace detail

}  // namespace qnum
