// A sum in double with a fixed order that vector code can reproduce: eight interleaved lanes.
// Used where a reference statistic (ternary's and scaled binary's mean |x|, layer norm's mean
// and variance) must be bit-identical between the scalar definition and SIMD kernels, and
// must not depend on the machine or the thread count.
#pragma once

#include <cstdint>

#include "qnum/core/hd.hpp"

namespace qnum::detail {

/// The final combination of lane_sum's eight lanes (callers with their own lane loops use it).
QNUM_HD inline double lane_sum_combine(double* acc) {
  for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

/// Σ f(k) for k < n in double, in 8 fixed lanes (lane j sums k ≡ j mod 8 in order), then
/// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): independent chains instead of one serial sum, and
/// a fixed order, so the result does not depend on the machine or the thread count.
template <class F>
QNUM_HD double lane_sum(std::int64_t n, F f) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += f(k + j);
  for (int j = 0; k < n; ++k, ++j) acc[j] += f(k);
  return lane_sum_combine(acc);
}

}  // namespace qnum::detail
