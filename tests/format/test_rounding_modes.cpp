// Every rounding mode of the elementwise formats against independently enumerated value
// sets (the formula of each format, not decode): floor, ceil, toward_zero, nearest_away.
#include <doctest/doctest.h>

#include <cmath>

#include "format/conformance.hpp"
#include "qnum/format/fixed.hpp"
#include "qnum/format/minifloat.hpp"
#include "qnum/format/minifloat_denorm.hpp"

using namespace qnum;

namespace {
std::vector<double> ieee_values(int w, int e, int b) {
  const int m = w - e - 1;
  std::vector<double> v{0.0};
  for (int k = 1; k < (1 << m); ++k) v.push_back(std::ldexp(k, 1 - b - m));
  for (int ex = 1 - b; ex <= (1 << e) - 1 - b; ++ex)
    for (int k = 0; k < (1 << m); ++k) v.push_back(std::ldexp(1.0 + std::ldexp(k, -m), ex));
  const auto n = v.size();
  for (std::size_t i = 1; i < n; ++i) v.push_back(-v[i]);
  return qnum_test::sorted_unique(v);
}
std::vector<double> denorm_values(int w, int e, int b) {
  const int m = w - e - 1;
  std::vector<double> v;
  for (int ex = -b; ex <= (1 << e) - 1 - b; ++ex)
    for (int k = 0; k < (1 << m); ++k) {
      v.push_back(std::ldexp(k, ex - m));
      v.push_back(-std::ldexp(k, ex - m));
    }
  return qnum_test::sorted_unique(v);
}
}  // namespace

TEST_CASE("rounding modes: exhaustive over fixed point widths up to 12") {
  for (bool is_signed : {true, false})
    for (int w = 1; w <= 12; ++w)
      for (int f : {-2, 0, w / 2, w + 3}) {
        const FixedSpec s{w, f, is_signed};
        CAPTURE(w);
        CAPTURE(f);
        CAPTURE(is_signed);
        std::vector<double> v;
        for (std::int64_t k = s.kmin(); k <= s.kmax(); ++k) v.push_back(std::ldexp(static_cast<double>(k), -f));
        qnum_test::check_rounding_modes(s, qnum_test::sorted_unique(v));
      }
}

TEST_CASE("rounding modes: exhaustive over minifloats up to 10 bits") {
  for (int w = 3; w <= 10; ++w)
    for (int e = 1; e <= std::min(5, w - 2); ++e)
      for (int b : {(1 << (e - 1)) - 1, 0, 3}) {
        CAPTURE(w);
        CAPTURE(e);
        CAPTURE(b);
        qnum_test::check_rounding_modes(MinifloatSpec{w, e, b, Specials::none}, ieee_values(w, e, b));
        qnum_test::check_rounding_modes(MinifloatDenormSpec{w, e, b}, denorm_values(w, e, b));
      }
}
