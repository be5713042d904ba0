// PercentilePruner and MedianPruner (= percentile 50), Optuna's rule
// (optuna/pruners/_percentile.py): after n_startup_trials COMPLETE trials and n_warmup_steps,
// at the first report of each interval, prune when the trial's best intermediate value so
// far is worse than the percentile of the COMPLETE trials' values at the same step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/pruner.hpp"

namespace qnum::search {

namespace detail {

/// numpy.nanpercentile with linear interpolation; nan when no finite-or-inf value remains.
inline double nanpercentile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - double(lo);
  if (frac == 0.0 || v[lo] == v[hi]) return v[lo];
  return v[lo] + (v[hi] - v[lo]) * frac;
}

}  // namespace detail

class PercentilePruner : public Pruner {
 public:
  PercentilePruner(double percentile, std::int64_t n_startup_trials = 5, std::int64_t n_warmup_steps = 0,
                   std::int64_t interval_steps = 1, std::int64_t n_min_trials = 1)
      : percentile_(percentile),
        n_startup_trials_(n_startup_trials),
        n_warmup_steps_(n_warmup_steps),
        interval_steps_(interval_steps),
        n_min_trials_(n_min_trials) {
    qnum::detail::require(percentile >= 0.0 && percentile <= 100.0,
                          "PercentilePruner: percentile must be between 0 and 100 inclusive, got ", percentile);
    qnum::detail::require(n_startup_trials >= 0, "PercentilePruner: n_startup_trials cannot be negative, got ",
                          n_startup_trials);
    qnum::detail::require(n_warmup_steps >= 0, "PercentilePruner: n_warmup_steps cannot be negative, got ",
                          n_warmup_steps);
    qnum::detail::require(interval_steps >= 1, "PercentilePruner: interval_steps must be at least 1, got ",
                          interval_steps);
    qnum::detail::require(n_min_trials >= 1, "PercentilePruner: n_min_trials must be at least 1, got ", n_min_trials);
  }

  bool prune(StudyView& study, const FrozenTrial& trial) override {
    const auto completed = study.get_trials_shared({TrialState::complete});
    const auto n = static_cast<std::int64_t>(completed.size());
    if (n == 0 || n < n_startup_trials_) return false;
    const auto step = trial.last_step();
    if (!step || *step < n_warmup_steps_) return false;
    // First report in its interval: the previous reported step lies before the interval start.
    const std::int64_t interval_start = (*step - n_warmup_steps_) / interval_steps_ * interval_steps_ + n_warmup_steps_;
    std::int64_t second_last = -1;
    for (const auto& [s, v] : trial.intermediate_values)
      if (s > second_last && s != *step) second_last = s;
    if (!(second_last < interval_start)) return false;

    const auto direction = study.direction();
    const bool maximize = direction == StudyDirection::maximize;
    double best = std::numeric_limits<double>::quiet_NaN();
    for (const auto& [s, v] : trial.intermediate_values) {
      if (std::isnan(v)) continue;
      if (std::isnan(best) || (maximize ? v > best : v < best)) best = v;
    }
    if (std::isnan(best)) return true;

    std::vector<double> at_step;
    for (const auto& t : completed)
      if (const auto it = t->intermediate_values.find(*step); it != t->intermediate_values.end())
        at_step.push_back(it->second);
    if (static_cast<std::int64_t>(at_step.size()) < n_min_trials_) return false;
    const double p = detail::nanpercentile(at_step, maximize ? 100.0 - percentile_ : percentile_);
    if (std::isnan(p)) return false;
    return maximize ? best < p : best > p;
  }
  std::string name() const override { return "PercentilePruner"; }

 private:
  double percentile_;
  std::int64_t n_startup_trials_, n_warmup_steps_, interval_steps_, n_min_trials_;
};

/// Prunes a trial whose best intermediate value is worse than the median of the completed
/// trials at the same step (Optuna's MedianPruner; same defaults).
class MedianPruner final : public PercentilePruner {
 public:
  explicit MedianPruner(std::int64_t n_startup_trials = 5, std::int64_t n_warmup_steps = 0,
                        std::int64_t interval_steps = 1, std::int64_t n_min_trials = 1)
      : PercentilePruner(50.0, n_startup_trials, n_warmup_steps, interval_steps, n_min_trials) {}
  std::string name() const override { return "MedianPruner"; }
};

}  // namespace qnum::search
