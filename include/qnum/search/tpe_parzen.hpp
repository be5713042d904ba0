// Optuna 4.x's Parzen estimator (optuna/samplers/_tpe/parzen_estimator.py and
// probability_distributions.py): one mixture of product kernels over the parameters, a kernel
// per observation plus the prior kernel, built on the internal representation (log-transformed
// bounds, step-widened bounds, categorical indices). Sampling consumes uniform doubles in
// numpy's order; log densities follow numpy's operation order and summation (pairwise sums).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/tpe_random.hpp"
#include "qnum/search/tpe_truncnorm.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace qnum::search {

/// One parameter of a Parzen estimator's space. Numerical: bounds as declared (`step` 0 for
/// continuous, ints have step >= 1; `log` needs low > 0). Categorical: `n_choices` >= 1.
struct ParzenParam {
  bool categorical = false;
  double low = 0.0, high = 0.0, step = 0.0;
  bool log = false;
  std::size_t n_choices = 0;
};

/// Observation weights by count, as Optuna's `weights` argument.
using TpeWeightsFn = std::function<std::vector<double>(std::size_t)>;

/// Optuna's default_weights: n ones below 25, else linspace(1/n, 1, n - 25) then 25 ones.
inline std::vector<double> tpe_default_weights(std::size_t n) {
  if (n < 25) return std::vector<double>(n, 1.0);
  const std::size_t num = n - 25;
  std::vector<double> w(n, 1.0);
  const double start = 1.0 / static_cast<double>(n), stop = 1.0;
  if (num == 1) {
    w[0] = start;
  } else if (num > 1) {  // numpy.linspace: arange * step + start, last element set to stop
    const double step = (stop - start) / static_cast<double>(num - 1);
    for (std::size_t i = 0; i < num; ++i) w[i] = static_cast<double>(i) * step + start;
    w[num - 1] = stop;
  }
  return w;
}

/// The estimator's settings (Optuna's _ParzenEstimatorParameters).
struct ParzenOptions {
  double prior_weight = 1.0;
  bool consider_magic_clip = true;
  bool consider_endpoints = false;
  bool multivariate = false;
  TpeWeightsFn weights = tpe_default_weights;
};

namespace detail {

/// numpy's pairwise summation (the add.reduce inner loop) over a[0..n) with stride.
inline double pairwise_sum(const double* a, std::size_t n, std::size_t stride = 1) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i * stride];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j * stride];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i * stride];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2, stride) + pairwise_sum(a + n2 * stride, n - n2, stride);
}

/// Optuna's _log_gauss_mass_unique: the mass over unique (a, b) pairs (the unique set's
/// central count picks the erf path), scattered back.
inline std::vector<double> log_gauss_mass_unique(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<std::size_t> order(a.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t i, std::size_t j) { return a[i] < a[j] || (a[i] == a[j] && b[i] < b[j]); });
  std::vector<double> ua, ub;
  std::vector<std::size_t> inv(a.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    if (ua.empty() || a[i] != ua.back() || b[i] != ub.back()) {
      ua.push_back(a[i]);
      ub.push_back(b[i]);
    }
    inv[i] = ua.size() - 1;
  }
  const std::vector<double> m = detail::truncnorm::log_gauss_mass(ua, ub);
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = m[inv[i]];
  return out;
}

/// Sorted unique values and, per input, its index among them (numpy.unique's inverse).
inline std::pair<std::vector<double>, std::vector<std::size_t>> unique_inverse(const std::vector<double>& x) {
  std::vector<double> u(x);
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  std::vector<std::size_t> inv(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    inv[i] = static_cast<std::size_t>(std::lower_bound(u.begin(), u.end(), x[i]) - u.begin());
  return {std::move(u), std::move(inv)};
}

/// Unique (mu, sigma) pairs, lexicographically sorted, with the inverse (_unique_inverse_2d).
inline void unique_pairs(const std::vector<double>& mu, const std::vector<double>& sigma, std::vector<double>& umu,
                         std::vector<double>& usigma, std::vector<std::size_t>& inv) {
  std::vector<std::size_t> order(mu.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t i, std::size_t j) { return mu[i] < mu[j] || (mu[i] == mu[j] && sigma[i] < sigma[j]); });
  umu.clear();
  usigma.clear();
  inv.assign(mu.size(), 0);
  for (std::size_t i : order) {
    if (umu.empty() || mu[i] != umu.back() || sigma[i] != usigma.back()) {
      umu.push_back(mu[i]);
      usigma.push_back(sigma[i]);
    }
    inv[i] = umu.size() - 1;
  }
}

}  // namespace detail

/// Optuna's _ParzenEstimator over a fixed list of parameters. `observations[j]` holds the
/// internal values of parameter j (all the same length n); the mixture has n + 1 kernels
/// (the last is the prior) or, with no observations, the prior alone.
class ParzenEstimator {
 public:
  ParzenEstimator(std::vector<ParzenParam> space, const std::vector<std::vector<double>>& observations,
                  const ParzenOptions& options, const std::vector<double>* predetermined_weights = nullptr)
      : space_(std::move(space)) {
    qnum::detail::require(options.prior_weight >= 0, "TPE: prior_weight must be non-negative, got ",
                          options.prior_weight);
    qnum::detail::require(observations.size() == space_.size(), "TPE: ", observations.size(),
                          " observation columns for ", space_.size(), " parameters");
    const std::size_t n = observations.empty() ? 0 : observations[0].size();
    for (const auto& col : observations)
      qnum::detail::require(col.size() == n, "TPE: observation columns of different lengths");
    std::vector<double> w;
    if (predetermined_weights != nullptr) {
      qnum::detail::require(predetermined_weights->size() == n, "TPE: ", predetermined_weights->size(),
                            " predetermined weights for ", n, " observations");
      w = *predetermined_weights;
    } else {
      w = call_weights(options.weights, n);
    }
    if (n == 0)
      w = {1.0};
    else
      w.push_back(options.prior_weight);
    const double total = detail::pairwise_sum(w.data(), w.size());
    for (double& v : w) v /= total;
    weights_ = std::move(w);
    dists_.reserve(space_.size());
    for (std::size_t j = 0; j < space_.size(); ++j)
      dists_.push_back(space_[j].categorical ? categorical(observations[j], space_[j], options)
                                             : numerical(observations[j], space_[j], options));
  }

  std::size_t n_kernels() const { return weights_.size(); }
  const std::vector<double>& weights() const { return weights_; }

  /// `size` samples per parameter (columns, internal representation), drawing in numpy's
  /// order: kernel choice, then each categorical's quantiles, then the truncated normals.
  std::vector<std::vector<double>> sample(UniformSource& rng, std::size_t size) const {
    const std::vector<double> cdf = detail::choice_cdf(weights_);
    std::vector<std::size_t> active(size);
    for (auto& k : active) k = detail::choice_from_cdf(cdf, rng.next_double());
    std::vector<std::vector<double>> out(space_.size(), std::vector<double>(size));
    std::vector<std::size_t> numerical;
    for (std::size_t j = 0; j < space_.size(); ++j) {
      const Dist& d = dists_[j];
      if (!space_[j].categorical) {
        numerical.push_back(j);
        continue;
      }
      const std::size_t nc = space_[j].n_choices;
      for (std::size_t s = 0; s < size; ++s) {
        const double u = rng.next_double();
        const double* row = &d.cat_weights[d.cat_row[active[s]] * nc];
        double cum = 0.0;
        std::size_t count = 0;
        for (std::size_t c = 0; c < nc; ++c) {
          cum += row[c];
          const double cp = c + 1 == nc ? 1.0 : cum;  // the last cumulative set to 1 as Optuna
          if (cp < u) ++count;
        }
        out[j][s] = static_cast<double>(count);
      }
    }
    if (numerical.empty()) return out;
    const std::size_t m = numerical.size() * size;
    std::vector<double> q(m), a(m), b(m), loc(m), scale(m);
    for (std::size_t t = 0; t < numerical.size(); ++t) {
      const std::size_t j = numerical[t];
      const Dist& d = dists_[j];
      for (std::size_t s = 0; s < size; ++s) {
        const std::size_t i = t * size + s;
        q[i] = rng.next_double();
        loc[i] = d.mu[active[s]];
        scale[i] = d.sigma[active[s]];
        a[i] = (d.trunc_low - loc[i]) / scale[i];
        b[i] = (d.trunc_high - loc[i]) / scale[i];
      }
    }
    const std::vector<double> x = detail::truncnorm::ppf(q, a, b);
    for (std::size_t t = 0; t < numerical.size(); ++t) {
      const std::size_t j = numerical[t];
      const ParzenParam& p = space_[j];
      for (std::size_t s = 0; s < size; ++s) {
        const std::size_t i = t * size + s;
        double v = x[i] * scale[i] + loc[i];
        if (p.log) v = std::exp(v);
        if (p.step != 0.0) v = std::clamp(p.low + std::nearbyint((v - p.low) / p.step) * p.step, p.low, p.high);
        out[j][s] = v;
      }
    }
    return out;
  }

  /// log density of each sample (columns in internal representation, as `sample` returns).
  /// Equal samples (bit for bit) get their density computed once: of TPE's 24 candidates of a
  /// categorical only a few differ, and a sample's density depends on it alone.
  std::vector<double> log_pdf(const std::vector<std::vector<double>>& x) const {
    qnum::detail::require(x.size() == space_.size(), "TPE: log_pdf of ", x.size(), " columns for ", space_.size(),
                          " parameters");
    const std::size_t n = x.empty() ? 0 : x[0].size();
    std::vector<std::size_t> first, of(n);  // distinct samples; each sample's among them
    for (std::size_t s = 0; s < n; ++s) {
      std::size_t u = 0;
      for (; u < first.size(); ++u) {
        bool same = true;
        for (std::size_t j = 0; j < x.size() && same; ++j)
          same = std::memcmp(&x[j][s], &x[j][first[u]], sizeof(double)) == 0;
        if (same) break;
      }
      if (u == first.size()) first.push_back(s);
      of[s] = u;
    }
    if (first.size() == n) return log_pdf_distinct(x);
    std::vector<std::vector<double>> xu(x.size(), std::vector<double>(first.size()));
    for (std::size_t j = 0; j < x.size(); ++j)
      for (std::size_t u = 0; u < first.size(); ++u) xu[j][u] = x[j][first[u]];
    const std::vector<double> du = log_pdf_distinct(xu);
    std::vector<double> out(n);
    for (std::size_t s = 0; s < n; ++s) out[s] = du[of[s]];
    return out;
  }

 private:
  std::vector<double> log_pdf_distinct(const std::vector<std::vector<double>>& x) const {
    const std::size_t n = x.empty() ? 0 : x[0].size(), nk = weights_.size();
    std::vector<double> wlp(n * nk, 0.0);  // [sample][kernel]
    std::vector<std::size_t> cont, cats;
    bool discrete = false;
    for (std::size_t j = 0; j < space_.size(); ++j) {
      if (space_[j].categorical)
        cats.push_back(j);
      else if (space_[j].step == 0.0)
        cont.push_back(j);
      else
        discrete = true;
    }
    if (!discrete && cats.size() > 1) {
      add_categoricals(cats, x, wlp);
      cats.clear();
    }
    for (std::size_t j = 0; j < space_.size() && (discrete || !cats.empty()); ++j) {
      const ParzenParam& p = space_[j];
      const Dist& d = dists_[j];
      if (p.categorical) {
        for (std::size_t s = 0; s < n; ++s) {
          const auto c = static_cast<std::size_t>(static_cast<long long>(x[j][s]));
          for (std::size_t k = 0; k < nk; ++k) wlp[s * nk + k] += d.cat_log_weights[d.cat_row[k] * p.n_choices + c];
        }
      } else if (p.step != 0.0) {
        add_discrete(p, d, x[j], wlp);
      }
    }
    if (!cont.empty()) add_continuous(cont, x, wlp);
    std::vector<double> out(n), e(n * nk), mxs(n);
    std::vector<std::size_t> todo(nk);
    const std::vector<double>& log_w = log_weights();
    auto same = [](double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); };
    for (std::size_t s = 0; s < n; ++s) {
      double* row = &wlp[s * nk];
      double mx = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (std::size_t k = 0; k < nk; ++k) {
        row[k] += log_w[k];
        if (std::isnan(row[k]))
          nan = true;
        else
          mx = std::max(mx, row[k]);
      }
      if (nan) mx = std::numeric_limits<double>::quiet_NaN();  // numpy's max propagates NaN
      if (std::isinf(mx) && mx < 0) mx = 0;
      mxs[s] = mx;
      // exp(row[k] - mx) is computed once per distinct (row[k], mx): a sample takes the exps of
      // earlier samples with the same max where its terms are the same (categorical candidates
      // of different choices differ only at the kernels observed at one of the two).
      double* es = &e[s * nk];
      std::size_t m = nk;  // todo[0, m): the kernels still without an exp
      for (std::size_t k = 0; k < nk; ++k) todo[k] = k;
      for (std::size_t p = 0; p < s && m > 0; ++p) {
        if (!same(mxs[p], mx)) continue;
        const double *p_row = &wlp[p * nk], *p_e = &e[p * nk];
        std::size_t left = 0;
        for (std::size_t t = 0; t < m; ++t) {
          const std::size_t k = todo[t];
          const bool hit = same(row[k], p_row[k]);
          es[k] = p_e[k];  // overwritten below where it is no hit
          todo[left] = k;
          left += hit ? 0 : 1;
        }
        m = left;
      }
      for (std::size_t t = 0; t < m; ++t) es[todo[t]] = std::exp(row[todo[t]] - mx);
      out[s] = std::log(detail::pairwise_sum(es, nk)) + mx;
    }
    return out;
  }

  // The logs of the weights. TPE builds its "below" and "above" estimators with the same
  // weights for every parameter of a trial (the weights depend on the number of observations
  // alone), so the last few computed on this thread are kept and reused for equal weights.
  const std::vector<double>& log_weights() const {
    struct Entry {
      std::vector<double> weights, logs;
    };
    thread_local std::array<Entry, 4> cache;
    thread_local std::size_t next = 0;
    for (const Entry& e : cache)
      if (e.weights.size() == weights_.size() && !e.weights.empty() &&
          std::memcmp(e.weights.data(), weights_.data(), weights_.size() * sizeof(double)) == 0)
        return e.logs;
    Entry& e = cache[next];
    next = (next + 1) % cache.size();
    e.weights = weights_;
    e.logs.resize(weights_.size());
    for (std::size_t k = 0; k < weights_.size(); ++k) e.logs[k] = std::log(weights_[k]);
    return e.logs;
  }

  struct Dist {
    // Categorical: the kernels' distinct rows [row][choice], normalised, with their logs
    // (an observation's row is the prior's plus one at its choice, so there are at most
    // one per observed choice and the prior's), and each kernel's row.
    std::vector<double> cat_weights, cat_log_weights;
    std::vector<std::uint32_t> cat_row;
    std::vector<double> mu, sigma;         // numerical, internal (log) scale; last is the prior
    double trunc_low = 0, trunc_high = 0;  // truncation bounds on the internal scale
  };

  static std::vector<double> call_weights(const TpeWeightsFn& fn, std::size_t n) {
    qnum::detail::require(static_cast<bool>(fn), "TPE: weights function is empty");
    std::vector<double> w = fn(n);
    if (w.size() > n) w.resize(n);
    double sum = 0.0;
    for (double v : w) {
      qnum::detail::require(std::isfinite(v), "TPE: the weights function returned a non-finite value for n = ", n);
      qnum::detail::require(v >= 0, "TPE: the weights function returned a negative value ", v, " for n = ", n);
      sum += v;
    }
    qnum::detail::require(w.empty() || sum > 0, "TPE: the weights function returned all zeros for n = ", n);
    qnum::detail::require(w.size() == n, "TPE: the weights function returned ", w.size(), " values for n = ", n);
    return w;
  }

  static Dist categorical(const std::vector<double>& obs, const ParzenParam& p, const ParzenOptions& opt) {
    Dist d;
    const std::size_t nc = p.n_choices;
    qnum::detail::require(nc >= 1, "TPE: categorical parameter with no choices");
    if (obs.empty()) {
      d.cat_weights.assign(nc, 1.0 / static_cast<double>(nc));
      d.cat_log_weights.assign(nc, std::log(1.0 / static_cast<double>(nc)));
      d.cat_row.assign(1, 0);
      return d;
    }
    const std::size_t nk = obs.size() + 1;
    const double base = opt.prior_weight / static_cast<double>(nk);
    // Optuna's rows are `base` everywhere plus one at the observed choice, each normalised by
    // its (pairwise) sum: the same operations once per distinct row.
    auto add_row = [&](std::size_t choice) {  // choice == nc: the prior's row
      const std::size_t at = d.cat_weights.size();
      d.cat_weights.resize(at + nc, base);
      double* row = &d.cat_weights[at];
      if (choice < nc) row[choice] += 1;
      double sum = detail::pairwise_sum(row, nc);
      if (sum == 0) sum = 1;
      for (std::size_t c = 0; c < nc; ++c) row[c] /= sum;
      return static_cast<std::uint32_t>(at / nc);
    };
    constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> row_of(nc, kNone);
    d.cat_row.resize(nk);
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto c = static_cast<long long>(obs[k]);
      qnum::detail::require(c >= 0 && static_cast<std::size_t>(c) < nc, "TPE: categorical index ", c, " outside [0, ",
                            nc, ")");
      std::uint32_t& r = row_of[static_cast<std::size_t>(c)];
      if (r == kNone) r = add_row(static_cast<std::size_t>(c));
      d.cat_row[k] = r;
    }
    d.cat_row[nk - 1] = add_row(nc);
    d.cat_log_weights.resize(d.cat_weights.size());
    for (std::size_t i = 0; i < d.cat_weights.size(); ++i) d.cat_log_weights[i] = std::log(d.cat_weights[i]);
    return d;
  }

  Dist numerical(const std::vector<double>& obs, const ParzenParam& p, const ParzenOptions& opt) const {
    Dist d;
    double low = p.low, high = p.high;
    if (p.step != 0.0) {
      low -= p.step / 2;
      high += p.step / 2;
    }
    std::vector<double> mus(obs);
    if (p.log) {
      for (double& v : mus) v = std::log(v);
      low = std::log(low);
      high = std::log(high);
    }
    d.trunc_low = low;
    d.trunc_high = high;
    const std::size_t n = mus.size();
    std::vector<double> sigmas(n);
    if (opt.multivariate) {
      const double sigma =
          0.2 *
          std::pow(static_cast<double>(std::max<std::size_t>(n, 1)), -1.0 / static_cast<double>(space_.size() + 4)) *
          (high - low);
      std::fill(sigmas.begin(), sigmas.end(), sigma);
    } else if (n > 0) {
      // Stable order for ties (numpy's argsort is not stable and its tie order differs by
      // platform: x86-simd-sort on AVX-512; tests/fixtures/search/make_tpe_fixtures.py).
      std::vector<std::size_t> idx(n);
      std::iota(idx.begin(), idx.end(), std::size_t{0});
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t i, std::size_t j) { return mus[i] < mus[j]; });
      std::vector<double> s(n + 2);
      s[0] = low;
      for (std::size_t i = 0; i < n; ++i) s[i + 1] = mus[idx[i]];
      s[n + 1] = high;
      std::vector<double> ss(n);
      for (std::size_t i = 0; i < n; ++i) ss[i] = std::max(s[i + 1] - s[i], s[i + 2] - s[i + 1]);
      if (!opt.consider_endpoints && n + 2 >= 4) {
        ss[0] = s[2] - s[1];
        ss[n - 1] = s[n] - s[n - 1];
      }
      for (std::size_t i = 0; i < n; ++i) sigmas[idx[i]] = ss[i];
    }
    const double maxsigma = high - low;
    const double minsigma =
        opt.consider_magic_clip ? (high - low) / std::min(100.0, 1.0 + static_cast<double>(n + 1)) : 1e-12;
    for (double& v : sigmas) v = std::min(std::max(v, minsigma), maxsigma);
    mus.push_back(0.5 * (low + high));
    sigmas.push_back(high - low);
    d.mu = std::move(mus);
    d.sigma = std::move(sigmas);
    return d;
  }

  // Several categorical parameters and no discrete one (the terms are summed over these in
  // order, before the continuous ones): each (sample, kernel) sum is kept in a register,
  // reading each parameter's few distinct row values for the sample's choice from a table.
  void add_categoricals(const std::vector<std::size_t>& cats, const std::vector<std::vector<double>>& x,
                        std::vector<double>& wlp) const {
    const std::size_t n = x[0].size(), nk = weights_.size(), nt = cats.size();
    std::vector<std::size_t> offset(nt + 1, 0);  // of each parameter's rows in a sample's table
    for (std::size_t t = 0; t < nt; ++t)
      offset[t + 1] = offset[t] + dists_[cats[t]].cat_weights.size() / space_[cats[t]].n_choices;
    const std::size_t width = offset[nt];
    std::vector<double> table(n * width);  // [sample][parameter's row]: log weight of its choice
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t t = 0; t < nt; ++t) {
        const std::size_t nc = space_[cats[t]].n_choices, rows = offset[t + 1] - offset[t];
        const auto c = static_cast<std::size_t>(static_cast<long long>(x[cats[t]][s]));
        for (std::size_t r = 0; r < rows; ++r)
          table[s * width + offset[t] + r] = dists_[cats[t]].cat_log_weights[r * nc + c];
      }
    std::vector<std::size_t> at(nt);
    for (std::size_t k = 0; k < nk; ++k) {
      for (std::size_t t = 0; t < nt; ++t) at[t] = offset[t] + dists_[cats[t]].cat_row[k];
      for (std::size_t s = 0; s < n; ++s) {
        const double* tab = &table[s * width];
        double acc = wlp[s * nk + k];
        for (std::size_t t = 0; t < nt; ++t) acc += tab[at[t]];
        wlp[s * nk + k] = acc;
      }
    }
  }

  // Discrete (stepped) parameter: log of the kernel's mass on [x - step/2, x + step/2] minus
  // its mass on the widened range, both over unique values and unique (mu, sigma) pairs.
  void add_discrete(const ParzenParam& p, const Dist& d, const std::vector<double>& xs,
                    std::vector<double>& wlp) const {
    const std::size_t n = xs.size(), nk = weights_.size();
    auto [xu, xinv] = detail::unique_inverse(xs);
    std::vector<double> mu_u, sigma_u;
    std::vector<std::size_t> ms_inv;
    detail::unique_pairs(d.mu, d.sigma, mu_u, sigma_u, ms_inv);
    const std::size_t nu = mu_u.size();
    std::vector<double> ga(xu.size() * nu), gb(xu.size() * nu);
    for (std::size_t i = 0; i < xu.size(); ++i) {
      const double lo = p.log ? std::log(xu[i] - p.step / 2) : xu[i] - p.step / 2;
      const double hi = p.log ? std::log(xu[i] + p.step / 2) : xu[i] + p.step / 2;
      for (std::size_t k = 0; k < nu; ++k) {
        ga[i * nu + k] = (lo - mu_u[k]) / sigma_u[k];
        gb[i * nu + k] = (hi - mu_u[k]) / sigma_u[k];
      }
    }
    const std::vector<double> mass = detail::log_gauss_mass_unique(ga, gb);
    std::vector<double> na(nu), nb(nu);
    const double lo = p.log ? std::log(p.low - p.step / 2) : p.low - p.step / 2;
    const double hi = p.log ? std::log(p.high + p.step / 2) : p.high + p.step / 2;
    for (std::size_t k = 0; k < nu; ++k) {
      na[k] = (lo - mu_u[k]) / sigma_u[k];
      nb[k] = (hi - mu_u[k]) / sigma_u[k];
    }
    const std::vector<double> norm = detail::truncnorm::log_gauss_mass(na, nb);
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t k = 0; k < nk; ++k) wlp[s * nk + k] += mass[xinv[s] * nu + ms_inv[k]];
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t k = 0; k < nk; ++k) wlp[s * nk + k] -= norm[ms_inv[k]];
  }

  // Continuous parameters together: truncated-normal log densities summed over parameters.
  void add_continuous(const std::vector<std::size_t>& cont, const std::vector<std::vector<double>>& x,
                      std::vector<double>& wlp) const {
    const std::size_t n = x[0].size(), nk = weights_.size(), dc = cont.size();
    std::vector<double> a(nk * dc), b(nk * dc), log_scale(nk * dc);
    for (std::size_t k = 0; k < nk; ++k)
      for (std::size_t t = 0; t < dc; ++t) {
        const Dist& d = dists_[cont[t]];
        a[k * dc + t] = (d.trunc_low - d.mu[k]) / d.sigma[k];
        b[k * dc + t] = (d.trunc_high - d.mu[k]) / d.sigma[k];
        log_scale[k * dc + t] = std::log(d.sigma[k]);
      }
    const std::vector<double> mass = detail::truncnorm::log_gauss_mass(a, b);
    std::vector<double> xt(n * dc);
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t t = 0; t < dc; ++t) {
        const double v = x[cont[t]][s];
        xt[s * dc + t] = space_[cont[t]].log ? std::log(v) : v;
      }
    std::vector<double> terms(dc);
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t k = 0; k < nk; ++k) {
        for (std::size_t t = 0; t < dc; ++t) {
          const Dist& d = dists_[cont[t]];
          const std::size_t kt = k * dc + t;
          const double z = (xt[s * dc + t] - d.mu[k]) / d.sigma[k];
          double v = detail::truncnorm::norm_logpdf(z) - mass[kt] - log_scale[kt];
          if (a[kt] == b[kt])
            v = std::numeric_limits<double>::quiet_NaN();
          else if (z < a[kt] || z > b[kt])
            v = -std::numeric_limits<double>::infinity();
          terms[t] = v;
        }
        wlp[s * nk + k] += detail::pairwise_sum(terms.data(), dc);
      }
  }

  std::vector<ParzenParam> space_;
  std::vector<double> weights_;
  std::vector<Dist> dists_;
};

}  // namespace qnum::search

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
