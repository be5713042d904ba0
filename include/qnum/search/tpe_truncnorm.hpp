// Truncated-normal arithmetic of Optuna 4.x's TPE (optuna/samplers/_tpe/_truncnorm.py and
// _erf.py), reproduced operation for operation in double so qnum's TPE scores and samples
// match Optuna's to the last bits: the same erf (libm below 2000 elements, FreeBSD's
// polynomials at or above, as Optuna switches), the same log_ndtr series, the same Newton
// iteration for ndtri_exp with its batch-wide stopping rule, the same case splits.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

// Optuna's arithmetic is numpy's, without fused multiply-adds; keep GCC from contracting.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace qnum::search::detail::truncnorm {

inline const double kSqrt2 = std::sqrt(2.0);  // Python's 2**0.5
inline const double kNormPdfLogC = std::log(std::sqrt(2 * M_PI));
inline const double kNdtriExpApproxC = std::sqrt(3.0) / M_PI;
constexpr double kLogE2 = 0.693147180559945309417232121458176568;

/// numpy.logaddexp for one pair.
inline double logaddexp(double x, double y) {
  if (x == y) return x + kLogE2;
  const double tmp = x - y;
  if (tmp > 0) return x + std::log1p(std::exp(-tmp));
  if (tmp <= 0) return y + std::log1p(std::exp(tmp));
  return tmp;  // NaN
}

/// Horner evaluation as numpy's polyval: c0 = c[-1]; c0 = c[-i] + c0 * x.
template <std::size_t N>
double polyval(double x, const double (&c)[N]) {
  double c0 = c[N - 1];
  for (std::size_t i = 2; i <= N; ++i) c0 = c[N - i] + c0 * x;
  return c0;
}

/// Optuna's vectorised erf (FreeBSD s_erf.c without SET_LOW_WORD) for |x| >= 0, non-NaN.
inline double erf_right_non_big(double x) {
  constexpr double erx = 8.45062911510467529297e-01, efx = 1.28379167095512586316e-01;
  static constexpr double pp[] = {1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
                                  -5.77027029648944159157e-03, -2.37630166566501626084e-05};
  static constexpr double qq[] = {1,
                                  3.97917223959155352819e-01,
                                  6.50222499887672944485e-02,
                                  5.08130628187576562776e-03,
                                  1.32494738004321644526e-04,
                                  -3.96022827877536812320e-06};
  static constexpr double pa[] = {-2.36211856075265944077e-03, 4.14856118683748331666e-01,  -3.72207876035701323847e-01,
                                  3.18346619901161753674e-01,  -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                                  -2.16637559486879084300e-03};
  static constexpr double qa[] = {1,
                                  1.06420880400844228286e-01,
                                  5.40397917702171048937e-01,
                                  7.18286544141962662868e-02,
                                  1.26171219808761642112e-01,
                                  1.36370839120290507362e-02,
                                  1.19844998467991074170e-02};
  static constexpr double ra[] = {-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
                                  -6.23753324503260060396e01,  -1.62396669462573470355e02,  -1.84605092906711035994e02,
                                  -8.12874355063065934246e01,  -9.81432934416914548592e00};
  static constexpr double sa[] = {1,
                                  1.96512716674392571292e01,
                                  1.37657754143519042600e02,
                                  4.34565877475229228821e02,
                                  6.45387271733267880336e02,
                                  4.29008140027567833386e02,
                                  1.08635005541779435134e02,
                                  6.57024977031928170135e00,
                                  -6.04244152148580987438e-02};
  static constexpr double rb[] = {-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
                                  -1.60636384855821916062e02,  -6.37566443368389627722e02,  -1.02509513161107724954e03,
                                  -4.83519191608651397019e02};
  static constexpr double sb[] = {1,
                                  3.03380607434824582924e01,
                                  3.25792512996573918826e02,
                                  1.53672958608443695994e03,
                                  3.19985821950859553908e03,
                                  2.55305040643316442583e03,
                                  4.74528541206955367215e02,
                                  -2.24409524465858183362e01};
  if (x < 0x1p-28) return (1 + efx) * x;
  if (x < 0.84375) {
    const double z = x * x;
    return x * (1 + polyval(z, pp) / polyval(z, qq));
  }
  if (x < 1.25) {
    const double s = x - 1;
    return erx + polyval(s, pa) / polyval(s, qa);
  }
  const double z = x * x, s = 1 / z;
  if (x < 1 / 0.35) return 1 - std::exp(-z - 0.5625 + polyval(s, ra) / polyval(s, sa)) / x;
  return 1 - std::exp(-z - 0.5625 + polyval(s, rb) / polyval(s, sb)) / x;
}

/// Optuna's erf over a batch: libm's erf below 2000 elements, its own polynomials from 2000.
inline void erf_inplace(std::vector<double>& x) {
  if (x.size() < 2000) {
    for (double& v : x) v = std::erf(v);
    return;
  }
  for (double& v : x) {
    if (std::isnan(v)) continue;
    const double a = std::fabs(v);
    const double out = a < 6 ? erf_right_non_big(a) : 1.0;
    const double sign = v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0);
    v = sign * out;
  }
}

/// _ndtr over a batch: 0.5 + 0.5 * erf(a / 2**0.5).
inline void ndtr_inplace(std::vector<double>& a) {
  for (double& v : a) v = v / kSqrt2;
  erf_inplace(a);
  for (double& v : a) v = 0.5 + 0.5 * v;
}

inline double ndtr_single(double a) {
  const double x = a / kSqrt2;
  if (x < -1 / kSqrt2) return 0.5 * std::erfc(-x);
  if (x < 1 / kSqrt2) return 0.5 + 0.5 * std::erf(x);
  return 1.0 - 0.5 * std::erfc(x);
}

/// log(Phi(a)): -Phi(-a) above 6, log(Phi(a)) above -20, else the asymptotic series.
inline double log_ndtr(double a) {
  if (a > 6) return -ndtr_single(-a);
  if (a > -20) return std::log(ndtr_single(a));
  const double log_lhs = -0.5 * std::pow(a, 2.0) - std::log(-a) - 0.5 * std::log(2 * M_PI);
  double last_total = 0.0, rhs = 1.0, numerator = 1.0, denom_factor = 1.0;
  const double denom_cons = 1 / std::pow(a, 2.0);  // Python's a**2 is libm pow
  double sign = 1;
  int i = 0;
  while (std::fabs(last_total - rhs) > std::numeric_limits<double>::epsilon()) {
    ++i;
    last_total = rhs;
    sign = -sign;
    denom_factor *= denom_cons;
    numerator *= 2 * i - 1;
    rhs += sign * numerator * denom_factor;
  }
  return log_lhs + std::log(rhs);
}

/// log(exp(log_p) - exp(log_q)) as Optuna's _log_diff.
inline double log_diff(double log_p, double log_q) { return log_p + std::log1p(-std::exp(log_q - log_p)); }

/// Log Gaussian mass on [a, b] elementwise, with Optuna's three cases; the central case's
/// erf batch is all central elements of this call (which decides the erf path).
inline std::vector<double> log_gauss_mass(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = a.size();
  std::vector<double> out(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<std::size_t> central;
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] <= 0)
      out[i] = log_diff(log_ndtr(b[i]), log_ndtr(a[i]));
    else if (a[i] > 0)
      out[i] = log_diff(log_ndtr(-a[i]), log_ndtr(-b[i]));
    else
      central.push_back(i);
  }
  if (!central.empty()) {
    std::vector<double> na(central.size()), nb(central.size());
    for (std::size_t k = 0; k < central.size(); ++k) {
      na[k] = a[central[k]];
      nb[k] = -b[central[k]];
    }
    ndtr_inplace(na);
    ndtr_inplace(nb);
    for (std::size_t k = 0; k < central.size(); ++k) out[central[k]] = std::log1p(-na[k] - nb[k]);
  }
  return out;
}

/// x with log_ndtr(x) = y (Newton from Optuna's initial guesses); every element iterates until
/// all of the batch meet |dx| < 1e-8 |x|, as Optuna's vectorised loop does.
inline std::vector<double> ndtri_exp(const std::vector<double>& y) {
  const std::size_t n = y.size();
  std::vector<double> z(y), x(n);
  std::vector<bool> flipped(n);
  for (std::size_t i = 0; i < n; ++i) {
    flipped[i] = y[i] > -1e-2;
    if (flipped[i]) z[i] = std::log(-std::expm1(y[i]));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (z[i] < -5)
      x[i] = -std::sqrt(-2.0 * (z[i] + kNormPdfLogC));
    else if (z[i] >= -5)
      x[i] = -kNdtriExpApproxC * std::log(std::expm1(-z[i]));
  }
  for (int it = 0; it < 100; ++it) {
    bool converged = true;
    for (std::size_t i = 0; i < n; ++i) {
      const double log_ndtr_x = log_ndtr(x[i]);
      const double log_norm_pdf_x = -0.5 * (x[i] * x[i]) - kNormPdfLogC;
      const double dx = (log_ndtr_x - z[i]) * std::exp(log_ndtr_x - log_norm_pdf_x);
      x[i] -= dx;
      if (!(std::fabs(dx) < 1e-8 * std::fabs(x[i]))) converged = false;
    }
    if (converged) break;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (flipped[i]) x[i] *= -1;
  return x;
}

/// Inverse CDF of the standard normal truncated to [a, b] at quantile q (Optuna's ppf; the
/// left (a < 0) and right cases are separate Newton batches, in element order).
inline std::vector<double> ppf(const std::vector<double>& q, const std::vector<double>& a,
                               const std::vector<double>& b) {
  const std::size_t n = q.size();
  const std::vector<double> log_mass = log_gauss_mass(a, b);
  std::vector<std::size_t> left, right;
  for (std::size_t i = 0; i < n; ++i) (a[i] < 0 ? left : right).push_back(i);
  std::vector<double> out(n);
  if (!left.empty()) {
    std::vector<double> log_phi(left.size());
    for (std::size_t k = 0; k < left.size(); ++k) {
      const std::size_t i = left[k];
      log_phi[k] = logaddexp(log_ndtr(a[i]), std::log(q[i]) + log_mass[i]);
    }
    const std::vector<double> x = ndtri_exp(log_phi);
    for (std::size_t k = 0; k < left.size(); ++k) out[left[k]] = x[k];
  }
  if (!right.empty()) {
    std::vector<double> log_phi(right.size());
    for (std::size_t k = 0; k < right.size(); ++k) {
      const std::size_t i = right[k];
      log_phi[k] = logaddexp(log_ndtr(-b[i]), std::log1p(-q[i]) + log_mass[i]);
    }
    const std::vector<double> x = ndtri_exp(log_phi);
    for (std::size_t k = 0; k < right.size(); ++k) out[right[k]] = -x[k];
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (q[i] == 0) out[i] = a[i];
    if (q[i] == 1) out[i] = b[i];
    if (a[i] == b[i]) out[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

/// Standard-normal log density as Optuna's _norm_logpdf: -(x**2) / 2.0 - log(sqrt(2 pi)).
inline double norm_logpdf(double x) { return -(x * x) / 2.0 - kNormPdfLogC; }

}  // namespace qnum::search::detail::truncnorm

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
