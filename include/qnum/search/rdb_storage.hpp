// RdbStorage: the Storage logic shared by the SQLite and PostgreSQL storages — Optuna's RDB
// schema (optuna/storages/_rdb/models.py; alembic revision v3.2.0.a, schema_version 12),
// its enum names (RUNNING, MINIMIZE, FINITE, INF_POS, ...), naive-UTC datetimes and
// json.dumps-formatted JSON — written once over a connection type that supplies statements,
// transactions and locks (sqlite_storage.hpp, postgres_storage.hpp). Finished trials, which
// never change, are read once and then shared (get_all_trials_shared).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/json_text.hpp"
#include "qnum/search/storage.hpp"

namespace qnum::search {

/// The Optuna schema qnum writes and accepts (docs/search.md).
inline constexpr const char* kOptunaAlembicRevision = "v3.2.0.a";
inline constexpr int kOptunaSchemaVersion = 12;
/// version_info.library_version written into new databases: the Optuna release whose
/// database layout was verified against qnum's (tests/search/check_optuna_load.py).
inline constexpr const char* kOptunaVerifiedVersion = "5.0.0";

namespace detail {

/// "YYYY-MM-DD HH:MM:SS.ffffff", naive UTC, as SQLAlchemy stores Optuna's datetimes.
inline std::string sql_datetime(TimePoint t) {
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
/// The inverse of sql_datetime: "YYYY-MM-DD HH:MM:SS" then up to 6 fraction digits (what
/// SQLite and PostgreSQL give back; anything after is ignored). nullopt for anything else,
/// including out-of-range fields, so a tampered row cannot overflow the arithmetic.
inline std::optional<TimePoint> parse_sql_datetime(const std::string& s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  bool ok = true;
  const auto field = [&](std::size_t pos, std::size_t len) {
    int v = 0;
    for (std::size_t i = pos; i < pos + len; ++i) {
      ok &= s[i] >= '0' && s[i] <= '9';
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  const int y = field(0, 4), mo = field(5, 2), d = field(8, 2), h = field(11, 2), mi = field(14, 2), sec = field(17, 2);
  if (!ok || y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  long long micro = 0;
  if (s.size() > 19 && s[19] == '.') {
    int digits = 0;
    for (std::size_t i = 20; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i)
      if (digits < 6) micro = micro * 10 + (s[i] - '0'), ++digits;
    if (digits == 0) return std::nullopt;
    for (; digits < 6; ++digits) micro *= 10;
  }
  std::tm tm{};
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
  const auto secs = static_cast<long long>(timegm(&tm));  // |secs| < 2.6e11 for years 1..9999
  return TimePoint(std::chrono::microseconds(secs * 1000000 + micro));
}

// Optuna's value encodings: trial_values (FINITE, INF_POS, INF_NEG) and intermediate values
// (also NAN); the number column is NULL unless finite.
inline const char* value_type(double v, bool allow_nan) {
  if (std::isnan(v)) {
    qnum::detail::require(allow_nan, "search: a nan objective value cannot be stored");
    return "NAN";
  }
  if (std::isinf(v)) return v > 0 ? "INF_POS" : "INF_NEG";
  return "FINITE";
}
inline double value_from(std::optional<double> v, const std::string& type) {
  if (type == "INF_POS") return HUGE_VAL;
  if (type == "INF_NEG") return -HUGE_VAL;
  if (type == "NAN") return std::nan("");
  qnum::detail::require(type == "FINITE" && v.has_value(), "search: bad stored value type '", type, "'");
  return *v;
}

// The schema-revision check both storages make on an existing database.
inline void check_alembic_revision(const std::string& url, const std::string& rev) {
  qnum::detail::require(rev == kOptunaAlembicRevision, "cannot use ", url, ": its Optuna schema revision is '", rev,
                        "', qnum reads and writes ", kOptunaAlembicRevision,
                        " (Optuna >= 3.2; `optuna storage upgrade` migrates older databases)");
}

// Storage over a connection `Conn`, which provides:
//   Conn::Stmt stmt(sql)      a statement with `?` placeholders: bind(i, v), bind_null(i),
//                             step() (true while rows come), run(), i64/f64/opt_f64/text/is_null
//   write(f), read(f)         f() inside one write / read-snapshot transaction, rolled back on error
//   lock_study(id)            inside write: serializes trial numbering and grid claims of a study
//   row_lock()                suffix of a SELECT that locks the trial row it reads ("" or FOR ...)
//   db_now()                  the database's clock (heartbeats of several machines compare on it)
//   url()                     the URL for messages (no password)
template <class Conn>
class RdbStorage : public Storage {
 public:
  // ---- studies
  std::int64_t create_new_study(const std::vector<StudyDirection>& directions, const std::string& name) override {
    detail::check_new_study(directions, name);
    return conn_.write([&] {
      conn_.lock_studies();
      {
        auto q = conn_.stmt("SELECT study_id FROM studies WHERE study_name = ?");
        q.bind(1, name);
        qnum::detail::require(!q.step(), "study '", name, "' already exists in ", url());
      }
      auto ins = conn_.stmt("INSERT INTO studies (study_name) VALUES (?) RETURNING study_id");
      ins.bind(1, name);
      ins.step();
      const std::int64_t id = ins.i64(0);
      ins.run();
      for (std::size_t i = 0; i < directions.size(); ++i) {
        auto d = conn_.stmt("INSERT INTO study_directions (direction, study_id, objective) VALUES (?, ?, ?)");
        d.bind(1, std::string(to_string(directions[i]))).bind(2, id).bind(3, static_cast<std::int64_t>(i)).run();
      }
      return id;
    });
  }
  std::optional<StudyInfo> find_study(const std::string& name) override {
    return conn_.read([&]() -> std::optional<StudyInfo> {
      auto q = conn_.stmt("SELECT study_id FROM studies WHERE study_name = ?");
      q.bind(1, name);
      if (!q.step()) return std::nullopt;
      const auto id = q.i64(0);
      q.run();
      return study_info(id);
    });
  }
  StudyInfo get_study(std::int64_t study_id) override {
    return conn_.read([&] { return study_info(study_id); });
  }
  std::vector<StudyInfo> get_all_studies() override {
    return conn_.read([&] {
      std::vector<StudyInfo> out;
      std::vector<std::int64_t> ids;
      auto q = conn_.stmt("SELECT study_id FROM studies ORDER BY study_id");
      while (q.step()) ids.push_back(q.i64(0));
      for (const auto id : ids) out.push_back(study_info(id));
      return out;
    });
  }
  void set_study_user_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    conn_.write([&] { upsert_attr("study_user_attributes", "study_id", study_id, key, value); });
  }
  void set_study_system_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    conn_.write([&] { upsert_attr("study_system_attributes", "study_id", study_id, key, value); });
  }
  nlohmann::json get_study_user_attrs(std::int64_t study_id) override {
    return conn_.read([&] { return attrs("study_user_attributes", "study_id", study_id); });
  }
  nlohmann::json get_study_system_attrs(std::int64_t study_id) override {
    return conn_.read([&] { return attrs("study_system_attributes", "study_id", study_id); });
  }

  // ---- trials
  std::int64_t create_new_trial(std::int64_t study_id, const FrozenTrial* templ, bool first_heartbeat) override {
    return conn_.write([&] {
      study_info(study_id);        // exists
      conn_.lock_study(study_id);  // one numbering at a time per study
      auto ins = conn_.stmt(
          "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) "
          "VALUES (NULL, ?, 'RUNNING', ?, ?) RETURNING trial_id");
      ins.bind(1, study_id);
      if (!templ) {
        ins.bind(2, detail::sql_datetime(now())).bind_null(3);
      } else {
        if (templ->datetime_start)
          ins.bind(2, detail::sql_datetime(*templ->datetime_start));
        else
          ins.bind_null(2);
        if (templ->datetime_complete)
          ins.bind(3, detail::sql_datetime(*templ->datetime_complete));
        else
          ins.bind_null(3);
      }
      ins.step();
      const std::int64_t trial_id = ins.i64(0);
      ins.run();
      // Optuna's number: how many trials of the study came before, inside this transaction.
      auto count = conn_.stmt("SELECT count(trial_id) FROM trials WHERE study_id = ? AND trial_id < ?");
      count.bind(1, study_id).bind(2, trial_id).step();
      const std::int64_t number = count.i64(0);
      count.run();
      auto upd = conn_.stmt("UPDATE trials SET number = ? WHERE trial_id = ?");
      upd.bind(1, number).bind(2, trial_id).run();
      if (templ) {
        for (const auto& [name, v] : templ->params) insert_param(trial_id, name, v, templ->distributions.at(name));
        for (std::size_t i = 0; i < templ->values.size(); ++i)
          insert_value(trial_id, static_cast<std::int64_t>(i), templ->values[i]);
        for (const auto& [step, v] : templ->intermediate_values) upsert_intermediate(trial_id, step, v);
        for (const auto& [k, v] : templ->user_attrs.items())
          upsert_attr("trial_user_attributes", "trial_id", trial_id, k, v);
        for (const auto& [k, v] : templ->system_attrs.items())
          upsert_attr("trial_system_attributes", "trial_id", trial_id, k, v);
        auto st = conn_.stmt("UPDATE trials SET state = ? WHERE trial_id = ?");
        st.bind(1, std::string(to_string(templ->state))).bind(2, trial_id).run();
      }
      if (first_heartbeat && (!templ || templ->state == TrialState::running)) upsert_heartbeat(trial_id);
      return trial_id;
    });
  }
  void set_trial_param(std::int64_t trial_id, const std::string& name, double internal,
                       const Distribution& distribution) override {
    conn_.write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      auto prev = conn_.stmt(
          "SELECT p.distribution_json FROM trial_params p JOIN trials t ON p.trial_id = t.trial_id "
          "WHERE t.study_id = ? AND p.param_name = ? LIMIT 1");
      prev.bind(1, study_id).bind(2, name);
      if (prev.step()) check_distribution_compatibility(name, distribution_from_json(prev.text(0)), distribution);
      prev.run();
      insert_param(trial_id, name, internal, distribution);
    });
  }
  void set_trial_intermediate_value(std::int64_t trial_id, std::int64_t step, double value) override {
    conn_.write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_intermediate(trial_id, step, value);
    });
  }
  bool set_trial_state_values(std::int64_t trial_id, TrialState state, const std::vector<double>& values,
                              bool first_heartbeat) override {
    return conn_.write([&] {
      const auto [study_id, old_state, number] = trial_head(trial_id);
      check_updatable(number, old_state);
      if (state == TrialState::running && old_state != TrialState::waiting) return false;
      for (std::size_t i = 0; i < values.size(); ++i) insert_value(trial_id, static_cast<std::int64_t>(i), values[i]);
      if (state == TrialState::running) {
        auto u = conn_.stmt("UPDATE trials SET datetime_start = ? WHERE trial_id = ?");
        u.bind(1, detail::sql_datetime(now())).bind(2, trial_id).run();
        if (first_heartbeat) upsert_heartbeat(trial_id);
      }
      if (is_finished(state)) {
        auto u = conn_.stmt("UPDATE trials SET datetime_complete = ? WHERE trial_id = ?");
        u.bind(1, detail::sql_datetime(now())).bind(2, trial_id).run();
      }
      auto u = conn_.stmt("UPDATE trials SET state = ? WHERE trial_id = ?");
      u.bind(1, std::string(to_string(state))).bind(2, trial_id).run();
      return true;
    });
  }
  void set_trial_user_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    conn_.write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_attr("trial_user_attributes", "trial_id", trial_id, key, value);
    });
  }
  void set_trial_system_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    conn_.write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_attr("trial_system_attributes", "trial_id", trial_id, key, value);
    });
  }
  FrozenTrial get_trial(std::int64_t trial_id) override {
    return conn_.read([&] {
      auto v = load_trials("t.trial_id = ?", trial_id, {});
      qnum::detail::require(!v.empty(), "no trial with id ", trial_id, " in ", url());
      return std::move(v[0]);
    });
  }
  std::vector<FrozenTrial> get_all_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    return conn_.read([&] { return load_trials("t.study_id = ?", study_id, states); });
  }
  // Finished trials come from a cache filled once per trial (they never change); only the
  // trial heads are read each time, plus the rows of unfinished or newly finished trials.
  std::vector<std::shared_ptr<const FrozenTrial>> get_all_trials_shared(
      std::int64_t study_id, const std::vector<TrialState>& states) override {
    return conn_.read([&] {
      std::vector<std::shared_ptr<const FrozenTrial>> out;
      std::vector<std::int64_t> missing;
      std::lock_guard lock(cache_mutex_);
      {
        auto q = conn_.stmt("SELECT trial_id, state FROM trials WHERE study_id = ? ORDER BY number, trial_id");
        q.bind(1, study_id);
        while (q.step()) {
          const auto state = parse_trial_state(q.text(1));
          if (!states.empty() && std::find(states.begin(), states.end(), state) == states.end()) continue;
          const auto id = q.i64(0);
          const auto it = is_finished(state) ? cache_.find(id) : cache_.end();
          if (it != cache_.end() && it->second->state == state) {
            out.push_back(it->second);
          } else {
            out.push_back(nullptr);
            missing.push_back(id);
          }
        }
      }
      if (missing.empty()) return out;
      std::string in = "t.trial_id IN (";
      for (std::size_t i = 0; i < missing.size(); ++i) in += (i ? "," : "") + std::to_string(missing[i]);
      std::unordered_map<std::int64_t, std::shared_ptr<const FrozenTrial>> loaded;
      for (auto& t : load_trials(in + ")", std::nullopt, {})) {
        auto p = std::make_shared<const FrozenTrial>(std::move(t));
        if (is_finished(p->state)) cache_[p->trial_id] = p;
        loaded.emplace(p->trial_id, std::move(p));
      }
      std::size_t k = 0;
      for (auto& p : out)
        if (!p) p = loaded.at(missing[k++]);
      return out;
    });
  }
  std::int64_t get_n_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    return conn_.read([&] {
      std::int64_t n = 0;
      auto q = conn_.stmt("SELECT state FROM trials WHERE study_id = ?");
      q.bind(1, study_id);
      while (q.step())
        if (states.empty() || std::find(states.begin(), states.end(), parse_trial_state(q.text(0))) != states.end())
          ++n;
      return n;
    });
  }

  std::int64_t claim_grid_id(std::int64_t study_id, std::int64_t trial_id, const nlohmann::json& search_space,
                             std::int64_t preferred, const std::vector<std::int64_t>& order) override {
    return conn_.write([&] {
      conn_.lock_study(study_id);  // claims of one study one at a time, each seeing the last
      auto q = conn_.stmt(
          "SELECT a.trial_id, a.\"key\", a.value_json, t.state FROM trial_system_attributes a "
          "JOIN trials t ON a.trial_id = t.trial_id WHERE t.study_id = ? AND a.\"key\" IN "
          "('grid_id', 'search_space') AND a.trial_id != ?");
      q.bind(1, study_id).bind(2, trial_id);
      struct Held {
        std::optional<std::int64_t> grid;
        bool same_space = false;
        TrialState state = TrialState::running;
      };
      std::map<std::int64_t, Held> held;
      while (q.step()) {
        auto& h = held[q.i64(0)];
        h.state = parse_trial_state(q.text(3));
        const auto v = python_json_loads(q.text(2));
        if (q.text(1) == "grid_id" && v.is_number_integer())
          h.grid = v.template get<std::int64_t>();
        else if (q.text(1) == "search_space")
          h.same_space = v == search_space;
      }
      std::vector<std::int64_t> finished, running;
      for (const auto& [id, h] : held)
        if (h.grid && h.same_space) (is_finished(h.state) ? finished : running).push_back(*h.grid);
      const auto g = detail::choose_grid_id(preferred, order, finished, running);
      if (g >= 0) {
        upsert_attr("trial_system_attributes", "trial_id", trial_id, "search_space", search_space);
        upsert_attr("trial_system_attributes", "trial_id", trial_id, "grid_id", g);
      }
      return g;
    });
  }

  void record_heartbeat(std::int64_t trial_id) override {
    conn_.write([&] { upsert_heartbeat(trial_id); });
  }
  std::vector<std::int64_t> get_stale_trial_ids(std::int64_t study_id, double grace_seconds) override {
    return conn_.read([&] {
      std::vector<std::int64_t> out;
      const auto t_now = conn_.db_now();
      auto q = conn_.stmt(
          "SELECT t.trial_id, h.heartbeat FROM trials t JOIN trial_heartbeats h ON t.trial_id = h.trial_id "
          "WHERE t.study_id = ? AND t.state = 'RUNNING'");
      q.bind(1, study_id);
      while (q.step()) {
        const auto beat = detail::parse_sql_datetime(q.text(1));
        if (beat && std::chrono::duration<double>(t_now - *beat).count() > grace_seconds) out.push_back(q.i64(0));
      }
      return out;
    });
  }

  std::string url() const override { return conn_.url(); }

 protected:
  template <class... Args>
  explicit RdbStorage(Args&&... args) : conn_(std::forward<Args>(args)...) {}

  Conn conn_;

 private:
  struct TrialHead {
    std::int64_t study_id;
    TrialState state;
    std::int64_t number;
  };

  // The trial's heartbeat row set to the database's clock (inside a write transaction).
  void upsert_heartbeat(std::int64_t trial_id) {
    auto q = conn_.stmt(
        "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?, ?) "
        "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat");
    q.bind(1, trial_id).bind(2, detail::sql_datetime(conn_.db_now())).run();
  }

  StudyInfo study_info(std::int64_t study_id) {
    StudyInfo info;
    {
      auto q = conn_.stmt("SELECT study_name FROM studies WHERE study_id = ?");
      q.bind(1, study_id);
      qnum::detail::require(q.step(), "no study with id ", study_id, " in ", url());
      info.study_id = study_id;
      info.name = q.text(0);
      q.run();
    }
    auto d = conn_.stmt("SELECT direction FROM study_directions WHERE study_id = ? ORDER BY objective");
    d.bind(1, study_id);
    while (d.step()) info.directions.push_back(parse_direction(d.text(0)));
    return info;
  }
  // The trial's study, state and number; the row stays locked until the transaction ends
  // where the connection supports row locks (a WAITING trial is claimed by one worker).
  TrialHead trial_head(std::int64_t trial_id) {
    auto q =
        conn_.stmt(std::string("SELECT study_id, state, number FROM trials WHERE trial_id = ?") + conn_.row_lock());
    q.bind(1, trial_id);
    qnum::detail::require(q.step(), "no trial with id ", trial_id, " in ", url());
    TrialHead h{q.i64(0), parse_trial_state(q.text(1)), q.i64(2)};
    q.run();
    return h;
  }
  void check_updatable(std::int64_t number, TrialState state) const {
    qnum::detail::require(!is_finished(state), "trial ", number, " is already finished (", to_string(state),
                          ") and cannot be updated");
  }
  void insert_param(std::int64_t trial_id, const std::string& name, double internal, const Distribution& d) {
    auto q = conn_.stmt(
        "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, "
        "distribution_json = excluded.distribution_json");
    q.bind(1, trial_id).bind(2, name).bind(3, internal).bind(4, distribution_to_json(d)).run();
  }
  void insert_value(std::int64_t trial_id, std::int64_t objective, double v) {
    auto q = conn_.stmt(
        "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (trial_id, objective) DO UPDATE SET value = excluded.value, "
        "value_type = excluded.value_type");
    q.bind(1, trial_id).bind(2, objective);
    if (std::isfinite(v))
      q.bind(3, v);
    else
      q.bind_null(3);
    q.bind(4, detail::value_type(v, false)).run();
  }
  void upsert_intermediate(std::int64_t trial_id, std::int64_t step, double v) {
    auto q = conn_.stmt(
        "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (trial_id, step) DO UPDATE SET intermediate_value = "
        "excluded.intermediate_value, intermediate_value_type = excluded.intermediate_value_type");
    q.bind(1, trial_id).bind(2, step);
    if (std::isfinite(v))
      q.bind(3, v);
    else
      q.bind_null(3);
    q.bind(4, detail::value_type(v, true)).run();
  }
  void upsert_attr(const std::string& table, const std::string& id_column, std::int64_t id, const std::string& key,
                   const nlohmann::json& value) {
    auto q = conn_.stmt("INSERT INTO " + table + " (" + id_column + ", \"key\", value_json) VALUES (?, ?, ?) " +
                        "ON CONFLICT (" + id_column + ", \"key\") DO UPDATE SET value_json = excluded.value_json");
    q.bind(1, id).bind(2, key).bind(3, python_json_dumps(value)).run();
  }
  nlohmann::json attrs(const std::string& table, const std::string& id_column, std::int64_t id) {
    nlohmann::json out = nlohmann::json::object();
    auto q = conn_.stmt("SELECT \"key\", value_json FROM " + table + " WHERE " + id_column + " = ?");
    q.bind(1, id);
    while (q.step()) out[q.text(0)] = python_json_loads(q.text(1));
    return out;
  }

  // Trials matching `where` (on alias t, with `key` as its one placeholder if given) with
  // all their rows, ordered by number.
  std::vector<FrozenTrial> load_trials(const std::string& where, std::optional<std::int64_t> key,
                                       const std::vector<TrialState>& states) {
    std::vector<FrozenTrial> out;
    std::unordered_map<std::int64_t, std::size_t> index;
    {
      auto q = conn_.stmt(
          "SELECT t.trial_id, t.number, t.state, t.datetime_start, t.datetime_complete FROM trials t "
          "WHERE " +
          where + " ORDER BY t.number, t.trial_id");
      if (key) q.bind(1, *key);
      while (q.step()) {
        const auto state = parse_trial_state(q.text(2));
        if (!states.empty() && std::find(states.begin(), states.end(), state) == states.end()) continue;
        FrozenTrial t;
        t.trial_id = q.i64(0);
        t.number = q.i64(1);
        t.state = state;
        if (!q.is_null(3)) t.datetime_start = detail::parse_sql_datetime(q.text(3));
        if (!q.is_null(4)) t.datetime_complete = detail::parse_sql_datetime(q.text(4));
        index[t.trial_id] = out.size();
        out.push_back(std::move(t));
      }
    }
    if (out.empty()) return out;
    auto each = [&](const std::string& sql, auto&& fn) {
      auto q = conn_.stmt(sql + " JOIN trials t ON x.trial_id = t.trial_id WHERE " + where);
      if (key) q.bind(1, *key);
      while (q.step()) {
        const auto it = index.find(q.i64(0));
        if (it != index.end()) fn(out[it->second], q);
      }
    };
    each("SELECT x.trial_id, x.param_name, x.param_value, x.distribution_json FROM trial_params x",
         [](FrozenTrial& t, auto& q) {
           t.params[q.text(1)] = q.f64(2);
           t.distributions.insert_or_assign(q.text(1), distribution_from_json(q.text(3)));
         });
    std::map<std::int64_t, std::map<std::int64_t, double>> values;
    each("SELECT x.trial_id, x.objective, x.value, x.value_type FROM trial_values x",
         [&](FrozenTrial& t, auto& q) { values[t.trial_id][q.i64(1)] = detail::value_from(q.opt_f64(2), q.text(3)); });
    for (auto& [id, byobj] : values) {
      auto& t = out[index[id]];
      for (const auto& [obj, v] : byobj) t.values.push_back(v);
    }
    each(
        "SELECT x.trial_id, x.step, x.intermediate_value, x.intermediate_value_type FROM trial_intermediate_values x",
        [](FrozenTrial& t, auto& q) { t.intermediate_values[q.i64(1)] = detail::value_from(q.opt_f64(2), q.text(3)); });
    each("SELECT x.trial_id, x.\"key\", x.value_json FROM trial_user_attributes x",
         [](FrozenTrial& t, auto& q) { t.user_attrs[q.text(1)] = python_json_loads(q.text(2)); });
    each("SELECT x.trial_id, x.\"key\", x.value_json FROM trial_system_attributes x",
         [](FrozenTrial& t, auto& q) { t.system_attrs[q.text(1)] = python_json_loads(q.text(2)); });
    return out;
  }

  std::mutex cache_mutex_;
  std::unordered_map<std::int64_t, std::shared_ptr<const FrozenTrial>> cache_;  // finished trials by id
};

}  // namespace detail

}  // namespace qnum::search
