// Tensor quantize for every elementwise family (each element through its scalar reference),
// and the size checks and stochastic draws every family's tensor quantize shares.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "qnum/core/error.hpp"
#include "qnum/core/hd.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/core/shape.hpp"

namespace qnum::detail {

/// Validates that `in` and `out` match `shape` (out may alias in).
inline void check_tensor_io(std::string_view family, std::span<const float> in, std::span<float> out,
                            const Shape& shape) {
  for (auto d : shape) require(d >= 0, family, ": negative dimension in shape ", to_string(shape));
  require(static_cast<std::int64_t>(in.size()) == numel(shape), family, ": input has ", in.size(),
          " elements but shape ", to_string(shape), " needs ", numel(shape));
  require(out.size() == in.size(), family, ": output has ", out.size(), " elements, input has ", in.size());
}

/// Applies an elementwise reference `q(x, index)` to every element; the index is the flat
/// position, which keys stochastic rounding so results never depend on how work is split.
template <class Q>
void quantize_each(std::span<const float> in, std::span<float> out, Q&& q) {
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = q(in[i], static_cast<std::uint64_t>(i));
}

/// The uniform draw for element `index` under `policy` (only used by stochastic rounding).
QNUM_HD inline float stochastic_draw(const Policy& policy, std::uint64_t index) {
  return policy.rounding == Rounding::stochastic ? CounterRng(policy.seed).uniform(index) : 0.0f;
}

}  // namespace qnum::detail

namespace qnum {

/// Tensor quantize for every elementwise family (any spec with a scalar reference
/// `quantize(spec, policy, x, index)`): each element through the reference, keyed by its flat
/// index. Shape and role do not matter; blocked families define their own overload.
template <class Spec>
requires requires(const Spec& s, const Policy& p, float x) {
  { quantize(s, p, x, std::uint64_t{0}) } -> std::same_as<float>;
}
void quantize(const Spec& s, const Policy& p, std::span<const float> in, std::span<float> out, const Shape& shape,
              Role = Role::weight) {
  detail::check_tensor_io(s.name, in, out, shape);
  detail::quantize_each(in, out, [&](float x, std::uint64_t i) { return quantize(s, p, x, i); });
}

}  // namespace qnum
