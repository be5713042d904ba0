// TPESampler: Optuna 4.x's Tree-structured Parzen Estimator (optuna/samplers/_tpe/sampler.py)
// with its defaults — 10 random start-up trials, 24 EI candidates, gamma(n) = min(ceil(0.1 n),
// 25), default weights, prior weight 1, magic clip, univariate — and the multivariate and
// constant-liar options. For the same history and the same uniform draws it picks what Optuna
// picks; seeded, its draws are numpy's RandomState(seed) stream, so a seeded qnum study repeats
// a seeded Optuna study (tests/search/test_tpe_fixtures.cpp). Single-objective only.
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
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"
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

}  // namespace detail

/// Optuna's _split_trials for one objective: the n_below best COMPLETE trials (by value in
/// the direction), then the best PRUNED ones (latest step, then intermediate value) fill
/// "below"; everything else, RUNNING trials included, is "above". Both by trial number.
inline std::pair<std::vector<const FrozenTrial*>, std::vector<const FrozenTrial*>> tpe_split_trials(
    const std::vector<const FrozenTrial*>& trials, std::int64_t n_below, StudyDirection direction) {
  std::vector<const FrozenTrial*> complete, pruned, running, below, above;
  for (const FrozenTrial* t : trials) {
    if (t->state == TrialState::running)
      running.push_back(t);
    else if (t->state == TrialState::complete)
      complete.push_back(t);
    else if (t->state == TrialState::pruned)
      pruned.push_back(t);
    else
      qnum::detail::fail("TPE: trial ", t->number, " in state ", to_string(t->state), " cannot be split");
  }
  std::stable_sort(complete.begin(), complete.end(), [&](const FrozenTrial* a, const FrozenTrial* b) {
    return direction == StudyDirection::maximize ? a->value() > b->value() : a->value() < b->value();
  });
  auto take = [&](std::vector<const FrozenTrial*>& v, std::int64_t& n) {
    const auto k = static_cast<std::size_t>(std::clamp<std::int64_t>(n, 0, static_cast<std::int64_t>(v.size())));
    below.insert(below.end(), v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k));
    above.insert(above.end(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    n = std::max<std::int64_t>(0, n - static_cast<std::int64_t>(k));
  };
  take(complete, n_below);
  std::stable_sort(pruned.begin(), pruned.end(), [&](const FrozenTrial* a, const FrozenTrial* b) {
    return detail::pruned_score(*a, direction) < detail::pruned_score(*b, direction);
  });
  take(pruned, n_below);
  above.insert(above.end(), running.begin(), running.end());
  auto by_number = [](const FrozenTrial* a, const FrozenTrial* b) { return a->number < b->number; };
  std::sort(below.begin(), below.end(), by_number);
  std::sort(above.begin(), above.end(), by_number);
  return {std::move(below), std::move(above)};
}

/// The parameters a trial contributes to the estimators: its own (internal) values, plus for
/// a running trial under multivariate constant liar the relative sample it published.
using TpeParamsOf = std::function<std::map<std::string, double>(const FrozenTrial&)>;

/// One TPE decision over `space` (ordered as given) from `trials` (COMPLETE, PRUNED and, for
/// the constant liar, RUNNING trials other than the current one), drawing from `rng`.
inline TpeDecision tpe_sample(const std::vector<const FrozenTrial*>& trials,
                              const std::vector<std::pair<std::string, Distribution>>& space, StudyDirection direction,
                              const TPEOptions& options, UniformSource& rng, const TpeParamsOf& params_of = {}) {
  options.validate();
  qnum::detail::require(!space.empty(), "TPE: empty search space");
  std::int64_t n = 0;
  for (const FrozenTrial* t : trials) n += t->state != TrialState::running;
  const std::int64_t n_below = options.gamma(n);
  qnum::detail::require(n_below >= 0, "TPESampler: gamma(", n, ") returned ", n_below, "; it must be >= 0");
  const auto [below, above] = tpe_split_trials(trials, n_below, direction);

  std::vector<ParzenParam> pspace;
  for (const auto& [name, d] : space) pspace.push_back(detail::parzen_param(d));
  ParzenOptions popt;
  popt.prior_weight = options.prior_weight;
  popt.consider_magic_clip = options.consider_magic_clip;
  popt.consider_endpoints = options.consider_endpoints;
  popt.multivariate = options.multivariate;
  popt.weights = options.weights;

  auto observations = [&](const std::vector<const FrozenTrial*>& group) {
    std::vector<std::vector<double>> cols(space.size());
    for (const FrozenTrial* t : group) {
      const std::map<std::string, double> extra = params_of ? params_of(*t) : std::map<std::string, double>{};
      auto find = [&](const std::string& name) -> const double* {
        if (const auto it = t->params.find(name); it != t->params.end()) return &it->second;
        if (const auto it = extra.find(name); it != extra.end()) return &it->second;
        return nullptr;
      };
      bool all = true;
      for (const auto& [name, d] : space) all = all && find(name) != nullptr;
      if (!all) continue;
      for (std::size_t j = 0; j < space.size(); ++j) cols[j].push_back(*find(space[j].first));
    }
    return cols;
  };
  const ParzenEstimator mpe_below(pspace, observations(below), popt);
  const ParzenEstimator mpe_above(pspace, observations(above), popt);

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

  SearchSpace infer_relative_search_space(StudyView& study, const FrozenTrial&) override {
    if (!options_.multivariate) return {};
    SearchSpace out;
    for (auto& [name, d] : intersection_search_space(study.get_trials_shared(), /*include_pruned=*/true))
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
    check_single_objective(study);
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

  static void check_single_objective(StudyView& study) {
    qnum::detail::require(!study.is_multi_objective(), "TPESampler: multi-objective studies are not supported; use ",
                          "NSGAIISampler (study '", study.study_name(), "' has ", study.directions().size(),
                          " objectives)");
  }

  // COMPLETE and PRUNED trials, read once per trial (Optuna reads them through its trial
  // cache too) and shared with the storage, not copied.
  const std::vector<std::shared_ptr<const FrozenTrial>>& finished(StudyView& study, const FrozenTrial& trial) {
    if (cache_study_ != study.study_id() || cache_number_ != trial.number || cache_trial_id_ != trial.trial_id) {
      cache_ = study.get_trials_shared({TrialState::complete, TrialState::pruned});
      cache_study_ = study.study_id();
      cache_number_ = trial.number;
      cache_trial_id_ = trial.trial_id;
    }
    return cache_;
  }
  std::int64_t n_finished(StudyView& study, const FrozenTrial& trial) {
    return static_cast<std::int64_t>(finished(study, trial).size());
  }

  TpeDecision sample(StudyView& study, const FrozenTrial& trial,
                     const std::vector<std::pair<std::string, Distribution>>& space) {
    check_single_objective(study);
    std::vector<const FrozenTrial*> trials;
    for (const auto& t : finished(study, trial)) trials.push_back(t.get());
    std::vector<std::shared_ptr<const FrozenTrial>> running;  // the constant liar's: read fresh
    if (options_.constant_liar) running = study.get_trials_shared({TrialState::running});
    for (const auto& t : running)
      if (t->number != trial.number) trials.push_back(t.get());
    TpeParamsOf params_of;
    if (options_.multivariate && options_.constant_liar)
      params_of = [&space](const FrozenTrial& t) { return published_relative(t, space); };
    return tpe_sample(trials, space, study.direction(), options_, *tpe_rng_, params_of);
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
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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
};

}  // namespace qnum::search
