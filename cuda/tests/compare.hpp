// Bit-level comparison of device results with the CPU reference, shared by the CUDA tests.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <string>
#include <vector>

#include "qnum/core/policy.hpp"

namespace qnum::cuda::test {

inline std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// Bitwise equality (any two NaNs equal, whatever the payload), reporting the first few
/// mismatches with their input; `in` may be shorter than the output (stacked outputs such as
/// residual_sign's levels: element i came from in[i % in.size()]).
inline void require_same_bits(const std::vector<float>& gpu, const std::vector<float>& cpu,
                              const std::vector<float>& in, const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  int bad = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    if (bits(gpu[i]) == bits(cpu[i]) || (std::isnan(gpu[i]) && std::isnan(cpu[i]))) continue;
    if (bad++ < 5) {
      const float x = in.empty() ? 0.0f : in[i % in.size()];
      FAIL_CHECK(what << ": element " << i << " input " << x << " (0x" << std::hex << bits(x) << ") gpu " << gpu[i]
                      << " (0x" << bits(gpu[i]) << ") cpu " << cpu[i] << " (0x" << bits(cpu[i]) << ")" << std::dec);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " mismatches of " << gpu.size());
}

/// The exact bundle under every rounding (stochastic with a fixed seed).
inline std::vector<qnum::Policy> exact_roundings() {
  using qnum::Rounding;
  return {qnum::exact,
          qnum::exact.with(Rounding::floor),
          qnum::exact.with(Rounding::nearest_away),
          qnum::exact.with(Rounding::toward_zero),
          qnum::exact.with(Rounding::ceil),
          qnum::exact.with(Rounding::stochastic).with_seed(42)};
}

}  // namespace qnum::cuda::test
