// Shared conformance checks for elementwise formats (the spec/encode/decode/quantize quartet).
// Each family's test file instantiates these over every code of formats up to 16 bits and
// supplies an *independent* enumeration of the value set (from the format's formula, not
// from decode), against which "nearest under the rounding rule" is checked.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/core/policy.hpp"
#include "error_of.hpp"

namespace qnum_test {

inline bool same_bits(float a, float b) {
  if (a != a && b != b) return true;  // NaN == NaN, payload ignored
  return qnum::detail::float_bits(a) == qnum::detail::float_bits(b);
}

inline std::string describe(float x) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(x), qnum::detail::float_bits(x));
  return buf;
}

/// Counts failures, remembers the first, asserts once (fast exhaustive loops).
struct FailureLog {
  std::size_t count = 0;
  std::string first;
  void fail(const std::string& what) {
    if (count++ == 0) first = what;
  }
  void check(const char* what) const {
    INFO(std::string(what), ": ", count, " failures; first: ", first);
    CHECK(count == 0);
  }
};

/// Sorted distinct finite values (both signs; one zero) from an independent enumeration.
inline std::vector<double> sorted_unique(std::vector<double> v) {
  for (auto& x : v)
    if (x == 0) x = 0.0;  // fold -0 into +0
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// Every code: decode->encode gives a code with the same value (canonical round trip),
/// quantize is idempotent on decoded values, and the set of decoded finite values equals
/// the independent enumeration `values`.
template <class Spec>
void check_codes(const Spec& s, const std::vector<double>& values, int bits) {
  FailureLog roundtrip, idempotent;
  std::vector<double> decoded;
  for (std::uint64_t c = 0; c < (std::uint64_t{1} << bits); ++c) {
    const float v = decode(s, static_cast<std::uint32_t>(c));
    if (v != v || std::isinf(v)) continue;
    decoded.push_back(v);
    const float back = decode(s, encode(s, v));
    if (!same_bits(back, v) && !(back == 0 && v == 0))
      roundtrip.fail("code " + std::to_string(c) + " value " + describe(v) + " -> " + describe(back));
    const float q = quantize(s, qnum::exact, v);
    if (!(q == v)) idempotent.fail("value " + describe(v) + " -> " + describe(q));
  }
  roundtrip.check("decode(encode(decode(c))) == decode(c)");
  idempotent.check("quantize(v) == v on every code");
  const auto got = sorted_unique(decoded);
  CHECK(got.size() == values.size());
  FailureLog set;
  for (std::size_t i = 0; i < std::min(got.size(), values.size()); ++i)
    if (got[i] != values[i])
      set.fail("value #" + std::to_string(i) + ": decode gives " + std::to_string(got[i]) + ", formula gives " +
               std::to_string(values[i]));
  set.check("decoded value set == independent enumeration");
}

/// For x between every pair of adjacent values (midpoints, their float neighbours, random
/// points) and beyond the range: quantize(x) under exact is the nearest value, ties go to
/// the value whose code is even, beyond the range it saturates; quantize is monotone.
template <class Spec>
void check_nearest_even(const Spec& s, const std::vector<double>& values, std::uint32_t seed = 1) {
  FailureLog nearest, monotone;
  std::mt19937 rng(seed);
  auto expect = [&](float x) -> double {
    const double xd = x;
    auto it = std::lower_bound(values.begin(), values.end(), xd);
    if (it == values.end()) return values.back();
    if (it == values.begin()) return values.front();
    const double hi = *it, lo = *(it - 1);
    if (hi == xd) return hi;
    const double dl = xd - lo, dh = hi - xd;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    const auto clo = encode(s, static_cast<float>(lo));
    return (clo & 1u) == 0 ? lo : hi;
  };
  auto probe = [&](float x) {
    const float q = quantize(s, qnum::exact, x);
    const double e = expect(x);
    if (!(static_cast<double>(q) == e))
      nearest.fail("x " + describe(x) + " -> " + describe(q) + ", nearest " + std::to_string(e));
  };
  std::vector<float> xs;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double lo = values[i], hi = values[i + 1];
    const float mid = static_cast<float>((lo + hi) / 2);
    xs.insert(xs.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY),
                         static_cast<float>(lo + (hi - lo) * std::uniform_real_distribution<double>(0, 1)(rng))});
  }
  const double top = values.back(), bottom = values.front();
  xs.insert(xs.end(), {static_cast<float>(top * 1.5), static_cast<float>(top * 4), static_cast<float>(bottom * 1.5),
                       3e38f, -3e38f, INFINITY, -INFINITY});
  for (float x : xs) probe(x);
  nearest.check("quantize(x) == nearest value, ties to even code, saturating");
  std::sort(xs.begin(), xs.end());
  float prev = -INFINITY;
  for (float x : xs) {
    const float q = quantize(s, qnum::exact, x);
    if (q < prev) monotone.fail("x " + describe(x) + " -> " + describe(q) + " below previous " + describe(prev));
    prev = q;
  }
  monotone.check("quantize is monotone");
}

/// quantize(-x) == -quantize(x) for formats symmetric about zero.
template <class Spec>
void check_sign_symmetry(const Spec& s, const qnum::Policy& p, std::uint32_t seed = 2) {
  FailureLog sym;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    float x = qnum::detail::bits_float(bits(rng) & 0x7fffffffu);
    if (x != x) continue;
    const float a = quantize(s, p, x), b = quantize(s, p, -x);
    if (!(a == -b)) sym.fail("x " + describe(x) + ": q(x) " + describe(a) + ", q(-x) " + describe(b));
  }
  sym.check("quantize(-x) == -quantize(x)");
}

}  // namespace qnum_test

namespace qnum_test {

/// Directed and away-from-zero rounding against the sorted value set: floor = largest value
/// <= x, ceil = smallest >= x, toward_zero = the one of those nearer zero, nearest_away = the
/// nearest with ties away from zero; all saturate at the ends of the set.
template <class Spec>
void check_rounding_modes(const Spec& s, const std::vector<double>& values, std::uint32_t seed = 3) {
  using qnum::Rounding;
  FailureLog log;
  std::mt19937 rng(seed);
  std::vector<float> xs;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double lo = values[i], hi = values[i + 1];
    const float mid = static_cast<float>((lo + hi) / 2);
    xs.insert(xs.end(), {static_cast<float>(lo), mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY),
                         static_cast<float>(lo + (hi - lo) * std::uniform_real_distribution<double>(0, 1)(rng))});
  }
  xs.insert(xs.end(), {static_cast<float>(values.back() * 3), static_cast<float>(values.front() * 3)});
  for (float x : xs) {
    const double xd = std::clamp(static_cast<double>(x), values.front(), values.back());
    auto up = std::lower_bound(values.begin(), values.end(), xd);
    const double ceil_v = *up;
    const double floor_v = *up == xd ? xd : *(up - 1);
    const double zero_v = xd < 0 ? ceil_v : floor_v;
    const double dl = xd - floor_v, dh = ceil_v - xd;
    const double away_v = dl < dh ? floor_v : dh < dl ? ceil_v : (xd < 0 ? floor_v : ceil_v);
    const struct {
      Rounding r;
      double want;
    } rows[] = {{Rounding::floor, floor_v},
                {Rounding::ceil, ceil_v},
                {Rounding::toward_zero, zero_v},
                {Rounding::nearest_away, away_v}};
    for (const auto& row : rows) {
      const float q = quantize(s, qnum::exact.with(row.r), x);
      if (!(static_cast<double>(q) == row.want))
        log.fail(std::string(qnum::to_string(row.r)) + ": x " + describe(x) + " -> " + describe(q) + ", want " +
                 std::to_string(row.want));
    }
  }
  log.check("floor / ceil / toward_zero / nearest_away against the value set");
}

}  // namespace qnum_test
