// Shared pieces of the kernel tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace qnum_test {

/// n normal floats (mean 0, standard deviation sd) from a seeded mt19937.
inline std::vector<float> randn(std::size_t n, std::uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(g);
  return v;
}

}  // namespace qnum_test
