// Study (Optuna's optuna.Study): a named search in a Storage with one direction per objective,
// a Sampler and a Pruner. optimize() runs the objective trial after trial: a throwing
// objective or a nan value ends its trial as FAIL (the message in the system attribute
// "fail_reason") and the search goes on; TrialPruned ends it as PRUNED. Several Study
// objects — threads or processes — can share one storage and study.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/pruner.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/sampler.hpp"
#include "qnum/search/storage.hpp"
#include "qnum/search/trial.hpp"

namespace qnum::search {

/// How a Study constructor treats the name: create it (error if it exists), load it (error
/// if it does not), or either (Optuna's load_if_exists=True).
enum class OpenMode { create, load, create_or_load };

/// A table of trials (Optuna's trials_dataframe): a header and rows of text cells.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  /// RFC 4180 CSV (cells with commas, quotes or newlines are quoted).
  std::string to_csv() const {
    auto cell = [](const std::string& s) {
      if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
      std::string q = "\"";
      for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    };
    std::string out;
    auto line = [&](const std::vector<std::string>& r) {
      for (std::size_t i = 0; i < r.size(); ++i) out += (i ? "," : "") + cell(r[i]);
      out += "\n";
    };
    line(columns);
    for (const auto& r : rows) line(r);
    return out;
  }
  /// Columns aligned with spaces, for terminals.
  std::string to_text() const {
    std::vector<std::size_t> w(columns.size());
    for (std::size_t i = 0; i < columns.size(); ++i) w[i] = columns[i].size();
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    std::string out;
    auto line = [&](const std::vector<std::string>& r) {
      std::string l;
      for (std::size_t i = 0; i < r.size(); ++i)
        l += r[i] + std::string(w[i] - r[i].size() + (i + 1 < r.size() ? 2 : 0), ' ');
      while (!l.empty() && l.back() == ' ') l.pop_back();
      out += l + "\n";
    };
    line(columns);
    for (const auto& r : rows) line(r);
    return out;
  }
};

/// "2024-05-01 12:34:56.789012" in UTC (how Optuna's database stores datetimes).
inline std::string format_utc(TimePoint t) {
  const auto us = t.time_since_epoch().count();
  auto secs = static_cast<std::time_t>(us / 1000000);
  auto frac = us % 1000000;
  if (frac < 0) frac += 1000000, --secs;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06lld", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  return buf;
}

class Study final : public StudyView {
 public:
  /// Opens `name` in `storage`. An existing study must have the same directions (an error
  /// naming both otherwise; nothing is changed). No sampler = RandomSampler(0); no pruner =
  /// NopPruner.
  Study(std::shared_ptr<Storage> storage, std::string name, std::vector<StudyDirection> directions,
        std::shared_ptr<Sampler> sampler = nullptr, std::shared_ptr<Pruner> pruner = nullptr,
        OpenMode mode = OpenMode::create_or_load)
      : storage_(std::move(storage)),
        sampler_(sampler ? std::move(sampler) : std::make_shared<RandomSampler>(0)),
        pruner_(pruner ? std::move(pruner) : std::make_shared<NopPruner>()) {
    qnum::detail::require(storage_ != nullptr, "Study: no storage given");
    auto found = storage_->find_study(name);
    if (found) {
      qnum::detail::require(mode != OpenMode::create, "study '", name, "' already exists in ", storage_->url());
      if (!directions.empty() && found->directions != directions)
        qnum::detail::fail("study '", name, "' exists in ", storage_->url(), " with direction(s) ",
                           directions_text(found->directions), ", not ", directions_text(directions));
      info_ = *found;
    } else {
      qnum::detail::require(mode != OpenMode::load, "study '", name, "' not found in ", storage_->url());
      try {
        info_.study_id = storage_->create_new_study(directions, name);
      } catch (const qnum::Error&) {
        // Another worker may have created it between the look-up and here: use theirs.
        found = storage_->find_study(name);
        if (!found) throw;
        if (found->directions != directions)
          qnum::detail::fail("study '", name, "' exists in ", storage_->url(), " with direction(s) ",
                             directions_text(found->directions), ", not ", directions_text(directions));
        info_ = *found;
        return;
      }
      info_.name = name;
      info_.directions = directions;
    }
  }
  /// Loads an existing study with its stored directions.
  static Study load(std::shared_ptr<Storage> storage, const std::string& name,
                    std::shared_ptr<Sampler> sampler = nullptr, std::shared_ptr<Pruner> pruner = nullptr) {
    return Study(std::move(storage), name, {}, std::move(sampler), std::move(pruner), OpenMode::load);
  }

  // ---- StudyView
  std::int64_t study_id() const override { return info_.study_id; }
  const std::string& study_name() const override { return info_.name; }
  const std::vector<StudyDirection>& directions() const override { return info_.directions; }
  std::vector<FrozenTrial> get_trials(const std::vector<TrialState>& states = {}) const override {
    return storage_->get_all_trials(info_.study_id, states);
  }
  Storage& storage() const override { return *storage_; }
  void stop() override { stop_ = true; }

  std::vector<FrozenTrial> trials() const { return get_trials(); }
  /// Study-level user attributes (Optuna's study.set_user_attr / user_attrs).
  void set_user_attr(const std::string& key, const nlohmann::json& value) {
    storage_->set_study_user_attr(info_.study_id, key, value);
  }
  nlohmann::json user_attrs() const { return storage_->get_study_user_attrs(info_.study_id); }
  Sampler& sampler() { return *sampler_; }
  Pruner& pruner() { return *pruner_; }

  /// Heartbeats (Optuna's RDBStorage heartbeat_interval / grace_period): while an objective
  /// runs, a thread records a heartbeat every interval; before each trial, RUNNING trials
  /// whose heartbeat is older than the grace period (default 2 intervals) become FAIL.
  void enable_heartbeat(double interval_seconds, std::optional<double> grace_seconds = std::nullopt) {
    qnum::detail::require(interval_seconds > 0, "heartbeat interval must be > 0 seconds, got ", interval_seconds);
    heartbeat_interval_ = interval_seconds;
    grace_seconds_ = grace_seconds.value_or(2 * interval_seconds);
    qnum::detail::require(*grace_seconds_ >= 0, "grace period must be >= 0 seconds, got ", *grace_seconds_);
  }
  /// Marks RUNNING trials with a stale heartbeat FAIL; returns their numbers. Needs heartbeats.
  std::vector<std::int64_t> fail_stale_trials() {
    qnum::detail::require(heartbeat_interval_.has_value(), "fail_stale_trials needs enable_heartbeat() first");
    std::vector<std::int64_t> failed;
    for (const auto id : storage_->get_stale_trial_ids(info_.study_id, *grace_seconds_)) {
      try {
        const auto t = storage_->get_trial(id);
        storage_->set_trial_system_attr(id, "fail_reason", "heartbeat stale: the worker stopped without finishing");
        if (storage_->set_trial_state_values(id, TrialState::fail)) failed.push_back(t.number);
      } catch (const qnum::Error&) {
        // Another worker finished or failed it first: then it is no longer RUNNING. Anything
        // else (the storage itself failing) is the caller's to see, not ours to hide.
        if (storage_->get_trial(id).state == TrialState::running) throw;
      }
    }
    return failed;
  }

  /// Adds a WAITING trial whose parameters take these values (Optuna's enqueue_trial); the
  /// next trial any worker starts picks it up.
  void enqueue_trial(const std::map<std::string, ParamValue>& params,
                     const nlohmann::json& user_attrs = nlohmann::json::object()) {
    FrozenTrial t;
    t.state = TrialState::waiting;
    nlohmann::json fixed = nlohmann::json::object();
    for (const auto& [k, v] : params) fixed[k] = to_json(v);
    t.system_attrs["fixed_params"] = fixed;
    t.user_attrs = user_attrs;
    storage_->create_new_trial(info_.study_id, &t);
  }

  /// Starts a trial (a waiting one if any, else a new one) and returns its handle
  /// (Optuna's ask). Finish it with tell(). Throws StudyExhausted (after recording the
  /// trial as FAIL) when the sampler has nothing left, e.g. a grid with no free point.
  Trial ask() { return start_trial(false); }

  /// Finishes a trial (Optuna's tell): COMPLETE needs one finite-or-infinite value per
  /// direction, otherwise the trial becomes FAIL with the reason; PRUNED keeps the last
  /// intermediate value as its value. Returns the final state.
  TrialState tell(Trial& trial, TrialState state, std::vector<double> values = {},
                  const std::string& fail_reason = "") {
    std::string reason = fail_reason;
    if (state == TrialState::complete) {
      if (values.size() != info_.directions.size()) {
        reason = detail_concat("the objective returned ", values.size(), " value(s); the study has ",
                               info_.directions.size(), " direction(s)");
        state = TrialState::fail;
      } else {
        for (const double v : values)
          if (std::isnan(v)) {
            reason = "the objective value nan is not acceptable";
            state = TrialState::fail;
          }
      }
    } else if (state == TrialState::pruned) {
      values.clear();
      if (const auto s = trial.frozen().last_step(); s && !is_multi_objective()) {
        const double v = trial.frozen().intermediate_values.at(*s);
        if (!std::isnan(v)) values = {v};
      }
    } else {
      qnum::detail::require(state == TrialState::fail, "tell: the state must be COMPLETE, PRUNED or FAIL, got ",
                            to_string(state));
    }
    if (state == TrialState::fail) values.clear();
    if (state == TrialState::fail && !reason.empty()) trial.set_system_attr("fail_reason", reason);
    sampler_->after_trial(*this, storage_->get_trial(trial.trial_id()), state, values);
    storage_->set_trial_state_values(trial.trial_id(), state, values);
    return state;
  }

  /// Runs the objective (Trial& -> double, or -> std::vector<double> for several
  /// objectives) until n_trials have run in this call, timeout_seconds have passed (no new
  /// trial starts; the running one finishes), or stop() (the grid sampler stops when its grid
  /// is exhausted); unset = no limit. Trials that fail do not end the search.
  template <class Objective>
  void optimize(Objective&& objective, std::optional<std::int64_t> n_trials,
                std::optional<double> timeout_seconds = std::nullopt) {
    struct {
      std::optional<std::int64_t> n_trials;
      std::optional<double> timeout_seconds;
    } opt{n_trials, timeout_seconds};
    using R = std::invoke_result_t<Objective&, Trial&>;
    static_assert(std::is_convertible_v<R, double> || std::is_convertible_v<R, std::vector<double>>,
                  "the objective must return double or std::vector<double>");
    qnum::detail::require(!opt.n_trials || *opt.n_trials >= 0, "optimize: n_trials must be >= 0, got ",
                          opt.n_trials.value_or(0));
    stop_ = false;
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; !opt.n_trials || i < *opt.n_trials; ++i) {
      if (opt.timeout_seconds &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= *opt.timeout_seconds)
        break;
      run_trial(objective);
      if (stop_) break;
    }
  }

  // ---- results
  /// The best COMPLETE trial of a single-objective study (the first of equals).
  FrozenTrial best_trial() const {
    const auto dir = direction();
    std::shared_ptr<const FrozenTrial> best;  // shared reads: only the best one is copied
    for (auto& t : get_trials_shared({TrialState::complete}))
      if (!best || (dir == StudyDirection::maximize ? t->values[0] > best->values[0] : t->values[0] < best->values[0]))
        best = std::move(t);
    qnum::detail::require(best != nullptr, "study '", info_.name, "': no trials are completed yet");
    return *best;
  }
  double best_value() const { return best_trial().values[0]; }
  /// The Pareto front: COMPLETE trials no other COMPLETE trial dominates (for one objective,
  /// every trial with the best value).
  std::vector<FrozenTrial> best_trials() const {
    const auto done = get_trials_shared({TrialState::complete});
    std::vector<FrozenTrial> front;
    for (const auto& t : done) {
      bool dominated = false;
      for (const auto& o : done)
        if (dominates(o->values, t->values, info_.directions)) {
          dominated = true;
          break;
        }
      if (!dominated) front.push_back(*t);
    }
    return front;
  }
  /// Best value so far after each finished trial, by number (single objective; COMPLETE
  /// trials only count; nan before the first).
  std::vector<std::pair<std::int64_t, double>> best_so_far() const {
    const bool maximize = direction() == StudyDirection::maximize;
    std::vector<std::pair<std::int64_t, double>> out;
    double best = std::numeric_limits<double>::quiet_NaN();
    for (const auto& t : get_trials_shared()) {
      if (!is_finished(t->state)) continue;
      if (t->state == TrialState::complete &&
          (std::isnan(best) || (maximize ? t->values[0] > best : t->values[0] < best)))
        best = t->values[0];
      out.emplace_back(t->number, best);
    }
    return out;
  }

  /// Optuna's trials_dataframe columns: number, value (values_0.. for several objectives),
  /// datetime_start, datetime_complete, duration (seconds), params_<name>,
  /// user_attrs_<key>, system_attrs_fail_reason, state.
  Table trials_table() const {
    const auto all = get_trials();
    std::set<std::string> param_names, user_keys;
    bool any_fail_reason = false;
    for (const auto& t : all) {
      for (const auto& [k, v] : t.params) param_names.insert(k);
      for (const auto& [k, v] : t.user_attrs.items()) user_keys.insert(k);
      any_fail_reason |= t.system_attrs.contains("fail_reason");
    }
    Table tab;
    tab.columns.push_back("number");
    if (info_.directions.size() == 1)
      tab.columns.push_back("value");
    else
      for (std::size_t i = 0; i < info_.directions.size(); ++i) tab.columns.push_back("values_" + std::to_string(i));
    for (const char* c : {"datetime_start", "datetime_complete", "duration"}) tab.columns.push_back(c);
    for (const auto& p : param_names) tab.columns.push_back("params_" + p);
    for (const auto& k : user_keys) tab.columns.push_back("user_attrs_" + k);
    if (any_fail_reason) tab.columns.push_back("system_attrs_fail_reason");
    tab.columns.push_back("state");
    for (const auto& t : all) {
      std::vector<std::string> r{std::to_string(t.number)};
      for (std::size_t i = 0; i < info_.directions.size(); ++i)
        r.push_back(i < t.values.size() ? python_float_repr_plain(t.values[i]) : "");
      r.push_back(t.datetime_start ? format_utc(*t.datetime_start) : "");
      r.push_back(t.datetime_complete ? format_utc(*t.datetime_complete) : "");
      if (t.datetime_start && t.datetime_complete) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f",
                      std::chrono::duration<double>(*t.datetime_complete - *t.datetime_start).count());
        r.push_back(buf);
      } else {
        r.push_back("");
      }
      for (const auto& p : param_names) {
        const auto it = t.params.find(p);
        if (it == t.params.end()) {
          r.push_back("");
          continue;
        }
        const auto v = to_external(t.distributions.at(p), it->second);
        r.push_back(std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : to_string(v));
      }
      for (const auto& k : user_keys) {
        if (!t.user_attrs.contains(k))
          r.push_back("");
        else if (t.user_attrs[k].is_string())
          r.push_back(t.user_attrs[k].get<std::string>());
        else
          r.push_back(python_json_dumps(t.user_attrs[k]));
      }
      if (any_fail_reason)
        r.push_back(t.system_attrs.contains("fail_reason") && t.system_attrs["fail_reason"].is_string()
                        ? t.system_attrs["fail_reason"].get<std::string>()
                        : "");
      r.push_back(std::string(to_string(t.state)));
      tab.rows.push_back(std::move(r));
    }
    return tab;
  }

  static std::string directions_text(const std::vector<StudyDirection>& d) {
    std::string s;
    for (const auto x : d)
      s += (s.empty() ? "" : ",") + std::string(x == StudyDirection::maximize ? "maximize" : "minimize");
    return s.empty() ? "(none)" : s;
  }

 private:
  template <class... Args>
  static std::string detail_concat(Args&&... args) {
    return qnum::detail::concat(std::forward<Args>(args)...);
  }
  static std::string python_float_repr_plain(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return python_float_repr(v);
  }

  // Records heartbeats on its own thread until destroyed.
  class HeartbeatThread {
   public:
    HeartbeatThread(Storage& storage, std::int64_t trial_id, double interval) {
      storage.record_heartbeat(trial_id);
      thread_ = std::thread([this, &storage, trial_id, interval] {
        std::unique_lock lock(m_);
        while (!cv_.wait_for(lock, std::chrono::duration<double>(interval), [this] { return done_; })) {
          try {
            storage.record_heartbeat(trial_id);
          } catch (const std::exception&) {
            // A missed beat only makes the trial look stale sooner; the objective goes on.
          }
        }
      });
    }
    ~HeartbeatThread() {
      {
        std::lock_guard lock(m_);
        done_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }

   private:
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
  };

  // ask(), optionally with the trial's first heartbeat recorded as it becomes RUNNING.
  Trial start_trial(bool first_heartbeat) {
    std::optional<std::int64_t> trial_id;
    for (const auto& w : get_trials({TrialState::waiting}))
      if (storage_->set_trial_state_values(w.trial_id, TrialState::running, {}, first_heartbeat)) {
        trial_id = w.trial_id;
        break;
      }
    if (!trial_id) trial_id = storage_->create_new_trial(info_.study_id, nullptr, first_heartbeat);
    try {
      sampler_->before_trial(*this, storage_->get_trial(*trial_id));
    } catch (const StudyExhausted& e) {
      // Nothing left to sample: the trial ends FAIL with the reason, the study stops.
      storage_->set_trial_system_attr(*trial_id, "fail_reason", e.what());
      storage_->set_trial_state_values(*trial_id, TrialState::fail);
      stop_ = true;
      throw;
    }
    return Trial(*this, *sampler_, *pruner_, *trial_id);
  }

  template <class Objective>
  void run_trial(Objective& objective) {
    if (heartbeat_interval_) fail_stale_trials();
    std::optional<Trial> asked;
    try {
      // Born with a heartbeat: a kill before the heartbeat thread starts leaves a trial
      // that still goes stale (Optuna's workers leave one that stays RUNNING for ever).
      asked.emplace(start_trial(heartbeat_interval_.has_value()));
    } catch (const StudyExhausted&) {
      return;  // recorded as FAIL; stop_ is set
    }
    Trial& trial = *asked;
    TrialState state = TrialState::complete;
    std::vector<double> values;
    std::string reason;
    {
      std::optional<HeartbeatThread> beat;
      if (heartbeat_interval_) beat.emplace(*storage_, trial.trial_id(), *heartbeat_interval_);
      try {
        if constexpr (std::is_convertible_v<std::invoke_result_t<Objective&, Trial&>, std::vector<double>>)
          values = objective(trial);
        else
          values = {static_cast<double>(objective(trial))};
      } catch (const TrialPruned&) {
        state = TrialState::pruned;
      } catch (const std::exception& e) {
        state = TrialState::fail;
        reason = e.what();
      }
    }
    tell(trial, state, std::move(values), reason);
  }

  std::shared_ptr<Storage> storage_;
  std::shared_ptr<Sampler> sampler_;
  std::shared_ptr<Pruner> pruner_;
  StudyInfo info_;
  std::atomic<bool> stop_{false};
  std::optional<double> heartbeat_interval_, grace_seconds_;
};

}  // namespace qnum::search
