// What the elementwise families' CUDA tests share (tests/quantize/<family>.cpp): inputs that
// reach every branch, the check of a family's kernel against the CPU reference (aligned,
// with a tail and misaligned), and the exhaustive check of a fast path against the reference
// kernel on all 2^32 float32 inputs.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../compare.hpp"
#include "../device_buffer.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/cuda/quantize.hpp"

namespace qnum::cuda::test::elementwise {

/// Inputs that reach every branch: all 2^16 bfloat16 bit patterns (every sign, exponent,
/// NaN, Inf, subnormal), random float32 bit patterns, and normals at scales 2^-20 .. 2^20.
inline std::vector<float> test_inputs(std::uint32_t seed, std::size_t random_count = 1 << 16) {
  std::vector<float> x;
  for (std::uint32_t b = 0; b < 65536; ++b) x.push_back(from_bits(b << 16));
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < random_count; ++i) x.push_back(from_bits(static_cast<std::uint32_t>(rng())));
  std::normal_distribution<float> nd;
  for (std::size_t i = 0; i < random_count; ++i) x.push_back(std::ldexp(nd(rng), static_cast<int>(i % 41) - 20));
  return x;
}

template <class Spec>
void check_elementwise(const Spec& s, const qnum::Policy& p, const std::string& what) {
  const auto in = test_inputs(17);
  DeviceBuffer<float> din(in), dout(in.size());
  std::vector<float> cpu(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) cpu[i] = qnum::quantize(s, p, in[i], 1000 + i);
  // The whole (aligned) buffer: 4 per thread; 16-byte aligned with a 1-3 element tail; and
  // misaligned (every element on the one-per-thread path). Element i keeps stochastic index 1000 + i.
  for (const auto& [offset, cut] : {std::pair<std::size_t, std::size_t>{0, 0}, {4, 7}, {1, 2}}) {
    const std::size_t n = in.size() - cut;
    const std::vector<float> poison(in.size(), -12345.0f);
    dout.upload(poison);
    qnum::cuda::quantize(s, p, din.get() + offset, dout.get() + offset, n - offset, 1000 + offset);
    auto got = dout.download();
    for (std::size_t i = 0; i < offset; ++i) REQUIRE(got[i] == -12345.0f);  // nothing written outside
    for (std::size_t i = n; i < in.size(); ++i) REQUIRE(got[i] == -12345.0f);
    require_same_bits({got.begin() + offset, got.begin() + n}, {cpu.begin() + offset, cpu.begin() + n},
                      {in.begin() + offset, in.begin() + n}, what + " offset " + std::to_string(offset));
  }
}

inline std::vector<qnum::Policy> policies() {
  auto p = exact_roundings();
  p.push_back(qnum::mase_compat);
  return p;
}

/// The float32-bit fast paths (fixed point and minifloat_ieee under `exact`) against the
/// reference kernel on every one of the 2^32 float32 inputs, compared on the device.
template <class Spec>
void check_fast_path_exhaustively(const Spec& s, const std::string& what, const qnum::Policy& p = qnum::exact) {
  constexpr std::size_t chunk = std::size_t{1} << 28;
  DeviceBuffer<float> in(chunk), fast(chunk), ref(chunk);
  unsigned long long bad = 0;
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += chunk) {
    qnum::cuda::testing::fill_float_bits(in.get(), chunk, static_cast<std::uint32_t>(start));
    qnum::cuda::quantize(s, p, in.get(), fast.get(), chunk);
    qnum::cuda::quantize_reference(s, p, in.get(), ref.get(), chunk);
    const auto m = qnum::cuda::testing::bit_mismatches(fast.get(), ref.get(), chunk);
    if (m.count && !bad) {
      const auto x = static_cast<std::uint32_t>(start + m.first);
      const float xf = from_bits(x);
      FAIL_CHECK(what << ": input 0x" << std::hex << x << std::dec << " (" << xf << "): reference "
                      << qnum::quantize(s, p, xf) << " (CPU)");
    }
    bad += m.count;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of 2^32 inputs differ");
}

/// decode_codes on the device against qnum::decode for every code of a <= 16-bit format.
template <class Spec>
void check_decode_codes(const Spec& s, const std::string& what) {
  const std::uint32_t n = 1u << s.width;
  DeviceBuffer<float> d(n);
  qnum::cuda::decode_codes(s, d.get(), n);
  std::vector<float> cpu(n), codes(n);
  for (std::uint32_t c = 0; c < n; ++c) cpu[c] = qnum::decode(s, c), codes[c] = static_cast<float>(c);
  require_same_bits(d.download(), cpu, codes, what);
}

}  // namespace qnum::cuda::test::elementwise
