// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011): the draw for element i
// depends only on (seed, i), so stochastic rounding gives the same bits on any thread count,
// SIMD width or device.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "qnum/core/hd.hpp"
namespace qnum {

/// Philox4x32-10 keyed by a 64-bit seed; `draw(counter)` returns four 32-bit words.
class CounterRng {
 public:
  QNUM_HD constexpr explicit CounterRng(std::uint64_t seed = 0) : seed_(seed) {}

  QNUM_HD constexpr std::array<std::uint32_t, 4> draw(std::uint64_t counter, std::uint64_t stream = 0) const {
    std::array<std::uint32_t, 4> c{static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
                                   static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
    std::uint32_t k0 = static_cast<std::uint32_t>(seed_), k1 = static_cast<std::uint32_t>(seed_ >> 32);
    for (int round = 0; round < 10; ++round) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0];
      const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2];
      c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return c;
  }

  /// Uniform float in [0, 1) with 24 random bits, for element `counter`.
  QNUM_HD constexpr float uniform(std::uint64_t counter) const {
    return static_cast<float>(draw(counter)[0] >> 8) * (1.0f / 16777216.0f);
  }

  /// Standard normal float for element `counter` (Box-Muller on two words of its draw, in
  /// double; the same on every thread count).
  float normal(std::uint64_t counter) const {
    const auto w = draw(counter, 1);                                // stream 1: independent of uniform()'s draws
    const double u1 = (static_cast<double>(w[0]) + 1.0) * 0x1p-32;  // (0, 1]
    const double u2 = static_cast<double>(w[1]) * 0x1p-32;          // [0, 1)
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  std::uint64_t seed_;
};

}  // namespace qnum

#include <random>
#include <vector>

namespace qnum {

/// PyTorch's CPU generator as `torch.manual_seed(seed); torch.rand_like(x)` draws float32:
/// mt19937 seeded with the low 32 bits, one draw per element in C order, u = (r & 2^24-1)·2^-24.
/// Used only to reproduce MASE's stochastic binarization bit for bit (mase_compat).
inline std::vector<float> torch_cpu_rand(std::uint64_t seed, std::size_t n) {
  std::mt19937 mt(static_cast<std::uint32_t>(seed));
  std::vector<float> u(n);
  for (auto& v : u) v = static_cast<float>(static_cast<double>(mt() & 0xFFFFFFu) * (1.0 / 16777216.0));
  return u;
}

}  // namespace qnum
