// The abstract Storage of studies and trials (Optuna's BaseStorage, plus the heartbeat of
// its RDBStorage and an atomic grid-point claim). Every method is one atomic step, so several
// Study objects — in one process or several — can share a storage: trial numbers are
// assigned inside the storage and never repeat.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"

namespace qnum::search {

/// A study's identity in a storage.
struct StudyInfo {
  std::int64_t study_id = -1;
  std::string name;
  std::vector<StudyDirection> directions;
};

class Storage {
 public:
  virtual ~Storage() = default;

  // ---- studies
  /// Creates a study; an error if the name exists or a direction is not_set.
  virtual std::int64_t create_new_study(const std::vector<StudyDirection>& directions, const std::string& name) = 0;
  /// The study of that name, if any.
  virtual std::optional<StudyInfo> find_study(const std::string& name) = 0;
  virtual StudyInfo get_study(std::int64_t study_id) = 0;
  virtual std::vector<StudyInfo> get_all_studies() = 0;
  virtual void set_study_user_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) = 0;
  virtual void set_study_system_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) = 0;
  virtual nlohmann::json get_study_user_attrs(std::int64_t study_id) = 0;
  virtual nlohmann::json get_study_system_attrs(std::int64_t study_id) = 0;

  // ---- trials
  /// Creates a trial (RUNNING, started now) or, given a template, a copy of it in the
  /// template's state (e.g. WAITING for enqueue_trial); returns its trial_id. The number is
  /// the count of the study's earlier trials, assigned atomically. With `first_heartbeat`, a
  /// RUNNING trial gets its first heartbeat in the same atomic step: a worker killed before
  /// its heartbeat thread starts then still leaves a trial that goes stale.
  virtual std::int64_t create_new_trial(std::int64_t study_id, const FrozenTrial* templ = nullptr,
                                        bool first_heartbeat = false) = 0;
  /// Records a parameter (internal value); the trial must be RUNNING, and a parameter name
  /// keeps its distribution kind within the study.
  virtual void set_trial_param(std::int64_t trial_id, const std::string& name, double internal,
                               const Distribution& distribution) = 0;
  virtual void set_trial_intermediate_value(std::int64_t trial_id, std::int64_t step, double value) = 0;
  /// Sets state (and values when finishing). Returns false, changing nothing, when asked to
  /// make RUNNING a trial that is not WAITING (how a worker claims a waiting trial); an error
  /// when the trial is already finished. `first_heartbeat`: as in create_new_trial, when the
  /// trial becomes RUNNING.
  virtual bool set_trial_state_values(std::int64_t trial_id, TrialState state, const std::vector<double>& values = {},
                                      bool first_heartbeat = false) = 0;
  virtual void set_trial_user_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) = 0;
  virtual void set_trial_system_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) = 0;
  virtual FrozenTrial get_trial(std::int64_t trial_id) = 0;
  /// The study's trials ordered by number, only those in `states` when it is not empty.
  virtual std::vector<FrozenTrial> get_all_trials(std::int64_t study_id,
                                                  const std::vector<TrialState>& states = {}) = 0;
  virtual std::int64_t get_n_trials(std::int64_t study_id, const std::vector<TrialState>& states = {}) = 0;
  /// get_all_trials without copies where the storage can: finished trials never change, so
  /// a storage may hand out the same immutable object every time (the in-memory and RDB
  /// storages do; samplers read the study this way once per trial). This default copies.
  virtual std::vector<std::shared_ptr<const FrozenTrial>> get_all_trials_shared(
      std::int64_t study_id, const std::vector<TrialState>& states = {}) {
    std::vector<std::shared_ptr<const FrozenTrial>> out;
    for (auto& t : get_all_trials(study_id, states)) out.push_back(std::make_shared<const FrozenTrial>(std::move(t)));
    return out;
  }

  // ---- grid claims (GridSampler)
  /// Atomically gives the trial a grid point of `search_space` (Optuna's system attributes
  /// "search_space" and "grid_id"): `preferred` if no other trial with the same search space
  /// holds it (finished or running), else the first such free point of `order`. Returns the
  /// grid id, or -1 when no point is free (nothing is written then).
  virtual std::int64_t claim_grid_id(std::int64_t study_id, std::int64_t trial_id, const nlohmann::json& search_space,
                                     std::int64_t preferred, const std::vector<std::int64_t>& order) = 0;

  // ---- heartbeats (Optuna's trial_heartbeats)
  virtual void record_heartbeat(std::int64_t trial_id) = 0;
  /// RUNNING trials of the study whose last heartbeat is older than grace_seconds (trials
  /// that never sent one are not stale, as in Optuna: a worker without heartbeats, or a
  /// trial from ask(), may run for any time; workers with heartbeats start their trials with
  /// one, see create_new_trial).
  virtual std::vector<std::int64_t> get_stale_trial_ids(std::int64_t study_id, double grace_seconds) = 0;

  /// A short description (the URL it was opened from).
  virtual std::string url() const = 0;
};

namespace detail {

// What every storage checks before creating a study.
inline void check_new_study(const std::vector<StudyDirection>& directions, const std::string& name) {
  qnum::detail::require(!name.empty(), "a study needs a non-empty name");
  qnum::detail::require(!directions.empty(), "study '", name, "': at least one direction is needed");
  for (const auto d : directions)
    qnum::detail::require(d != StudyDirection::not_set, "study '", name, "': direction NOT_SET is not allowed");
}

// The grid id choice of Storage::claim_grid_id given the ids held by other trials of the
// same search space; shared by the storages so they decide identically.
inline std::int64_t choose_grid_id(std::int64_t preferred, const std::vector<std::int64_t>& order,
                                   const std::vector<std::int64_t>& finished,
                                   const std::vector<std::int64_t>& running) {
  auto held = [](const std::vector<std::int64_t>& v, std::int64_t g) {
    return std::find(v.begin(), v.end(), g) != v.end();
  };
  if (preferred >= 0 && !held(finished, preferred) && !held(running, preferred)) return preferred;
  for (const auto g : order)
    if (!held(finished, g) && !held(running, g)) return g;
  return -1;
}

// The URL without its password (scheme://user:***@host...), for messages.
inline std::string redact_url_password(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const auto at = url.find('@', scheme + 3);
  const auto slash = url.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  const auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + ":***" + url.substr(at);
}

}  // namespace detail

}  // namespace qnum::search
