// What the binary family's and ternary's CUDA tests share (tests/quantize/{binary,ternary,
// residual_sign,binarize,binary_family}.cpp): per-channel inputs of every kind, the shapes and the check.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../compare.hpp"
#include "../device_buffer.hpp"
#include "qnum/cuda/quantize.hpp"

namespace qnum::cuda::test::binary_family {

using qnum::cuda::DeviceBuffer;

constexpr std::size_t kGuard = 7;     // floats past the output that must stay untouched
constexpr float kPoison = -12345.0f;  // what they hold
constexpr int kModes = 8;             // input kinds per channel (channel_values)

inline std::string shape_text(const qnum::Shape& shape) { return qnum::to_string(shape); }

/// One channel's inputs of a given kind: the statistics (mean |x|, thresholds, torch's float32
/// sums) see every kind of channel, and NaN/Inf/overflow stay in their own channels.
inline std::vector<float> channel_values(std::size_t n, int mode, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(-1.5f, 1.5f);
  std::vector<float> v(n);
  const int scale = static_cast<int>(rng() % 41) - 20;
  for (std::size_t i = 0; i < n; ++i) {
    switch (mode) {
      case 0:  // normals at one scale 2^-20 .. 2^20 for the channel
        v[i] = std::ldexp(nd(rng), scale);
        break;
      case 1:  // normals at mixed scales
        v[i] = std::ldexp(nd(rng), static_cast<int>(i % 41) - 20);
        break;
      case 2: {  // the hard sigmoid's range, with exact ties (0, +-0.5, +-1)
        static const float ties[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f};
        v[i] = i % 5 == 0 ? ties[(i / 5) % 6] : ud(rng);
        break;
      }
      case 3: {  // specials sprinkled into normals
        static const float sp[] = {std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(),
                                   0.0f,
                                   -0.0f,
                                   3e38f,
                                   -3e38f,
                                   1e-45f,
                                   -1e-45f,
                                   std::numeric_limits<float>::min(),
                                   1e-40f};
        v[i] = i % 4 == 1 ? sp[(i / 4) % 11] : nd(rng);
        break;
      }
      case 4:  // zeros of both signs: mean 0, MASE's 0/0
        v[i] = i % 3 == 0 ? -0.0f : 0.0f;
        break;
      case 5:  // huge values: float32 sums overflow (MASE), double sums do not (exact)
        v[i] = i % 2 ? 3.0e38f * nd(rng) : nd(rng);
        break;
      case 6:  // one +Inf among normals (no NaN)
        v[i] = i == n / 2 ? std::numeric_limits<float>::infinity() : nd(rng);
        break;
      default:  // random float32 bit patterns (NaN payloads, subnormals, everything)
        v[i] = from_bits(static_cast<std::uint32_t>(rng()));
        break;
    }
  }
  return v;
}

/// A tensor of `shape` whose channel c (index of dim 0; one channel for rank <= 1) has kind
/// (c + offset) % kModes.
inline std::vector<float> make_input(const qnum::Shape& shape, int offset, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto n = static_cast<std::size_t>(qnum::numel(shape));
  const std::size_t channels = shape.size() >= 2 && shape[0] > 0 ? static_cast<std::size_t>(shape[0]) : 1;
  const std::size_t per = channels ? n / channels : 0;
  std::vector<float> in;
  for (std::size_t c = 0; c < channels; ++c) {
    const auto v = channel_values(per, static_cast<int>((c + static_cast<std::size_t>(offset)) % kModes), rng);
    in.insert(in.end(), v.begin(), v.end());
  }
  return in;
}

/// Uniforms in [0, 1) with the boundary draws (0, 0.5 = p(0), 0.75 = p(0.5), largest below 1).
inline std::vector<float> make_uniforms(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  static const float edge[] = {0.0f, 0.5f, 0.75f, 0.25f, std::nextafter(1.0f, 0.0f)};
  std::vector<float> u(n);
  for (std::size_t i = 0; i < n; ++i) u[i] = i % 7 == 3 ? edge[(i / 7) % 5] : ud(rng);
  return u;
}

inline std::size_t output_count(const qnum::ResidualSignSpec& s, const qnum::Policy& p, const qnum::Shape& shape) {
  return static_cast<std::size_t>(qnum::numel(qnum::output_shape(s, p, shape)));
}
template <class Spec>
std::size_t output_count(const Spec&, const qnum::Policy&, const qnum::Shape& shape) {
  return static_cast<std::size_t>(qnum::numel(shape));
}

/// The CPU's tensor quantize (explicit uniforms when `u` is given) against the device's, with
/// the floats past the output checked untouched.
template <class Spec>
void check_tensor(const Spec& s, const qnum::Policy& p, const std::vector<float>& in, const qnum::Shape& shape,
                  const std::string& what, const std::vector<float>* u = nullptr) {
  const std::size_t m = output_count(s, p, shape);
  std::vector<float> cpu(m);
  if constexpr (std::is_same_v<Spec, qnum::BinarySpec>) {
    if (u)
      qnum::quantize(s, p, std::span<const float>(in), std::span<const float>(*u), std::span<float>(cpu), shape);
    else
      qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape);
  } else {
    qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape);
  }
  DeviceBuffer<float> din(in), dout(std::vector<float>(m + kGuard, kPoison));
  if constexpr (std::is_same_v<Spec, qnum::BinarySpec>) {
    if (u) {
      DeviceBuffer<float> du(*u);
      qnum::cuda::quantize(s, p, din.get(), du.get(), dout.get(), shape);
      (void)dout.download();  // keep du alive until the kernel is done
    } else {
      qnum::cuda::quantize(s, p, din.get(), dout.get(), shape);
    }
  } else {
    qnum::cuda::quantize(s, p, din.get(), dout.get(), shape);
  }
  auto got = dout.download();
  for (std::size_t i = m; i < got.size(); ++i) REQUIRE_MESSAGE(got[i] == kPoison, what << ": wrote past the output");
  got.resize(m);
  require_same_bits(got, cpu, in, what + " shape " + shape_text(shape));
}

/// Every kind of channel in every position, for each shape.
template <class Spec>
void check_shapes(const Spec& s, const qnum::Policy& p, const std::vector<qnum::Shape>& shapes, const std::string& what,
                  bool explicit_uniforms = false) {
  std::uint32_t seed = 1;
  for (const auto& shape : shapes)
    for (int offset = 0; offset < kModes; ++offset) {
      const auto in = make_input(shape, offset, seed++);
      const auto u = make_uniforms(in.size(), seed++);
      check_tensor(s, p, in, shape, what + " offset " + std::to_string(offset), explicit_uniforms ? &u : nullptr);
    }
}

/// Ranks 0..4, channel counts 1..16, sizes around and off multiples of 8 and of torch's 4x8.
inline const std::vector<qnum::Shape>& any_rank_shapes() {
  static const std::vector<qnum::Shape> shapes{
      {},      {1},       {7},       {8},       {33},       {1000},    {4099},       {1, 13}, {3, 17}, {5, 64},
      {16, 9}, {2, 1025}, {3, 5, 7}, {1, 2, 3}, {4, 8, 33}, {7, 1, 1}, {2, 3, 5, 7}, {0},     {3, 0},  {0, 5}};
  return shapes;
}

/// MASE's 4-D shapes: per-sample sizes below 8 (scalar tail only), off multiples of 8 and 32,
/// and large enough for torch's cascade to promote partial sums through levels 1..3.
inline const std::vector<qnum::Shape>& mase_4d_shapes() {
  static const std::vector<qnum::Shape> shapes{{1, 1, 1, 1},     {2, 1, 1, 7},   {2, 3, 5, 7},   {3, 1, 1, 9},
                                               {4, 2, 8, 8},     {2, 3, 17, 19}, {3, 4, 16, 33}, {2, 4, 128, 129},
                                               {1, 1, 512, 520}, {0, 2, 3, 4}};
  return shapes;
}

inline std::vector<qnum::Policy> both_bundles() {
  return {qnum::exact, qnum::exact.with_seed(42), qnum::mase_compat, qnum::mase_compat.with_seed(7)};
}

inline std::string policy_text(const qnum::Policy& p) {
  return std::string(p.is_mase() ? "mase" : "exact") + " seed " + std::to_string(p.seed);
}

inline std::string binary_text(const qnum::BinarySpec& s) {
  return std::string("binary ") + (s.bipolar ? "bipolar" : "scaled") + (s.stochastic ? " stochastic" : "");
}

}  // namespace qnum::cuda::test::binary_family
