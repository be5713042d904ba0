// What the scale_integer, mxint_hardware and MX CUDA tests share: inputs with every kind of
// row / tile / block (zeros, NaN payloads, Inf, subnormals, huge magnitudes) and the checks.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../compare.hpp"
#include "../device_buffer.hpp"
#include "qnum/cuda/quantize.hpp"

namespace qnum::cuda::test::scaled {

using qnum::cuda::DeviceBuffer;

/// n inputs in runs of 16 (so rows, tiles and blocks see every kind): normals at scales
/// 2^-40..2^40 (most runs), all zeros (+0 and -0), one NaN of several payloads, one +-Inf,
/// huge and tiny (subnormal) magnitudes, random float32 bit patterns, flushed subnormals only,
/// one outlier among normals.
inline std::vector<float> mixed_inputs(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const float nans[] = {from_bits(0x7FC00000u), from_bits(0xFFC00000u), from_bits(0x7FA12345u), from_bits(0xFFFFFFFFu)};
  std::vector<float> x(n);
  for (std::size_t start = 0; start < n; start += 16) {
    const std::size_t end = std::min(n, start + 16);
    const unsigned kind = rng() % 20;
    const int scale = static_cast<int>(rng() % 81) - 40;
    for (std::size_t i = start; i < end; ++i) {
      float v = std::ldexp(nd(rng), scale);
      if (kind == 0) v = (rng() % 2) ? 0.0f : -0.0f;
      if (kind == 1) v = std::ldexp(nd(rng), 100 + static_cast<int>(rng() % 28));     // near float max
      if (kind == 2) v = from_bits(static_cast<std::uint32_t>(rng()) & 0x807FFFFFu);  // subnormal or zero
      if (kind == 3) v = from_bits(static_cast<std::uint32_t>(rng()));
      if (kind == 4) v = std::ldexp(nd(rng), -140);
      x[i] = v;
    }
    if (kind == 5) x[start + rng() % (end - start)] = nans[rng() % 4];
    if (kind == 6) x[start + rng() % (end - start)] = (rng() % 2) ? qnum::detail::kInf : -qnum::detail::kInf;
    if (kind == 7) x[start + rng() % (end - start)] *= 1024.0f;  // an outlier: the clip search clips it
  }
  return x;
}

inline qnum::ScaleIntegerSpec si(int width, bool is_signed) {
  qnum::ScaleIntegerSpec s;
  s.width = width;
  s.is_signed = is_signed;
  return s;
}

inline std::string shape_text(const qnum::Shape& s) { return "shape [" + qnum::to_string(s) + "]"; }

/// GPU (out of place, then in place) against the CPU's tensor quantize on the same input.
template <class Spec>
void check_tensor(const Spec& s, const qnum::Policy& p, const std::vector<float>& in, const qnum::Shape& shape,
                  const std::string& what) {
  REQUIRE(static_cast<std::int64_t>(in.size()) == qnum::numel(shape));
  std::vector<float> cpu(in.size());
  qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape);
  const std::string label = what + " " + std::string(qnum::to_string(p.semantics)) + " " + shape_text(shape);
  DeviceBuffer<float> din(in), dout(in.size());
  qnum::cuda::quantize(s, p, din.get(), dout.get(), shape);
  require_same_bits(dout.download(), cpu, in, label);
  qnum::cuda::quantize(s, p, din.get(), din.get(), shape);
  require_same_bits(din.download(), cpu, in, label + " in place");
}

template <class Spec>
void check_shapes(const Spec& s, const qnum::Policy& p, const std::vector<qnum::Shape>& shapes, const std::string& what,
                  std::uint32_t seed) {
  for (const auto& shape : shapes)
    check_tensor(s, p, mixed_inputs(static_cast<std::size_t>(qnum::numel(shape)), seed++), shape, what);
}

inline std::string rounding_text(const qnum::Policy& p) { return std::string(qnum::to_string(p.rounding)); }

}  // namespace qnum::cuda::test::scaled
