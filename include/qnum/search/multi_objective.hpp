// Optuna 4.x's multi-objective machinery for its TPE (optuna/study/_multi_objective.py,
// optuna/_hypervolume/, samplers/_tpe/sampler.py): Pareto fronts of unique lexsorted loss
// vectors, non-domination ranks up to the n_below best, exact hypervolumes (2-D by sweeping,
// more dimensions by WFG), the greedy hypervolume subset selection that breaks ties in the
// last rank, and the reference point. Losses are minimized: objectives to maximize are
// negated by the caller. Ties and orders follow numpy's (np.unique sorts rows
// lexicographically, argmax takes the first maximum), so the same losses select the same
// trials as Optuna.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include "qnum/core/error.hpp"

namespace qnum::search::mo {

using Point = std::vector<double>;
using Points = std::vector<Point>;

/// Optuna's EPS of its TPE and hypervolume code.
inline constexpr double kEps = 1e-12;

/// np.unique(points, axis=0, return_index=True, return_inverse=True): the distinct rows in
/// lexicographic order, the first position of each, and each position's row.
struct UniqueRows {
  Points rows;
  std::vector<std::size_t> first;
  std::vector<std::size_t> inverse;
};

inline UniqueRows unique_rows(const Points& p) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] < p[b]; });
  UniqueRows u;
  u.inverse.resize(p.size());
  for (std::size_t i : order) {
    if (u.rows.empty() || p[i] != u.rows.back()) {
      u.rows.push_back(p[i]);
      u.first.push_back(i);
    }
    u.inverse[i] = u.rows.size() - 1;
  }
  return u;
}

/// Which rows of unique, lexsorted losses no other row dominates.
inline std::vector<bool> pareto_front_of_unique_sorted(const Points& rows) {
  const std::size_t n = rows.size();
  std::vector<bool> on(n, false);
  if (n == 0) return on;
  const std::size_t m = rows[0].size();
  if (m == 1) {
    on[0] = true;
    return on;
  }
  if (m == 2) {  // a new minimum of the second loss along the sorted first
    double cummin = rows[0][1];
    on[0] = true;
    for (std::size_t i = 1; i < n; ++i) {
      on[i] = rows[i][1] < cummin;
      cummin = std::min(cummin, rows[i][1]);
    }
    return on;
  }
  // The first remaining row is on the front; keep the rows better than it somewhere.
  std::vector<std::size_t> left(n);
  std::iota(left.begin(), left.end(), std::size_t{0});
  while (!left.empty()) {
    const std::size_t top = left[0];
    on[top] = true;
    std::vector<std::size_t> next;
    for (std::size_t i : left) {
      bool better = false;
      for (std::size_t k = 1; k < m && !better; ++k) better = rows[i][k] < rows[top][k];
      if (better) next.push_back(i);
    }
    left = std::move(next);
  }
  return on;
}

/// _is_pareto_front: a duplicated front point counts once unless the rows are unique already.
inline std::vector<bool> pareto_front(const Points& points, bool assume_unique_lexsorted) {
  if (assume_unique_lexsorted) return pareto_front_of_unique_sorted(points);
  const UniqueRows u = unique_rows(points);
  const std::vector<bool> on = pareto_front_of_unique_sorted(u.rows);
  std::vector<bool> out(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) out[i] = on[u.inverse[i]];
  return out;
}

/// Non-domination ranks (0 = the front), exact for the trials up to the n_below best (0: all); every
/// later one gets one rank past them (_calculate_nondomination_rank).
inline std::vector<int> nondomination_ranks(const Points& loss, std::size_t n_below) {
  const std::size_t n = loss.size();
  if (n == 0) return {};
  if (n_below == 0) n_below = n;
  const UniqueRows u = unique_rows(loss);
  std::vector<int> ranks_of_unique(u.rows.size(), 0);
  if (loss[0].size() == 1) {
    for (std::size_t i = 0; i < u.rows.size(); ++i) ranks_of_unique[i] = static_cast<int>(i);
  } else {
    n_below = std::min(n_below, u.rows.size());
    std::vector<std::size_t> idx(u.rows.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    Points rows = u.rows;
    int rank = 0;
    while (u.rows.size() - idx.size() < n_below) {
      const std::vector<bool> on = pareto_front_of_unique_sorted(rows);
      std::vector<std::size_t> keep_idx;
      Points keep_rows;
      for (std::size_t i = 0; i < idx.size(); ++i) {
        if (on[i]) {
          ranks_of_unique[idx[i]] = rank;
        } else {
          keep_idx.push_back(idx[i]);
          keep_rows.push_back(rows[i]);
        }
      }
      idx = std::move(keep_idx);
      rows = std::move(keep_rows);
      ++rank;
    }
    for (std::size_t i : idx) ranks_of_unique[i] = rank;
  }
  std::vector<int> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = ranks_of_unique[u.inverse[i]];
  return out;
}

/// Optuna's reference point: max(1.1 w, 0.9 w) of the worst loss w per objective, EPS for 0.
inline Point reference_point(const Points& loss) {
  qnum::detail::require(!loss.empty(), "hypervolume: no points for a reference point");
  Point ref(loss[0].size(), -std::numeric_limits<double>::infinity());
  for (const auto& p : loss)
    for (std::size_t k = 0; k < ref.size(); ++k) ref[k] = std::max(ref[k], p[k]);
  for (double& r : ref) {
    r = std::max(1.1 * r, 0.9 * r);
    if (r == 0) r = kEps;
  }
  return ref;
}

namespace detail {

inline double box(const Point& p, const Point& ref) {
  double v = 1.0;
  for (std::size_t k = 0; k < ref.size(); ++k) v *= ref[k] - p[k];
  return v;
}

/// WFG on Pareto points sorted by the first loss (_compute_hv).
inline double wfg(const Points& sorted, const Point& ref) {
  const std::size_t n = sorted.size();
  std::vector<double> inclusive(n);
  for (std::size_t i = 0; i < n; ++i) inclusive[i] = box(sorted[i], ref);
  if (n == 1) return inclusive[0];
  if (n == 2) {
    Point worse(ref.size());
    for (std::size_t k = 0; k < ref.size(); ++k) worse[k] = std::max(sorted[0][k], sorted[1][k]);
    return (inclusive[0] + inclusive[1]) - box(worse, ref);
  }
  double hv = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    Points limited;
    for (std::size_t j = i + 1; j < n; ++j) {
      Point q(ref.size());
      for (std::size_t k = 0; k < ref.size(); ++k) q[k] = std::max(sorted[i][k], sorted[j][k]);
      limited.push_back(std::move(q));
    }
    double exclusive = inclusive[i];
    if (!limited.empty()) {
      const std::vector<bool> on = pareto_front_of_unique_sorted(limited);
      Points front;
      for (std::size_t j = 0; j < limited.size(); ++j)
        if (on[j]) front.push_back(limited[j]);
      exclusive -= wfg(front, ref);
    }
    hv += exclusive;
  }
  return hv;
}

}  // namespace detail

/// The hypervolume `loss` dominates up to `ref` (every point <= ref; +inf when ref is not
/// finite). assume_pareto skips the front filter (the result is the same either way).
inline double hypervolume(const Points& loss, const Point& ref, bool assume_pareto = false) {
  for (const auto& p : loss)
    for (std::size_t k = 0; k < ref.size(); ++k)
      qnum::detail::require(p[k] <= ref[k], "hypervolume: every point must be <= the reference point");
  for (double r : ref)
    if (!std::isfinite(r)) return std::numeric_limits<double>::infinity();
  Points sorted;
  if (!assume_pareto) {
    const UniqueRows u = unique_rows(loss);
    const std::vector<bool> on = pareto_front_of_unique_sorted(u.rows);
    for (std::size_t i = 0; i < u.rows.size(); ++i)
      if (on[i]) sorted.push_back(u.rows[i]);
  } else {
    sorted = loss;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Point& a, const Point& b) { return a[0] < b[0]; });
  }
  if (sorted.empty()) return 0.0;
  double hv = 0.0;
  if (ref.size() == 2) {  // sweep: each point's strip below the previous point's second loss
    double prev_y = ref[1];
    for (const auto& p : sorted) {
      hv += (ref[0] - p[0]) * (prev_y - p[1]);
      prev_y = p[1];
    }
  } else {
    hv = detail::wfg(sorted, ref);
  }
  return std::isfinite(hv) ? hv : std::numeric_limits<double>::infinity();
}

namespace detail {

/// Greedy HSSP over unique lexsorted losses (_solve_hssp_on_unique_loss_vals); returns
/// entries of `indices`.
inline std::vector<std::size_t> hssp_unique(Points loss, std::vector<std::size_t> indices, std::size_t k,
                                            const Point& ref) {
  for (double r : ref)
    if (!std::isfinite(r)) return {indices.begin(), indices.begin() + static_cast<std::ptrdiff_t>(k)};
  if (indices.size() == k) return indices;
  std::vector<std::size_t> selected;
  if (ref.size() == 2) {  // exact 2-D update of each point's exclusive rectangle
    std::vector<std::size_t> pos(loss.size());
    std::iota(pos.begin(), pos.end(), std::size_t{0});
    Points diag(loss.size(), ref);
    for (std::size_t i = 0; i < k; ++i) {
      std::size_t best = 0;
      double best_c = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < loss.size(); ++j) {
        const double c = (diag[j][0] - loss[j][0]) * (diag[j][1] - loss[j][1]);
        if (c > best_c || j == 0) best = j, best_c = c;
      }
      selected.push_back(indices[pos[best]]);
      const Point chosen = loss[best];
      pos.erase(pos.begin() + static_cast<std::ptrdiff_t>(best));
      diag.erase(diag.begin() + static_cast<std::ptrdiff_t>(best));
      loss.erase(loss.begin() + static_cast<std::ptrdiff_t>(best));
      for (std::size_t j = 0; j < best; ++j) diag[j][0] = std::min(chosen[0], diag[j][0]);
      for (std::size_t j = best; j < diag.size(); ++j) diag[j][1] = std::min(chosen[1], diag[j][1]);
    }
    return selected;
  }
  // More objectives: the point adding the most hypervolume to those selected, k times.
  std::vector<std::size_t> pos(loss.size());
  std::iota(pos.begin(), pos.end(), std::size_t{0});
  Points chosen;
  std::vector<double> contrib(loss.size());
  for (std::size_t j = 0; j < loss.size(); ++j) contrib[j] = box(loss[j], ref);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t best =
        static_cast<std::size_t>(std::max_element(contrib.begin(), contrib.end()) - contrib.begin());
    selected.push_back(indices[pos[best]]);
    chosen.push_back(loss[best]);
    pos.erase(pos.begin() + static_cast<std::ptrdiff_t>(best));
    loss.erase(loss.begin() + static_cast<std::ptrdiff_t>(best));
    contrib.erase(contrib.begin() + static_cast<std::ptrdiff_t>(best));
    if (i + 1 == k) break;
    const double base = hypervolume(chosen, ref, true);
    for (std::size_t j = 0; j < loss.size(); ++j) {
      Points with = chosen;
      with.push_back(loss[j]);
      const double plus = hypervolume(with, ref, true);
      contrib[j] = std::isinf(plus) ? std::numeric_limits<double>::infinity() : plus - base;
    }
  }
  return selected;
}

}  // namespace detail

/// Optuna's _solve_hssp: `k` of `indices` (one per row of `loss`) whose losses cover the
/// most hypervolume up to `ref`, greedily; duplicates only once the distinct rows run out.
inline std::vector<std::size_t> solve_hssp(const Points& loss, const std::vector<std::size_t>& indices, std::size_t k,
                                           const Point& ref) {
  if (k == indices.size()) return indices;
  const UniqueRows u = unique_rows(loss);
  if (u.rows.size() < k) {
    std::vector<bool> chosen(indices.size(), false);
    for (std::size_t f : u.first) chosen[f] = true;
    std::size_t extra = k - u.rows.size();
    for (std::size_t i = 0; i < indices.size() && extra > 0; ++i)
      if (!chosen[i]) chosen[i] = true, --extra;
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < indices.size(); ++i)
      if (chosen[i]) out.push_back(indices[i]);
    return out;
  }
  std::vector<std::size_t> out;
  for (std::size_t f : detail::hssp_unique(u.rows, u.first, k, ref)) out.push_back(indices[f]);
  return out;
}

/// Optuna's _split_complete_trials_multi_objective: which of the `loss` rows (minimized)
/// form the n_below "below" group — whole non-domination ranks, the last one cut by HSSP.
inline std::vector<bool> split_below(const Points& loss, std::size_t n_below) {
  const std::size_t n = loss.size();
  n_below = std::min(n_below, n);
  std::vector<bool> below(n, n_below == n);
  if (n_below == 0 || n_below == n) return below;
  const std::vector<int> ranks = nondomination_ranks(loss, n_below);
  const int max_rank = *std::max_element(ranks.begin(), ranks.end());
  std::vector<std::size_t> count(static_cast<std::size_t>(max_rank) + 1, 0);
  for (int r : ranks) ++count[static_cast<std::size_t>(r)];
  int last = -1;  // the last rank whose cumulative count fits in n_below
  std::size_t cum = 0;
  for (std::size_t r = 0; r < count.size(); ++r) {
    if (count[r] == 0) continue;
    cum += count[r];
    if (cum <= n_below) last = static_cast<int>(r);
  }
  std::size_t taken = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (ranks[i] <= last) below[i] = true, ++taken;
  if (taken < n_below) {
    Points tie;
    std::vector<std::size_t> tie_at;
    for (std::size_t i = 0; i < n; ++i)
      if (ranks[i] == last + 1) tie.push_back(loss[i]), tie_at.push_back(i);
    for (std::size_t i : solve_hssp(tie, tie_at, n_below - taken, reference_point(tie))) below[i] = true;
  }
  return below;
}

/// Optuna's _calculate_weights_below_for_multi_objective (no constraints): each below trial's
/// share of the hypervolume its group covers, relative to the largest, at least EPS; all 1
/// for one trial or an infinite hypervolume.
inline std::vector<double> weights_below(const Points& loss) {
  std::vector<double> w(loss.size(), 1.0);
  if (loss.size() <= 1) return w;
  const Point ref = reference_point(loss);
  const std::vector<bool> on = pareto_front(loss, false);
  Points front;
  for (std::size_t i = 0; i < loss.size(); ++i)
    if (on[i]) front.push_back(loss[i]);
  const double hv = hypervolume(front, ref, true);
  if (std::isinf(hv)) return w;
  std::vector<double> contrib(loss.size(), 0.0);
  for (std::size_t i = 0, f = 0; i < loss.size(); ++i) {
    if (!on[i]) continue;
    Points others;
    for (std::size_t j = 0; j < front.size(); ++j)
      if (j != f) others.push_back(front[j]);
    contrib[i] = hv - hypervolume(others, ref);
    ++f;
  }
  const double top = std::max(*std::max_element(contrib.begin(), contrib.end()), kEps);
  for (std::size_t i = 0; i < loss.size(); ++i) w[i] = std::max(contrib[i] / top, kEps);
  return w;
}

}  // namespace qnum::search::mo
