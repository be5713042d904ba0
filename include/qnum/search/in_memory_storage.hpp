// InMemoryStorage: studies and trials in this process's memory (Optuna's InMemoryStorage),
// safe for several Study objects and threads (one mutex), gone when the process ends.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/storage.hpp"

namespace qnum::search {

class InMemoryStorage final : public Storage {
 public:
  std::int64_t create_new_study(const std::vector<StudyDirection>& directions, const std::string& name) override {
    std::lock_guard lock(mutex_);
    detail::check_new_study(directions, name);
    for (const auto& s : studies_)
      qnum::detail::require(s.second.info.name != name, "study '", name, "' already exists in ", url());
    const std::int64_t id = static_cast<std::int64_t>(studies_.size());
    studies_[id].info = StudyInfo{id, name, directions};
    return id;
  }
  std::optional<StudyInfo> find_study(const std::string& name) override {
    std::lock_guard lock(mutex_);
    for (const auto& s : studies_)
      if (s.second.info.name == name) return s.second.info;
    return std::nullopt;
  }
  StudyInfo get_study(std::int64_t study_id) override {
    std::lock_guard lock(mutex_);
    return study(study_id).info;
  }
  std::vector<StudyInfo> get_all_studies() override {
    std::lock_guard lock(mutex_);
    std::vector<StudyInfo> out;
    for (const auto& s : studies_) out.push_back(s.second.info);
    return out;
  }
  void set_study_user_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    std::lock_guard lock(mutex_);
    study(study_id).user_attrs[key] = value;
  }
  void set_study_system_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    std::lock_guard lock(mutex_);
    study(study_id).system_attrs[key] = value;
  }
  nlohmann::json get_study_user_attrs(std::int64_t study_id) override {
    std::lock_guard lock(mutex_);
    return study(study_id).user_attrs;
  }
  nlohmann::json get_study_system_attrs(std::int64_t study_id) override {
    std::lock_guard lock(mutex_);
    return study(study_id).system_attrs;
  }

  std::int64_t create_new_trial(std::int64_t study_id, const FrozenTrial* templ, bool first_heartbeat) override {
    std::lock_guard lock(mutex_);
    auto& s = study(study_id);
    FrozenTrial t;
    if (templ) {
      t = *templ;
    } else {
      t.state = TrialState::running;
      t.datetime_start = now();
    }
    t.trial_id = static_cast<std::int64_t>(trials_.size());
    t.number = static_cast<std::int64_t>(s.trial_ids.size());
    s.trial_ids.push_back(t.trial_id);
    std::optional<TimePoint> heartbeat;
    if (first_heartbeat && t.state == TrialState::running) heartbeat = now();
    trials_.push_back(Entry{study_id, std::move(t), heartbeat, nullptr});
    return trials_.back().trial.trial_id;
  }
  void set_trial_param(std::int64_t trial_id, const std::string& name, double internal,
                       const Distribution& distribution) override {
    std::lock_guard lock(mutex_);
    auto& e = entry(trial_id);
    check_updatable(e.trial);
    // A name keeps its distribution kind across the study's trials (Optuna checks the same).
    for (const auto id : study(e.study_id).trial_ids) {
      const auto& other = trials_[static_cast<std::size_t>(id)].trial;
      if (const auto it = other.distributions.find(name); it != other.distributions.end()) {
        check_distribution_compatibility(name, it->second, distribution);
        break;
      }
    }
    e.trial.params[name] = internal;
    e.trial.distributions.insert_or_assign(name, distribution);
  }
  void set_trial_intermediate_value(std::int64_t trial_id, std::int64_t step, double value) override {
    std::lock_guard lock(mutex_);
    auto& t = entry(trial_id).trial;
    check_updatable(t);
    t.intermediate_values[step] = value;
  }
  bool set_trial_state_values(std::int64_t trial_id, TrialState state, const std::vector<double>& values,
                              bool first_heartbeat) override {
    std::lock_guard lock(mutex_);
    auto& e = entry(trial_id);
    auto& t = e.trial;
    check_updatable(t);
    if (state == TrialState::running && t.state != TrialState::waiting) return false;
    t.state = state;
    if (!values.empty()) t.values = values;
    if (state == TrialState::running) t.datetime_start = now();
    if (state == TrialState::running && first_heartbeat) e.heartbeat = now();
    if (is_finished(state)) t.datetime_complete = now();
    return true;
  }
  void set_trial_user_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    std::lock_guard lock(mutex_);
    auto& t = entry(trial_id).trial;
    check_updatable(t);
    t.user_attrs[key] = value;
  }
  void set_trial_system_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    std::lock_guard lock(mutex_);
    auto& t = entry(trial_id).trial;
    check_updatable(t);
    t.system_attrs[key] = value;
  }
  FrozenTrial get_trial(std::int64_t trial_id) override {
    std::lock_guard lock(mutex_);
    return entry(trial_id).trial;
  }
  std::vector<FrozenTrial> get_all_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    std::lock_guard lock(mutex_);
    std::vector<FrozenTrial> out;
    for (const auto id : study(study_id).trial_ids) {
      const auto& t = trials_[static_cast<std::size_t>(id)].trial;
      if (states.empty() || std::find(states.begin(), states.end(), t.state) != states.end()) out.push_back(t);
    }
    return out;
  }
  std::vector<std::shared_ptr<const FrozenTrial>> get_all_trials_shared(
      std::int64_t study_id, const std::vector<TrialState>& states) override {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<const FrozenTrial>> out;
    for (const auto id : study(study_id).trial_ids) {
      auto& e = trials_[static_cast<std::size_t>(id)];
      if (!states.empty() && std::find(states.begin(), states.end(), e.trial.state) == states.end()) continue;
      if (!is_finished(e.trial.state)) {
        out.push_back(std::make_shared<const FrozenTrial>(e.trial));
        continue;
      }
      // A finished trial never changes: one shared copy serves every later read.
      if (!e.frozen) e.frozen = std::make_shared<const FrozenTrial>(e.trial);
      out.push_back(e.frozen);
    }
    return out;
  }
  std::int64_t get_n_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    std::lock_guard lock(mutex_);
    std::int64_t n = 0;
    for (const auto id : study(study_id).trial_ids) {
      const auto s = trials_[static_cast<std::size_t>(id)].trial.state;
      n += states.empty() || std::find(states.begin(), states.end(), s) != states.end();
    }
    return n;
  }

  std::int64_t claim_grid_id(std::int64_t study_id, std::int64_t trial_id, const nlohmann::json& search_space,
                             std::int64_t preferred, const std::vector<std::int64_t>& order) override {
    std::lock_guard lock(mutex_);
    std::vector<std::int64_t> finished, running;
    for (const auto id : study(study_id).trial_ids) {
      const auto& t = trials_[static_cast<std::size_t>(id)].trial;
      if (id == trial_id || !t.system_attrs.contains("grid_id") || !t.system_attrs.contains("search_space") ||
          t.system_attrs["search_space"] != search_space)
        continue;
      (is_finished(t.state) ? finished : running).push_back(t.system_attrs["grid_id"].get<std::int64_t>());
    }
    const auto g = detail::choose_grid_id(preferred, order, finished, running);
    if (g >= 0) {
      auto& t = entry(trial_id).trial;
      t.system_attrs["search_space"] = search_space;
      t.system_attrs["grid_id"] = g;
    }
    return g;
  }

  void record_heartbeat(std::int64_t trial_id) override {
    std::lock_guard lock(mutex_);
    entry(trial_id).heartbeat = now();
  }
  std::vector<std::int64_t> get_stale_trial_ids(std::int64_t study_id, double grace_seconds) override {
    std::lock_guard lock(mutex_);
    std::vector<std::int64_t> out;
    const auto t_now = now();
    for (const auto id : study(study_id).trial_ids) {
      const auto& e = trials_[static_cast<std::size_t>(id)];
      if (e.trial.state != TrialState::running || !e.heartbeat) continue;
      if (std::chrono::duration<double>(t_now - *e.heartbeat).count() > grace_seconds) out.push_back(id);
    }
    return out;
  }

  std::string url() const override { return "memory"; }

 private:
  struct StudyEntry {
    StudyInfo info;
    std::vector<std::int64_t> trial_ids;
    nlohmann::json user_attrs = nlohmann::json::object(), system_attrs = nlohmann::json::object();
  };
  struct Entry {
    std::int64_t study_id;
    FrozenTrial trial;
    std::optional<TimePoint> heartbeat;
    std::shared_ptr<const FrozenTrial> frozen;  // once finished: the shared immutable copy
  };
  StudyEntry& study(std::int64_t id) {
    const auto it = studies_.find(id);
    qnum::detail::require(it != studies_.end(), "no study with id ", id, " in ", url());
    return it->second;
  }
  Entry& entry(std::int64_t trial_id) {
    qnum::detail::require(trial_id >= 0 && trial_id < static_cast<std::int64_t>(trials_.size()), "no trial with id ",
                          trial_id, " in ", url());
    return trials_[static_cast<std::size_t>(trial_id)];
  }
  static void check_updatable(const FrozenTrial& t) {
    qnum::detail::require(!is_finished(t.state), "trial ", t.number, " is already finished (", to_string(t.state),
                          ") and cannot be updated");
  }

  std::mutex mutex_;
  std::map<std::int64_t, StudyEntry> studies_;
  std::vector<Entry> trials_;
};

}  // namespace qnum::search
