// What the block families' CUDA tests share (tests/quantize/block_*.cpp, blocks.cpp): inputs
// with every hard case, the exact policies and layouts, and the check against the CPU's tensor quantize.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../compare.hpp"
#include "../device_buffer.hpp"
#include "qnum/cuda/quantize.hpp"

namespace qnum::cuda::test::blocks {

using qnum::Policy;
using qnum::Role;
using qnum::Rounding;
using qnum::Shape;
using qnum::cuda::DeviceBuffer;

/// Inputs shaped like tensors (runs of 16 share a magnitude, 2^-30..2^30) with every hard
/// case mixed in: +-0 and runs of zeros (whole zero blocks), magnitudes over all of float32
/// (subnormals, 2^127, FLT_MAX), carry candidates (2 - 2^-k) * 2^e, MASE's |x| <= 1e-8
/// threshold, random float32 bits; with `specials`, rare NaN and +-Inf.
inline std::vector<float> block_inputs(std::size_t n, std::uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pick(0, 999), run_scale(-30, 30), any_scale(-149, 127), small(1, 24);
  const float fmax = std::numeric_limits<float>::max(), inf = std::numeric_limits<float>::infinity();
  const float edge[] = {fmax,  -fmax,  0x1p127f,      -0x1p127f, 1e38f, 0x1p-149f, -0x1p-149f, 0x1p-126f,
                        1e-8f, -1e-8f, 1.0000001e-8f, 9.99e-9f,  1e-9f, -1e-9f,    1.0f,       -1.0f};
  std::vector<float> x(n);
  int scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) scale = run_scale(rng);
    const int r = pick(rng);
    float v = std::ldexp(nd(rng), scale);
    if (r < 80)
      v = (r % 2 ? -0.0f : 0.0f);
    else if (r < 120)
      v = std::ldexp(nd(rng), any_scale(rng));
    else if (r < 150)
      v = (r % 2 ? -1.0f : 1.0f) * std::ldexp(2.0f - std::ldexp(1.0f, -small(rng)), scale);
    else if (r < 170)
      v = edge[static_cast<std::size_t>(rng() % std::size(edge))];
    else if (r < 190) {
      v = from_bits(static_cast<std::uint32_t>(rng()));
      if (!std::isfinite(v)) v = 1.5f;
    } else if (specials && r < 193)
      v = r == 190 ? std::numeric_limits<float>::quiet_NaN() : (r == 191 ? inf : -inf);
    x[i] = v;
  }
  if (n >= 160)  // a run of zeros covering whole blocks of most layouts
    for (std::size_t i = n / 3; i < n / 3 + 96; ++i) x[i] = (i % 5 ? 0.0f : -0.0f);
  return x;
}

inline std::string describe(const Shape& shape, Role role, const Policy& p) {
  std::string s = qnum::to_string(shape) + " role " + std::string(qnum::to_string(role)) + " " +
                  std::string(qnum::to_string(p.semantics)) + "/" + std::string(qnum::to_string(p.rounding));
  if (p.subnormals == qnum::Subnormals::flush) s += "/flush";
  return s;
}

/// GPU (out of place into a poisoned buffer, then in place) against the CPU's tensor quantize.
template <class Spec>
void check_blocks(const Spec& s, const Policy& p, const Shape& shape, Role role, const std::vector<float>& in,
                  const std::string& what) {
  std::vector<float> cpu(in.size());
  qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape, role);
  const std::string where = what + " " + describe(shape, role, p);
  DeviceBuffer<float> din(in), dout(std::vector<float>(in.size(), -12345.0f));
  qnum::cuda::quantize(s, p, din.get(), dout.get(), in.size(), shape, role);
  require_same_bits(dout.download(), cpu, in, where);
  qnum::cuda::quantize(s, p, din.get(), din.get(), in.size(), shape, role);
  require_same_bits(din.download(), cpu, in, where + " in place");
}

inline std::vector<Policy> exact_policies() {
  Policy flush = qnum::exact;
  flush.subnormals = qnum::Subnormals::flush;
  auto p = exact_roundings();
  p.push_back(flush);
  return p;
}

/// Exact layouts: rank 0..5, partial last tiles, size-1 and leading untiled dims, empty.
inline std::vector<Shape> exact_shapes() {
  return {{}, {1}, {1000}, {37, 50}, {3, 17, 29}, {1, 64, 1}, {2, 3, 5, 7}, {2, 2, 3, 4, 5}, {0, 16}, {5, 0}};
}

/// MASE layouts (shape, role): 1-D bias, 2-D weight (F.fold), 2-D activation (rows), 3-D
/// activation (F.fold).
inline std::vector<std::pair<Shape, Role>> mase_layouts() {
  return {{{100}, Role::bias},
          {{1000}, Role::weight},
          {{37, 50}, Role::weight},
          {{64, 64}, Role::weight},
          {{13, 50}, Role::activation},
          {{3, 17, 29}, Role::activation},
          {{4, 1, 40}, Role::activation},
          {{0, 16}, Role::weight}};
}

/// Every exact layout and policy, and every MASE layout, on clean and special inputs; MASE
/// also on an all-zero tensor and on zero blocks beside a NaN block (the zero-block rule).
template <class Spec>
void check_family(const Spec& s, const std::string& what) {
  std::uint32_t seed = 1;
  for (const auto& shape : exact_shapes())
    for (const bool specials : {false, true}) {
      const auto in = block_inputs(static_cast<std::size_t>(qnum::numel(shape)), seed++, specials);
      for (const auto& p : exact_policies())
        check_blocks(s, p, shape, Role::weight, in, what + (specials ? " specials" : ""));
    }
  for (const auto& [shape, role] : mase_layouts()) {
    const auto n = static_cast<std::size_t>(qnum::numel(shape));
    for (const bool specials : {false, true})
      check_blocks(s, qnum::mase_compat, shape, role, block_inputs(n, seed++, specials),
                   what + (specials ? " specials" : ""));
    check_blocks(s, qnum::mase_compat, shape, role, std::vector<float>(n, 0.0f), what + " all zero");
    auto nan_and_zeros = block_inputs(n, seed++, false);
    for (std::size_t i = 0; i < n / 2; ++i) nan_and_zeros[i] = 0.0f;
    if (n) nan_and_zeros[n - 1] = std::numeric_limits<float>::quiet_NaN();
    check_blocks(s, qnum::mase_compat, shape, role, nan_and_zeros, what + " zero blocks and a NaN block");
  }
}

}  // namespace qnum::cuda::test::blocks
