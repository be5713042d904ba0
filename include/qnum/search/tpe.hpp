// TPESampler: Optuna 4.x's Tree-structured Parzen Estimator (optuna/samplers/_tpe/sampler.py)
// with its defaults — 10 random start-up trials, 24 EI candidates, gamma(n) = min(ceil(0.1 n),
// 25), default weights, prior weight 1, magic clip, univariate — and the multivariate and
// constant-liar options. For the same history and the same uniform draws it picks what Optuna
// picks; seeded, its draws are numpy's RandomState(seed) stream, so a seeded qnum study repeats
// a seeded Optuna study (tests/search/test_tpe_fixtures.cpp). Several objectives are Optuna's
// multi-objective TPE: "below" is whole non-domination ranks, the last cut by hypervolume
// subset selection, each below trial weighted by its hypervolume contribution
// (qnum/search/multi_objective.hpp; tests/search/test_motpe.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/json.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/multi_objective.hpp"
#include "qnum/search/sampler.hpp"
#include "qnum/search/tpe_parzen.hpp"
#include "qnum/search/tpe_random.hpp"

namespace qnum::search {

/// Optuna's default_gamma: min(ceil(0.1 n), 25).
inline std::int64_t tpe_default_gamma(std::int64_t n) {
  return std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(0.1 * static_cast<double>(n))), 25);
}

/// TPESampler settings; the defaults are Optuna 4.x's.
struct TPEOptions {
  std::int64_t n_startup_trials = 10;
  std::int64_t n_ei_candidates = 24;
  std::function<std::int64_t(std::int64_t)> gamma = tpe_default_gamma;  // number of "below" trials
  TpeWeightsFn weights = tpe_default_weights;
  double prior_weight = 1.0;
  bool consider_magic_clip = true;
  bool consider_endpoints = false;
  bool multivariate = false;   // sample the intersection search space jointly
  bool constant_liar = false;  // running trials join the "above" group

  void validate() const {
    qnum::detail::require(n_startup_trials >= 0, "TPESampler: n_startup_trials must be >= 0, got ", n_startup_trials);
    qnum::detail::require(n_ei_candidates >= 1, "TPESampler: n_ei_candidates must be >= 1, got ", n_ei_candidates);
    qnum::detail::require(std::isfinite(prior_weight) && prior_weight >= 0,
                          "TPESampler: prior_weight must be finite and >= 0, got ", prior_weight);
    qnum::detail::require(static_cast<bool>(gamma), "TPESampler: gamma function is empty");
    qnum::detail::require(static_cast<bool>(weights), "TPESampler: weights function is empty");
  }
};

/// One TPE decision: the picked internal values and, for inspection, the candidates drawn
/// from l(x) (one column per parameter) with their scores log l(x) - log g(x).
struct TpeDecision {
  std::map<std::string, double> picked;
  std::vector<std::vector<double>> candidates;
  std::vector<double> scores;
};

namespace detail {

/// The Parzen description of a distribution (bounds as declared; categorical by count).
inline ParzenParam parzen_param(const Distribution& d) {
  ParzenParam p;
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    p.low = f->low, p.high = f->high, p.log = f->log, p.step = f->step.value_or(0.0);
  } else if (const auto* i = std::get_if<IntDistribution>(&d)) {
    p.low = double(i->low), p.high = double(i->high), p.log = i->log, p.step = double(i->step);
  } else {
    p.categorical = true;
    p.n_choices = std::get<CategoricalDistribution>(d).choices.size();
  }
  return p;
}

/// Optuna's RandomSampler draw for one distribution (numpy uniform over
/// _SearchSpaceTransform's bounds, then untransform), consuming doubles from `rng`.
inline double optuna_random_internal(UniformSource& rng, const Distribution& d) {
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {  // one-hot bounds, argmax
    std::size_t best = 0;
    double best_u = -1;
    for (std::size_t k = 0; k < c->choices.size(); ++k) {
      const double u = rng.next_double();
      if (u > best_u) best_u = u, best = k;
    }
    return static_cast<double>(best);
  }
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    const bool is_single = single(d);
    if (f->log) {
      const double lo = std::log(f->low), hi = std::log(f->high);
      const double x = std::exp(lo + (hi - lo) * rng.next_double());
      return is_single ? x : std::min(x, std::nextafter(f->high, f->high - 1));
    }
    if (f->step) {
      const double lo = f->low - 0.5 * *f->step, hi = f->high + 0.5 * *f->step;
      const double t = lo + (hi - lo) * rng.next_double();
      return std::clamp(std::nearbyint((t - f->low) / *f->step) * *f->step + f->low, f->low, f->high);
    }
    const double t = f->low + (f->high - f->low) * rng.next_double();
    return is_single ? t : std::min(t, std::nextafter(f->high, f->high - 1));
  }
  const auto& i = std::get<IntDistribution>(d);
  const double low = double(i.low), high = double(i.high), half = 0.5 * double(i.step);
  if (i.log) {
    const double lo = std::log(low - half), hi = std::log(high + half);
    return std::clamp(std::nearbyint(std::exp(lo + (hi - lo) * rng.next_double())), low, high);
  }
  const double lo = low - half, hi = high + half;
  const double t = lo + (hi - lo) * rng.next_double();
  return std::clamp(std::nearbyint((t - low) / double(i.step)) * double(i.step) + low, low, high);
}

// Optuna's _get_pruned_trial_score: the last step first (later is better), then its value.
inline std::pair<double, double> pruned_score(const FrozenTrial& t, StudyDirection dir) {
  if (t.intermediate_values.empty()) return {1.0, 0.0};
  const auto& [step, v] = *t.intermediate_values.rbegin();
  if (std::isnan(v)) return {-double(step), std::numeric_limits<double>::infinity()};
  return {-double(step), dir == StudyDirection::minimize ? v : -v};
}

/// The values of trials[at[k]] as losses: objectives to maximize negated.
inline mo::Points signed_losses(const std::vector<const FrozenTrial*>& trials, const std::vector<std::size_t>& at,
                                const std::vector<StudyDirection>& directions) {
  mo::Points loss;
  loss.reserve(at.size());
  for (std::size_t i : at) {
    const auto& v = trials[i]->values;
    qnum::detail::require(v.size() == directions.size(), "TPE: trial ", trials[i]->number, " has ", v.size(),
                          " values for ", directions.size(), " objectives");
    mo::Point p(v.size());
    for (std::size_t k = 0; k < v.size(); ++k) p[k] = directions[k] == StudyDirection::maximize ? -v[k] : v[k];
    loss.push_back(std::move(p));
  }
  return loss;
}

/// The Parzen weights of the below trials at `below` (by number) that hold every parameter
/// (`has_all`): Optuna's hypervolume-contribution weights over all of them, then masked.
inline std::vector<double> mo_weights_below(const std::vector<const FrozenTrial*>& trials,
                                            const std::vector<std::size_t>& below,
                                            const std::vector<StudyDirection>& directions,
                                            const std::function<bool(std::size_t)>& has_all) {
  const std::vector<double> w = mo::weights_below(signed_losses(trials, below, directions));
  std::vector<double> out;
  for (std::size_t k = 0; k < below.size(); ++k)
    if (has_all(below[k])) out.push_back(w[k]);
  return out;
}

/// Optuna's _split_trials for one objective, as positions in `trials`: the n_below best
/// COMPLETE trials (by value in the direction), then the best PRUNED ones (latest step, then
/// intermediate value) fill "below"; everything else, RUNNING trials included, is "above".
/// Both by trial number. Optuna stable-sorts each state's trials and takes a prefix; only
/// which trials are below matters (both groups end by number), so the n_below first under
/// (key, position) — the stable sort's prefix — are selected, in linear time.
/// Several directions: the COMPLETE trials split as Optuna's multi-objective TPE does
/// (mo::split_below); PRUNED trials cannot occur (Optuna cannot prune such studies).
inline std::pair<std::vector<std::size_t>, std::vector<std::size_t>> tpe_split_positions(
    const std::vector<const FrozenTrial*>& trials, std::int64_t n_below, const std::vector<StudyDirection>& directions) {
  const StudyDirection direction = directions.front();
  std::vector<std::size_t> complete, pruned;
  std::vector<double> key(trials.size());  // COMPLETE: the value
  std::vector<std::pair<double, double>> pruned_key(trials.size());
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const FrozenTrial& t = *trials[i];
    if (t.state == TrialState::complete) {
      complete.push_back(i);
      if (directions.size() == 1) key[i] = t.value();
    } else if (t.state == TrialState::pruned) {
      pruned.push_back(i);
      pruned_key[i] = pruned_score(t, direction);
    } else if (t.state != TrialState::running) {
      qnum::detail::fail("TPE: trial ", t.number, " in state ", to_string(t.state), " cannot be split");
    }
  }
  std::vector<unsigned char> is_below(trials.size(), 0);
  auto take = [&](std::vector<std::size_t>& v, std::int64_t& n, auto before) {
    const auto k = static_cast<std::size_t>(std::clamp<std::int64_t>(n, 0, static_cast<std::int64_t>(v.size())));
    auto stable_before = [&](std::size_t a, std::size_t b) { return before(a, b) || (!before(b, a) && a < b); };
    if (k > 0 && k < v.size())  // v[0, k): the k first under stable_before, in some order
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k - 1), v.end(), stable_before);
    for (std::size_t i = 0; i < k; ++i) is_below[v[i]] = 1;
    n = std::max<std::int64_t>(0, n - static_cast<std::int64_t>(k));
  };
  const bool maximize = direction == StudyDirection::maximize;
  if (directions.size() > 1) {
    qnum::detail::require(pruned.empty(), "TPE: a multi-objective study cannot hold PRUNED trials");
    const std::vector<bool> below = mo::split_below(
        signed_losses(trials, complete, directions), static_cast<std::size_t>(std::max<std::int64_t>(0, n_below)));
    for (std::size_t k = 0; k < complete.size(); ++k) is_below[complete[k]] = below[k] ? 1 : 0;
  } else {
    take(complete, n_below, [&](std::size_t a, std::size_t b) { return maximize ? key[a] > key[b] : key[a] < key[b]; });
    take(pruned, n_below, [&](std::size_t a, std::size_t b) { return pruned_key[a] < pruned_key[b]; });
  }
  std::vector<std::size_t> order(trials.size());  // positions by trial number
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto by_number = [&](std::size_t a, std::size_t b) { return trials[a]->number < trials[b]->number; };
  if (!std::is_sorted(order.begin(), order.end(), by_number)) std::stable_sort(order.begin(), order.end(), by_number);
  std::pair<std::vector<std::size_t>, std::vector<std::size_t>> out;
  for (std::size_t i : order) (is_below[i] ? out.first : out.second).push_back(i);
  return out;
}

/// One TPE decision from the observations below and above (columns of internal values, one
/// per parameter of `space`): Optuna's estimators, candidates from l(x), the first best score.
inline TpeDecision tpe_decide(const std::vector<std::vector<double>>& obs_below,
                              const std::vector<std::vector<double>>& obs_above,
                              const std::vector<std::pair<std::string, Distribution>>& space, const TPEOptions& options,
                              UniformSource& rng, const std::vector<double>* weights_below = nullptr) {
  std::vector<ParzenParam> pspace;
  pspace.reserve(space.size());
  for (const auto& [name, d] : space) pspace.push_back(parzen_param(d));
  ParzenOptions popt;
  popt.prior_weight = options.prior_weight;
  popt.consider_magic_clip = options.consider_magic_clip;
  popt.consider_endpoints = options.consider_endpoints;
  popt.multivariate = options.multivariate;
  popt.weights = options.weights;
  const ParzenEstimator mpe_below(pspace, obs_below, popt, weights_below);
  const ParzenEstimator mpe_above(std::move(pspace), obs_above, popt);

  TpeDecision out;
  out.candidates = mpe_below.sample(rng, static_cast<std::size_t>(options.n_ei_candidates));
  const std::vector<double> lb = mpe_below.log_pdf(out.candidates), la = mpe_above.log_pdf(out.candidates);
  out.scores.resize(lb.size());
  for (std::size_t i = 0; i < lb.size(); ++i) out.scores[i] = lb[i] - la[i];
  std::size_t best = 0;  // numpy.argmax: the first maximum, or the first NaN
  for (std::size_t i = 0; i < out.scores.size(); ++i) {
    if (std::isnan(out.scores[i])) {
      best = i;
      break;
    }
    if (out.scores[i] > out.scores[best]) best = i;
  }
  for (std::size_t j = 0; j < space.size(); ++j) out.picked[space[j].first] = out.candidates[j][best];
  return out;
}

}  // namespace detail

/// Optuna's _split_trials (see detail::tpe_split_positions), as trials.
inline std::pair<std::vector<const FrozenTrial*>, std::vector<const FrozenTrial*>> tpe_split_trials(
    const std::vector<const FrozenTrial*>& trials, std::int64_t n_below, const std::vector<StudyDirection>& directions) {
  const auto [below_at, above_at] = detail::tpe_split_positions(trials, n_below, directions);
  std::pair<std::vector<const FrozenTrial*>, std::vector<const FrozenTrial*>> out;
  for (std::size_t i : below_at) out.first.push_back(trials[i]);
  for (std::size_t i : above_at) out.second.push_back(trials[i]);
  return out;
}
inline std::pair<std::vector<const FrozenTrial*>, std::vector<const FrozenTrial*>> tpe_split_trials(
    const std::vector<const FrozenTrial*>& trials, std::int64_t n_below, StudyDirection direction) {
  return tpe_split_trials(trials, n_below, std::vector<StudyDirection>{direction});
}

/// The parameters a trial contributes to the estimators: its own (internal) values, plus for
/// a running trial under multivariate constant liar the relative sample it published.
using TpeParamsOf = std::function<std::map<std::string, double>(const FrozenTrial&)>;

/// One TPE decision over `space` (ordered as given) from `trials` (COMPLETE, PRUNED and, for
/// the constant liar, RUNNING trials other than the current one) of a study in `directions`,
/// drawing from `rng`.
inline TpeDecision tpe_sample(const std::vector<const FrozenTrial*>& trials,
                              const std::vector<std::pair<std::string, Distribution>>& space,
                              const std::vector<StudyDirection>& directions, const TPEOptions& options,
                              UniformSource& rng, const TpeParamsOf& params_of = {}) {
  options.validate();
  qnum::detail::require(!space.empty(), "TPE: empty search space");
  std::int64_t n = 0;
  for (const FrozenTrial* t : trials) n += t->state != TrialState::running;
  const std::int64_t n_below = options.gamma(n);
  qnum::detail::require(n_below >= 0, "TPESampler: gamma(", n, ") returned ", n_below, "; it must be >= 0");
  const auto [below_at, above_at] = detail::tpe_split_positions(trials, n_below, directions);

  // Optuna's _get_internal_repr: the trials that have every parameter of the space.
  auto found_all = [&](const FrozenTrial& t, std::vector<double>* values) {
    const std::map<std::string, double> extra = params_of ? params_of(t) : std::map<std::string, double>{};
    for (const auto& [name, d] : space) {
      double v;
      if (const auto it = t.params.find(name); it != t.params.end())
        v = it->second;
      else if (const auto it2 = extra.find(name); it2 != extra.end())
        v = it2->second;
      else
        return false;
      if (values) values->push_back(v);
    }
    return true;
  };
  auto observations = [&](const std::vector<std::size_t>& group) {
    std::vector<std::vector<double>> cols(space.size());
    std::vector<double> row;
    for (std::size_t i : group) {
      row.clear();
      if (!found_all(*trials[i], &row)) continue;
      for (std::size_t j = 0; j < space.size(); ++j) cols[j].push_back(row[j]);
    }
    return cols;
  };
  std::vector<double> weights;
  if (directions.size() > 1)
    weights = detail::mo_weights_below(trials, below_at, directions,
                                       [&](std::size_t i) { return found_all(*trials[i], nullptr); });
  return detail::tpe_decide(observations(below_at), observations(above_at), space, options, rng,
                            directions.size() > 1 ? &weights : nullptr);
}
inline TpeDecision tpe_sample(const std::vector<const FrozenTrial*>& trials,
                              const std::vector<std::pair<std::string, Distribution>>& space, StudyDirection direction,
                              const TPEOptions& options, UniformSource& rng, const TpeParamsOf& params_of = {}) {
  return tpe_sample(trials, space, std::vector<StudyDirection>{direction}, options, rng, params_of);
}

/// Optuna's TPESampler over a study (see the file comment). Seeds must fit numpy's legacy
/// RandomState, [0, 2^32); the random start-up draws come from a second stream with the same
/// seed, as Optuna's internal RandomSampler.
class TPESampler final : public Sampler {
 public:
  explicit TPESampler(std::uint64_t seed = 0, TPEOptions options = {})
      : options_(std::move(options)), tpe_rng_(make_source(seed)), startup_rng_(make_source(seed)) {
    options_.validate();
  }
  /// With injected uniform streams (tests feed numpy's recorded draws).
  TPESampler(TPEOptions options, std::shared_ptr<UniformSource> tpe_rng, std::shared_ptr<UniformSource> startup_rng)
      : options_(std::move(options)), tpe_rng_(std::move(tpe_rng)), startup_rng_(std::move(startup_rng)) {
    options_.validate();
    qnum::detail::require(tpe_rng_ && startup_rng_, "TPESampler: null uniform source");
  }

  const TPEOptions& options() const { return options_; }
  std::string name() const override { return "TPESampler"; }

  SearchSpace infer_relative_search_space(StudyView& study, const FrozenTrial& trial) override {
    if (!options_.multivariate) return {};
    // Optuna's IntersectionSearchSpace over COMPLETE and PRUNED trials, folded in as they
    // finish (as Optuna's, which keeps its result and reads only the newer trials).
    const auto& rows = finished(study, trial);
    if (intersection_rows_ > rows.size()) intersection_rows_ = 0, intersection_.reset();
    for (; intersection_rows_ < rows.size(); ++intersection_rows_) {
      const FrozenTrial& t = *rows[intersection_rows_];
      if (!intersection_) {
        intersection_.emplace(t.distributions.begin(), t.distributions.end());
        continue;
      }
      for (auto it = intersection_->begin(); it != intersection_->end();) {
        const auto d = t.distributions.find(it->first);
        if (d == t.distributions.end() || !(d->second == it->second))
          it = intersection_->erase(it);
        else
          ++it;
      }
    }
    SearchSpace out;
    if (intersection_)
      for (const auto& [name, d] : *intersection_)
        if (!single(d)) out.emplace(name, d);
    return out;
  }

  std::map<std::string, double> sample_relative(StudyView& study, const FrozenTrial& trial,
                                                const SearchSpace& search_space) override {
    if (search_space.empty()) return {};
    if (n_finished(study, trial) < options_.n_startup_trials) return {};
    const std::vector<std::pair<std::string, Distribution>> space(search_space.begin(), search_space.end());
    std::map<std::string, double> params = sample(study, trial, space).picked;
    if (options_.constant_liar && !params.empty()) publish_relative(study, trial, search_space, params);
    return params;
  }

  double sample_independent(StudyView& study, const FrozenTrial& trial, const std::string& name,
                            const Distribution& distribution) override {
    if (n_finished(study, trial) < options_.n_startup_trials)
      return detail::optuna_random_internal(*startup_rng_, distribution);
    return sample(study, trial, {{name, distribution}}).picked.at(name);
  }

  void reseed_rng(std::uint64_t seed) override {
    tpe_rng_ = make_source(static_cast<std::uint32_t>(seed ^ (seed >> 32)));
    startup_rng_ = make_source(static_cast<std::uint32_t>(seed ^ (seed >> 32)));
  }

  /// The key prefix of the relative sample a running trial publishes (Optuna's).
  static constexpr const char* kRelativeParamsKey = "tpe:relative_params";

 private:
  static std::shared_ptr<UniformSource> make_source(std::uint64_t seed) {
    qnum::detail::require(seed <= 0xffffffffull, "TPESampler: seed ", seed,
                          " out of range; numpy's RandomState takes seeds in [0, 2^32)");
    return std::make_shared<NumpyRandomState>(static_cast<std::uint32_t>(seed));
  }

  // COMPLETE and PRUNED trials, read once per trial (Optuna reads them through its trial
  // cache too) and shared with the storage, not copied. Finished trials never change, so the
  // parameter columns of the trials read for the previous trial are kept: only the rows after
  // the longest common prefix (usually the one new trial) are read again.
  const std::vector<std::shared_ptr<const FrozenTrial>>& finished(StudyView& study, const FrozenTrial& trial) {
    if (cache_study_ != study.study_id() || cache_number_ != trial.number || cache_trial_id_ != trial.trial_id) {
      auto fresh = study.get_trials_shared({TrialState::complete, TrialState::pruned});
      std::size_t keep = 0;
      if (cache_study_ == study.study_id())
        while (keep < fresh.size() && keep < cache_.size() && fresh[keep] == cache_[keep]) ++keep;
      else
        columns_.clear(), intersection_rows_ = 0, intersection_.reset();
      cache_ = std::move(fresh);
      for (auto& [name, column] : columns_) fill_column(name, column, keep);
      if (intersection_rows_ > keep) intersection_rows_ = 0, intersection_.reset();  // refold
      split_n_below_ = -1;
      cache_study_ = study.study_id();
      cache_number_ = trial.number;
      cache_trial_id_ = trial.trial_id;
    }
    return cache_;
  }
  std::int64_t n_finished(StudyView& study, const FrozenTrial& trial) {
    return static_cast<std::int64_t>(finished(study, trial).size());
  }

  // One parameter's internal values over the finished trials (`has` 0 where a trial lacks it).
  struct Column {
    std::vector<double> value;
    std::vector<unsigned char> has;
  };
  void fill_column(const std::string& name, Column& column, std::size_t keep) const {
    column.value.resize(keep);
    column.has.resize(keep);
    for (std::size_t i = keep; i < cache_.size(); ++i) {
      const auto it = cache_[i]->params.find(name);
      const bool has = it != cache_[i]->params.end();
      column.value.push_back(has ? it->second : 0.0);
      column.has.push_back(has ? 1 : 0);
    }
  }
  const Column& column(const std::string& name) {
    auto it = columns_.find(name);
    if (it == columns_.end()) {
      it = columns_.emplace(name, Column{}).first;
      fill_column(name, it->second, 0);
    }
    return it->second;
  }

  TpeDecision sample(StudyView& study, const FrozenTrial& trial,
                     const std::vector<std::pair<std::string, Distribution>>& space) {
    if (!options_.constant_liar) return sample_finished(study, trial, space);
    std::vector<const FrozenTrial*> trials;
    for (const auto& t : finished(study, trial)) trials.push_back(t.get());
    // the constant liar's running trials: read fresh
    const std::vector<std::shared_ptr<const FrozenTrial>> running = study.get_trials_shared({TrialState::running});
    for (const auto& t : running)
      if (t->number != trial.number) trials.push_back(t.get());
    TpeParamsOf params_of;
    if (options_.multivariate) params_of = [&space](const FrozenTrial& t) { return published_relative(t, space); };
    return tpe_sample(trials, space, study.directions(), options_, *tpe_rng_, params_of);
  }

  // tpe_sample over the finished trials alone, from the columns, with the below/above split
  // made once per trial (the same for each of its parameters, as Optuna's cached trials give).
  TpeDecision sample_finished(StudyView& study, const FrozenTrial& trial,
                              const std::vector<std::pair<std::string, Distribution>>& space) {
    qnum::detail::require(!space.empty(), "TPE: empty search space");
    const auto& rows = finished(study, trial);
    const auto n = static_cast<std::int64_t>(rows.size());
    const std::int64_t n_below = options_.gamma(n);
    qnum::detail::require(n_below >= 0, "TPESampler: gamma(", n, ") returned ", n_below, "; it must be >= 0");
    if (split_n_below_ != n_below) {
      std::vector<const FrozenTrial*> trials(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) trials[i] = rows[i].get();
      std::tie(below_, above_) = detail::tpe_split_positions(trials, n_below, study.directions());
      split_n_below_ = n_below;
    }
    std::vector<const Column*> cols;
    cols.reserve(space.size());
    for (const auto& [name, d] : space) cols.push_back(&column(name));
    auto observations = [&](const std::vector<std::size_t>& group) {  // trials with every parameter
      std::vector<std::vector<double>> out(space.size());
      for (auto& o : out) o.reserve(group.size());
      for (std::size_t i : group) {
        bool all = true;
        for (const Column* c : cols) all = all && c->has[i] != 0;
        if (!all) continue;
        for (std::size_t j = 0; j < cols.size(); ++j) out[j].push_back(cols[j]->value[i]);
      }
      return out;
    };
    if (!study.is_multi_objective())
      return detail::tpe_decide(observations(below_), observations(above_), space, options_, *tpe_rng_);
    std::vector<const FrozenTrial*> trials(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) trials[i] = rows[i].get();
    const std::vector<double> weights = detail::mo_weights_below(trials, below_, study.directions(), [&](std::size_t i) {
      return std::all_of(cols.begin(), cols.end(), [i](const Column* c) { return c->has[i] != 0; });
    });
    return detail::tpe_decide(observations(below_), observations(above_), space, options_, *tpe_rng_, &weights);
  }

  // Optuna shares a running trial's relative sample through system attributes, as JSON of
  // the external values cut into 2045-character chunks "tpe:relative_params:<i>".
  static void publish_relative(StudyView& study, const FrozenTrial& trial, const SearchSpace& space,
                               const std::map<std::string, double>& params) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, v] : params) j[name] = to_json(to_external(space.at(name), v));
    const std::string text = j.dump();
    constexpr std::size_t chunk = 2045;
    for (std::size_t i = 0; i < text.size(); i += chunk)
      study.storage().set_trial_system_attr(
          trial.trial_id, std::string(kRelativeParamsKey) + ":" + std::to_string(i / chunk), text.substr(i, chunk));
  }

  static std::map<std::string, double> published_relative(
      const FrozenTrial& t, const std::vector<std::pair<std::string, Distribution>>& space) {
    if (is_finished(t.state) || !t.system_attrs.is_object()) return {};
    std::string text;
    for (int i = 0;; ++i) {
      const auto it = t.system_attrs.find(std::string(kRelativeParamsKey) + ":" + std::to_string(i));
      if (it == t.system_attrs.end() || !it->is_string() || it->get<std::string>().empty()) break;
      text += it->get<std::string>();
    }
    if (text.empty()) return {};
    const nlohmann::json j = io::parse_json(text, "search: a trial's relative parameters", /*allow_exceptions=*/false);
    if (!j.is_object()) return {};  // a partly written record, as Optuna: fall back to params
    std::map<std::string, double> out;
    for (const auto& [name, d] : space)
      if (const auto it = j.find(name); it != j.end()) {
        try {
          out[name] = to_internal(d, param_value_from_json(*it));
        } catch (const qnum::Error&) {  // a value of another distribution: not this space's
        }
      }
    return out;
  }

  TPEOptions options_;
  std::shared_ptr<UniformSource> tpe_rng_, startup_rng_;
  std::vector<std::shared_ptr<const FrozenTrial>> cache_;
  std::int64_t cache_study_ = -1, cache_number_ = -1, cache_trial_id_ = -1;
  std::map<std::string, Column, std::less<>> columns_;  // of cache_'s trials, by parameter
  std::vector<std::size_t> below_, above_;              // cache_'s split for split_n_below_
  std::int64_t split_n_below_ = -1;
  std::optional<SearchSpace> intersection_;  // of cache_'s first intersection_rows_ trials
  std::size_t intersection_rows_ = 0;
};

}  // namespace qnum::search
