// The abstract Sampler with Optuna's shape (optuna/samplers/_base.py), and StudyView, the
// read access to a study that samplers and pruners get. Values cross this interface in the
// internal representation (distributions.hpp): a float or int value as double, a
// categorical value as the index of its choice.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/storage.hpp"

namespace qnum::search {

/// A search space: parameter name -> distribution, ordered by name (as Optuna's
/// intersection search space is).
using SearchSpace = std::map<std::string, Distribution>;

/// What samplers and pruners see of a study.
class StudyView {
 public:
  virtual ~StudyView() = default;
  virtual std::int64_t study_id() const = 0;
  virtual const std::string& study_name() const = 0;
  virtual const std::vector<StudyDirection>& directions() const = 0;
  /// The study's trials by number; only those in `states` when it is not empty.
  virtual std::vector<FrozenTrial> get_trials(const std::vector<TrialState>& states = {}) const = 0;
  /// The same trials without copying them where the storage can (Storage::
  /// get_all_trials_shared): what samplers read on every trial.
  virtual std::vector<std::shared_ptr<const FrozenTrial>> get_trials_shared(
      const std::vector<TrialState>& states = {}) const {
    return storage().get_all_trials_shared(study_id(), states);
  }
  virtual Storage& storage() const = 0;
  /// Ends optimize() after the running trial (Optuna's study.stop()).
  virtual void stop() = 0;

  bool is_multi_objective() const { return directions().size() > 1; }
  /// The single direction; an error for a multi-objective study.
  StudyDirection direction() const {
    qnum::detail::require(directions().size() == 1, "study '", study_name(), "' has ", directions().size(),
                          " objectives; direction() needs exactly one");
    return directions()[0];
  }
};

/// Thrown by a sampler's before_trial when the study has nothing left to sample (a grid
/// whose points are all finished or running elsewhere): the study marks the new trial FAIL
/// with this reason, without running the objective, and optimize() stops.
class StudyExhausted : public qnum::Error {
 public:
  using qnum::Error::Error;
};

/// Optuna's BaseSampler. Per trial the study calls before_trial, then
/// infer_relative_search_space + sample_relative (the joint part), then sample_independent
/// for each suggested parameter outside that space, then after_trial.
class Sampler {
 public:
  virtual ~Sampler() = default;

  /// The parameters to sample jointly for this trial (empty: all independent).
  virtual SearchSpace infer_relative_search_space(StudyView& study, const FrozenTrial& trial) = 0;
  /// Internal values for (some of) the relative search space.
  virtual std::map<std::string, double> sample_relative(StudyView& study, const FrozenTrial& trial,
                                                        const SearchSpace& search_space) = 0;
  /// One internal value for a parameter outside the relative sample.
  virtual double sample_independent(StudyView& study, const FrozenTrial& trial, const std::string& name,
                                    const Distribution& distribution) = 0;
  /// Before the objective runs (the trial is RUNNING, with its number and system attrs).
  virtual void before_trial(StudyView& /*study*/, const FrozenTrial& /*trial*/) {}
  /// After the objective, before the state is stored; values are empty unless COMPLETE.
  virtual void after_trial(StudyView& /*study*/, const FrozenTrial& /*trial*/, TrialState /*state*/,
                           const std::vector<double>& /*values*/) {}
  /// Replaces the random state (workers sharing one sampler configuration use distinct seeds).
  virtual void reseed_rng(std::uint64_t /*seed*/) {}
  /// A short name for tables and logs ("RandomSampler", ...).
  virtual std::string name() const = 0;
};

namespace detail {
template <class Trials, class Get>
SearchSpace intersection_search_space(const Trials& trials, bool include_pruned, Get get) {
  std::optional<SearchSpace> space;
  for (const auto& item : trials) {
    const FrozenTrial& t = get(item);
    if (!(t.state == TrialState::complete || (include_pruned && t.state == TrialState::pruned))) continue;
    if (!space) {
      space = SearchSpace(t.distributions.begin(), t.distributions.end());
      continue;
    }
    for (auto it = space->begin(); it != space->end();) {
      const auto d = t.distributions.find(it->first);
      if (d == t.distributions.end() || !(d->second == it->second))
        it = space->erase(it);
      else
        ++it;
    }
  }
  return space.value_or(SearchSpace{});
}
}  // namespace detail

/// Optuna's IntersectionSearchSpace: the parameters every COMPLETE (or, with
/// include_pruned, PRUNED) trial has with the same distribution, ordered by name.
inline SearchSpace intersection_search_space(const std::vector<FrozenTrial>& trials, bool include_pruned = false) {
  return detail::intersection_search_space(trials, include_pruned,
                                           [](const FrozenTrial& t) -> const FrozenTrial& { return t; });
}
inline SearchSpace intersection_search_space(const std::vector<std::shared_ptr<const FrozenTrial>>& trials,
                                             bool include_pruned = false) {
  return detail::intersection_search_space(
      trials, include_pruned, [](const std::shared_ptr<const FrozenTrial>& t) -> const FrozenTrial& { return *t; });
}

}  // namespace qnum::search
