// SqliteStorage: studies in one SQLite file with Optuna's RDB schema (optuna/storages/_rdb/
// models.py; alembic revision v3.2.0.a, schema_version 12 — unchanged from Optuna 3.2 to
// 5.0), so optuna.load_study(storage="sqlite:///file.db") reads what qnum writes and qnum
// reads what Optuna writes. Table and column names, enum names (RUNNING, MINIMIZE, FINITE,
// INF_POS, ...), naive-UTC datetimes and json.dumps-formatted JSON are Optuna's.
// Several processes can share one file: WAL journal, a busy timeout, and one IMMEDIATE
// transaction per operation, so trial numbers (the count of the study's earlier trials,
// computed inside the transaction that inserts the trial) never repeat.
// Needs SQLite 3 (Debian libsqlite3-dev); the build defines QNUM_HAVE_SQLITE when found.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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

// Optuna's DDL as SQLAlchemy emits it for SQLite (from an Optuna-created database).
inline constexpr const char* kOptunaSchema[] = {
    "CREATE TABLE IF NOT EXISTS studies (\n\tstudy_id INTEGER NOT NULL, \n\tstudy_name VARCHAR(512) NOT NULL, \n\t"
    "PRIMARY KEY (study_id)\n)",
    "CREATE UNIQUE INDEX IF NOT EXISTS ix_studies_study_name ON studies (study_name)",
    "CREATE TABLE IF NOT EXISTS version_info (\n\tversion_info_id INTEGER NOT NULL, \n\tschema_version INTEGER, \n\t"
    "library_version VARCHAR(256), \n\tPRIMARY KEY (version_info_id), \n\tCHECK (version_info_id=1)\n)",
    "CREATE TABLE IF NOT EXISTS study_directions (\n\tstudy_direction_id INTEGER NOT NULL, \n\tdirection VARCHAR(8) "
    "NOT "
    "NULL, \n\tstudy_id INTEGER NOT NULL, \n\tobjective INTEGER NOT NULL, \n\tPRIMARY KEY (study_direction_id), \n\t"
    "UNIQUE (study_id, objective), \n\tFOREIGN KEY(study_id) REFERENCES studies (study_id)\n)",
    "CREATE TABLE IF NOT EXISTS study_user_attributes (\n\tstudy_user_attribute_id INTEGER NOT NULL, \n\tstudy_id "
    "INTEGER, \n\t\"key\" VARCHAR(512), \n\tvalue_json TEXT, \n\tPRIMARY KEY (study_user_attribute_id), \n\tUNIQUE "
    "(study_id, \"key\"), \n\tFOREIGN KEY(study_id) REFERENCES studies (study_id)\n)",
    "CREATE TABLE IF NOT EXISTS study_system_attributes (\n\tstudy_system_attribute_id INTEGER NOT NULL, \n\tstudy_id "
    "INTEGER, \n\t\"key\" VARCHAR(512), \n\tvalue_json TEXT, \n\tPRIMARY KEY (study_system_attribute_id), \n\tUNIQUE "
    "(study_id, \"key\"), \n\tFOREIGN KEY(study_id) REFERENCES studies (study_id)\n)",
    "CREATE TABLE IF NOT EXISTS trials (\n\ttrial_id INTEGER NOT NULL, \n\tnumber INTEGER, \n\tstudy_id INTEGER, \n\t"
    "state VARCHAR(8) NOT NULL, \n\tdatetime_start DATETIME, \n\tdatetime_complete DATETIME, \n\tPRIMARY KEY "
    "(trial_id), \n\tFOREIGN KEY(study_id) REFERENCES studies (study_id)\n)",
    "CREATE INDEX IF NOT EXISTS ix_trials_study_id ON trials (study_id)",
    "CREATE TABLE IF NOT EXISTS trial_user_attributes (\n\ttrial_user_attribute_id INTEGER NOT NULL, \n\ttrial_id "
    "INTEGER, \n\t\"key\" VARCHAR(512), \n\tvalue_json TEXT, \n\tPRIMARY KEY (trial_user_attribute_id), \n\tUNIQUE "
    "(trial_id, \"key\"), \n\tFOREIGN KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS trial_system_attributes (\n\ttrial_system_attribute_id INTEGER NOT NULL, \n\ttrial_id "
    "INTEGER, \n\t\"key\" VARCHAR(512), \n\tvalue_json TEXT, \n\tPRIMARY KEY (trial_system_attribute_id), \n\tUNIQUE "
    "(trial_id, \"key\"), \n\tFOREIGN KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS trial_params (\n\tparam_id INTEGER NOT NULL, \n\ttrial_id INTEGER, \n\tparam_name "
    "VARCHAR(512), \n\tparam_value FLOAT, \n\tdistribution_json TEXT, \n\tPRIMARY KEY (param_id), \n\tUNIQUE "
    "(trial_id, param_name), \n\tFOREIGN KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS trial_values (\n\ttrial_value_id INTEGER NOT NULL, \n\ttrial_id INTEGER NOT NULL, \n\t"
    "objective INTEGER NOT NULL, \n\tvalue FLOAT, \n\tvalue_type VARCHAR(7) NOT NULL, \n\tPRIMARY KEY "
    "(trial_value_id), \n\tUNIQUE (trial_id, objective), \n\tFOREIGN KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS trial_intermediate_values (\n\ttrial_intermediate_value_id INTEGER NOT NULL, \n\t"
    "trial_id INTEGER NOT NULL, \n\tstep INTEGER NOT NULL, \n\tintermediate_value FLOAT, \n\tintermediate_value_type "
    "VARCHAR(7) NOT NULL, \n\tPRIMARY KEY (trial_intermediate_value_id), \n\tUNIQUE (trial_id, step), \n\tFOREIGN "
    "KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS trial_heartbeats (\n\ttrial_heartbeat_id INTEGER NOT NULL, \n\ttrial_id INTEGER NOT "
    "NULL, \n\theartbeat DATETIME NOT NULL, \n\tPRIMARY KEY (trial_heartbeat_id), \n\tUNIQUE (trial_id), \n\tFOREIGN "
    "KEY(trial_id) REFERENCES trials (trial_id)\n)",
    "CREATE TABLE IF NOT EXISTS alembic_version (\n\tversion_num VARCHAR(32) NOT NULL, \n\tCONSTRAINT "
    "alembic_version_pkc PRIMARY KEY (version_num)\n)",
};

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
inline std::optional<TimePoint> parse_sql_datetime(const std::string& s) {
  std::tm tm{};
  int y, mo, d, h, mi, sec;
  if (std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &sec) != 6) return std::nullopt;
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
  long long micro = 0;
  if (const auto dot = s.find('.'); dot != std::string::npos) {
    std::string f = s.substr(dot + 1, 6);
    while (f.size() < 6) f += '0';
    micro = std::atoll(f.c_str());
  }
  const auto secs = static_cast<long long>(timegm(&tm));
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

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) != SQLITE_OK)
      qnum::detail::fail("SQLite: ", sqlite3_errmsg(db), " in: ", sql.substr(0, 120));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind(int i, int v) { return check(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  Stmt& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bind_null(int i) { return check(sqlite3_bind_null(s_, i)); }
  Stmt& bind(int i, std::optional<double> v) { return v ? bind(i, *v) : bind_null(i); }

  /// Steps once: true when a row is available.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    qnum::detail::fail("SQLite: ", sqlite3_errmsg(db_));
  }
  void run() {
    while (step()) {
    }
  }
  std::int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  double f64(int c) const { return sqlite3_column_double(s_, c); }
  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::optional<double> opt_f64(int c) const { return is_null(c) ? std::nullopt : std::optional<double>(f64(c)); }
  std::string text(int c) const {
    const auto* p = sqlite3_column_text(s_, c);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s_, c)))
             : std::string();
  }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) qnum::detail::fail("SQLite: ", sqlite3_errmsg(db_));
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

}  // namespace detail

class SqliteStorage final : public Storage {
 public:
  /// Opens (creating when allowed and missing) the database file. An error names the file
  /// when it cannot be opened, is not a database, or holds another Optuna schema revision;
  /// such a file is left as it was.
  explicit SqliteStorage(const std::filesystem::path& path, bool create_if_missing = true, int busy_timeout_ms = 60000)
      : path_(path), url_("sqlite:///" + path.string()) {
    const bool existed = std::filesystem::exists(path);
    if (!existed && !create_if_missing) qnum::detail::fail("cannot open ", url_, ": no such database file");
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create_if_missing ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path.string().c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      qnum::detail::fail("cannot open ", url_, ": ", msg);
    }
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    std::string error;
    // Workers starting together race to set up a new file (the WAL switch needs the file to
    // themselves): a busy or locked database is retried, anything else is reported. The file
    // is never removed on failure — another process may be using it.
    for (int attempt = 0;; ++attempt) {
      try {
        init_schema(existed);
        break;
      } catch (const qnum::Error& e) {
        const int code = sqlite3_errcode(db_);
        const std::string what = e.what();
        const bool busy = code == SQLITE_BUSY || code == SQLITE_LOCKED || what.find("is locked") != std::string::npos ||
                          what.find("busy") != std::string::npos;
        if (busy && attempt < 200) {
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
          continue;
        }
        error = e.what();
        if (error.rfind("cannot", 0) != 0) error = "cannot use " + url_ + ": " + sqlite3_errmsg(db_);
        break;
      }
    }
    if (!error.empty()) {
      sqlite3_close(db_);
      db_ = nullptr;
      qnum::detail::fail(error);
    }
  }
  ~SqliteStorage() override {
    if (db_) sqlite3_close(db_);
  }
  SqliteStorage(const SqliteStorage&) = delete;
  SqliteStorage& operator=(const SqliteStorage&) = delete;

  // ---- studies
  std::int64_t create_new_study(const std::vector<StudyDirection>& directions, const std::string& name) override {
    detail::check_new_study(directions, name);
    return write([&] {
      {
        detail::Stmt q(db_, "SELECT study_id FROM studies WHERE study_name = ?");
        q.bind(1, name);
        qnum::detail::require(!q.step(), "study '", name, "' already exists in ", url_);
      }
      detail::Stmt ins(db_, "INSERT INTO studies (study_name) VALUES (?)");
      ins.bind(1, name).run();
      const std::int64_t id = sqlite3_last_insert_rowid(db_);
      for (std::size_t i = 0; i < directions.size(); ++i) {
        detail::Stmt d(db_, "INSERT INTO study_directions (direction, study_id, objective) VALUES (?, ?, ?)");
        d.bind(1, std::string(to_string(directions[i]))).bind(2, id).bind(3, static_cast<std::int64_t>(i)).run();
      }
      return id;
    });
  }
  std::optional<StudyInfo> find_study(const std::string& name) override {
    return read([&]() -> std::optional<StudyInfo> {
      detail::Stmt q(db_, "SELECT study_id FROM studies WHERE study_name = ?");
      q.bind(1, name);
      if (!q.step()) return std::nullopt;
      return study_info(q.i64(0));
    });
  }
  StudyInfo get_study(std::int64_t study_id) override {
    return read([&] { return study_info(study_id); });
  }
  std::vector<StudyInfo> get_all_studies() override {
    return read([&] {
      std::vector<StudyInfo> out;
      std::vector<std::int64_t> ids;
      detail::Stmt q(db_, "SELECT study_id FROM studies ORDER BY study_id");
      while (q.step()) ids.push_back(q.i64(0));
      for (const auto id : ids) out.push_back(study_info(id));
      return out;
    });
  }
  void set_study_user_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    write([&] { upsert_attr("study_user_attributes", "study_id", study_id, key, value); });
  }
  void set_study_system_attr(std::int64_t study_id, const std::string& key, const nlohmann::json& value) override {
    write([&] { upsert_attr("study_system_attributes", "study_id", study_id, key, value); });
  }
  nlohmann::json get_study_user_attrs(std::int64_t study_id) override {
    return read([&] { return attrs("study_user_attributes", "study_id", study_id); });
  }
  nlohmann::json get_study_system_attrs(std::int64_t study_id) override {
    return read([&] { return attrs("study_system_attributes", "study_id", study_id); });
  }

  // ---- trials
  std::int64_t create_new_trial(std::int64_t study_id, const FrozenTrial* templ) override {
    return write([&] {
      study_info(study_id);  // exists
      detail::Stmt ins(db_,
                       "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) "
                       "VALUES (NULL, ?, 'RUNNING', ?, ?)");
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
      ins.run();
      const std::int64_t trial_id = sqlite3_last_insert_rowid(db_);
      // Optuna's number: how many trials of the study came before, inside this transaction.
      detail::Stmt count(db_, "SELECT count(trial_id) FROM trials WHERE study_id = ? AND trial_id < ?");
      count.bind(1, study_id).bind(2, trial_id).step();
      const std::int64_t number = count.i64(0);
      detail::Stmt upd(db_, "UPDATE trials SET number = ? WHERE trial_id = ?");
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
        detail::Stmt st(db_, "UPDATE trials SET state = ? WHERE trial_id = ?");
        st.bind(1, std::string(to_string(templ->state))).bind(2, trial_id).run();
      }
      return trial_id;
    });
  }
  void set_trial_param(std::int64_t trial_id, const std::string& name, double internal,
                       const Distribution& distribution) override {
    write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      detail::Stmt prev(db_,
                        "SELECT p.distribution_json FROM trial_params p JOIN trials t ON p.trial_id = t.trial_id "
                        "WHERE t.study_id = ? AND p.param_name = ? LIMIT 1");
      prev.bind(1, study_id).bind(2, name);
      if (prev.step()) check_distribution_compatibility(name, distribution_from_json(prev.text(0)), distribution);
      insert_param(trial_id, name, internal, distribution);
    });
  }
  void set_trial_intermediate_value(std::int64_t trial_id, std::int64_t step, double value) override {
    write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_intermediate(trial_id, step, value);
    });
  }
  bool set_trial_state_values(std::int64_t trial_id, TrialState state, const std::vector<double>& values) override {
    return write([&] {
      const auto [study_id, old_state, number] = trial_head(trial_id);
      check_updatable(number, old_state);
      if (state == TrialState::running && old_state != TrialState::waiting) return false;
      for (std::size_t i = 0; i < values.size(); ++i) insert_value(trial_id, static_cast<std::int64_t>(i), values[i]);
      if (state == TrialState::running) {
        detail::Stmt u(db_, "UPDATE trials SET datetime_start = ? WHERE trial_id = ?");
        u.bind(1, detail::sql_datetime(now())).bind(2, trial_id).run();
      }
      if (is_finished(state)) {
        detail::Stmt u(db_, "UPDATE trials SET datetime_complete = ? WHERE trial_id = ?");
        u.bind(1, detail::sql_datetime(now())).bind(2, trial_id).run();
      }
      detail::Stmt u(db_, "UPDATE trials SET state = ? WHERE trial_id = ?");
      u.bind(1, std::string(to_string(state))).bind(2, trial_id).run();
      return true;
    });
  }
  void set_trial_user_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_attr("trial_user_attributes", "trial_id", trial_id, key, value);
    });
  }
  void set_trial_system_attr(std::int64_t trial_id, const std::string& key, const nlohmann::json& value) override {
    write([&] {
      const auto [study_id, state, number] = trial_head(trial_id);
      check_updatable(number, state);
      upsert_attr("trial_system_attributes", "trial_id", trial_id, key, value);
    });
  }
  FrozenTrial get_trial(std::int64_t trial_id) override {
    return read([&] {
      auto v = load_trials("t.trial_id = ?", trial_id, {});
      qnum::detail::require(!v.empty(), "no trial with id ", trial_id, " in ", url_);
      return std::move(v[0]);
    });
  }
  std::vector<FrozenTrial> get_all_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    return read([&] { return load_trials("t.study_id = ?", study_id, states); });
  }
  std::int64_t get_n_trials(std::int64_t study_id, const std::vector<TrialState>& states) override {
    return read([&] {
      std::int64_t n = 0;
      detail::Stmt q(db_, "SELECT state FROM trials WHERE study_id = ?");
      q.bind(1, study_id);
      while (q.step())
        if (states.empty() || std::find(states.begin(), states.end(), parse_trial_state(q.text(0))) != states.end())
          ++n;
      return n;
    });
  }

  std::int64_t claim_grid_id(std::int64_t study_id, std::int64_t trial_id, const nlohmann::json& search_space,
                             std::int64_t preferred, const std::vector<std::int64_t>& order) override {
    return write([&] {
      detail::Stmt q(db_,
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
          h.grid = v.get<std::int64_t>();
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
    write([&] {
      detail::Stmt q(db_,
                     "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?, ?) "
                     "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat");
      q.bind(1, trial_id).bind(2, detail::sql_datetime(now())).run();
    });
  }
  std::vector<std::int64_t> get_stale_trial_ids(std::int64_t study_id, double grace_seconds) override {
    return read([&] {
      std::vector<std::int64_t> out;
      const auto t_now = now();
      detail::Stmt q(db_,
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

  std::string url() const override { return url_; }

 private:
  struct TrialHead {
    std::int64_t study_id;
    TrialState state;
    std::int64_t number;
  };

  // One IMMEDIATE transaction (the write lock is taken up front, so two writers never
  // deadlock upgrading read locks); rolled back on any error.
  template <class F>
  auto write(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    begin("BEGIN IMMEDIATE");
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        exec("COMMIT");
      } else {
        auto r = f();
        exec("COMMIT");
        return r;
      }
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  // A read snapshot (deferred transaction): several SELECTs see one state of the file.
  template <class F>
  auto read(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    begin("BEGIN");
    try {
      auto r = f();
      exec("COMMIT");
      return r;
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  void begin(const char* sql) {
    // The busy timeout covers lock waits; a few retries cover SQLITE_BUSY returned at once
    // (e.g. while another connection recovers the WAL).
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 50)
        qnum::detail::fail("SQLite ", url_, ": ", sqlite3_errmsg(db_));
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + 10 * attempt));
    }
  }
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      qnum::detail::fail("SQLite ", url_, ": ", msg);
    }
  }

  void init_schema(bool existed) {
    // Reading first: a file that is not a database fails here, before anything is written.
    bool has_tables = false;
    {
      detail::Stmt q(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'");
      q.step();
      has_tables = q.i64(0) > 0;
    }
    if (has_tables) {
      detail::Stmt q(db_, "SELECT version_num FROM alembic_version");
      const std::string rev = q.step() ? q.text(0) : std::string();
      qnum::detail::require(rev == kOptunaAlembicRevision, "cannot use ", url_, ": its Optuna schema revision is '",
                            rev, "', qnum reads and writes ", kOptunaAlembicRevision,
                            " (Optuna >= 3.2; `optuna storage upgrade` migrates older files)");
    } else if (existed) {
      detail::Stmt q(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
      q.step();
      qnum::detail::require(q.i64(0) == 0, "cannot use ", url_,
                            ": it is an SQLite database but not an Optuna/qnum study database");
    }
    {
      // WAL lets readers run beside one writer; it is a property of the file, kept by every
      // later connection (Optuna's own connections included).
      detail::Stmt q(db_, "PRAGMA journal_mode=WAL");
      q.step();
    }
    {
      // With WAL, NORMAL syncs at checkpoints only: a killed process loses nothing, an OS
      // crash may lose the last transactions; FULL costs an fsync per trial update.
      detail::Stmt q(db_, "PRAGMA synchronous=NORMAL");
      q.run();
    }
    if (has_tables) return;
    write([&] {
      for (const char* ddl : detail::kOptunaSchema) exec(ddl);
      detail::Stmt v(db_,
                     "INSERT OR IGNORE INTO version_info (version_info_id, schema_version, library_version) "
                     "VALUES (1, ?, ?)");
      v.bind(1, kOptunaSchemaVersion).bind(2, kOptunaVerifiedVersion).run();
      detail::Stmt a(db_, "SELECT count(*) FROM alembic_version");
      a.step();
      if (a.i64(0) == 0) {
        detail::Stmt ins(db_, "INSERT INTO alembic_version (version_num) VALUES (?)");
        ins.bind(1, kOptunaAlembicRevision).run();
      }
    });
  }

  StudyInfo study_info(std::int64_t study_id) {
    StudyInfo info;
    {
      detail::Stmt q(db_, "SELECT study_name FROM studies WHERE study_id = ?");
      q.bind(1, study_id);
      qnum::detail::require(q.step(), "no study with id ", study_id, " in ", url_);
      info.study_id = study_id;
      info.name = q.text(0);
    }
    detail::Stmt d(db_, "SELECT direction FROM study_directions WHERE study_id = ? ORDER BY objective");
    d.bind(1, study_id);
    while (d.step()) info.directions.push_back(parse_direction(d.text(0)));
    return info;
  }
  TrialHead trial_head(std::int64_t trial_id) {
    detail::Stmt q(db_, "SELECT study_id, state, number FROM trials WHERE trial_id = ?");
    q.bind(1, trial_id);
    qnum::detail::require(q.step(), "no trial with id ", trial_id, " in ", url_);
    return {q.i64(0), parse_trial_state(q.text(1)), q.i64(2)};
  }
  void check_updatable(std::int64_t number, TrialState state) const {
    qnum::detail::require(!is_finished(state), "trial ", number, " is already finished (", to_string(state),
                          ") and cannot be updated");
  }
  void insert_param(std::int64_t trial_id, const std::string& name, double internal, const Distribution& d) {
    detail::Stmt q(
        db_,
        "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, "
        "distribution_json = excluded.distribution_json");
    q.bind(1, trial_id).bind(2, name).bind(3, internal).bind(4, distribution_to_json(d)).run();
  }
  void insert_value(std::int64_t trial_id, std::int64_t objective, double v) {
    detail::Stmt q(db_,
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
    detail::Stmt q(
        db_,
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
    detail::Stmt q(db_, "INSERT INTO " + table + " (" + id_column + ", \"key\", value_json) VALUES (?, ?, ?) " +
                            "ON CONFLICT (" + id_column + ", \"key\") DO UPDATE SET value_json = excluded.value_json");
    q.bind(1, id).bind(2, key).bind(3, python_json_dumps(value)).run();
  }
  nlohmann::json attrs(const std::string& table, const std::string& id_column, std::int64_t id) {
    nlohmann::json out = nlohmann::json::object();
    detail::Stmt q(db_, "SELECT \"key\", value_json FROM " + table + " WHERE " + id_column + " = ?");
    q.bind(1, id);
    while (q.step()) out[q.text(0)] = python_json_loads(q.text(1));
    return out;
  }

  // Trials matching `where` (on alias t) with all their rows, ordered by number.
  std::vector<FrozenTrial> load_trials(const std::string& where, std::int64_t key,
                                       const std::vector<TrialState>& states) {
    std::vector<FrozenTrial> out;
    std::map<std::int64_t, std::size_t> index;
    {
      detail::Stmt q(db_,
                     "SELECT t.trial_id, t.number, t.state, t.datetime_start, t.datetime_complete FROM trials t "
                     "WHERE " +
                         where + " ORDER BY t.number, t.trial_id");
      q.bind(1, key);
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
      detail::Stmt q(db_, sql + " JOIN trials t ON x.trial_id = t.trial_id WHERE " + where);
      q.bind(1, key);
      while (q.step()) {
        const auto it = index.find(q.i64(0));
        if (it != index.end()) fn(out[it->second], q);
      }
    };
    each("SELECT x.trial_id, x.param_name, x.param_value, x.distribution_json FROM trial_params x",
         [](FrozenTrial& t, detail::Stmt& q) {
           t.params[q.text(1)] = q.f64(2);
           t.distributions.insert_or_assign(q.text(1), distribution_from_json(q.text(3)));
         });
    std::map<std::int64_t, std::map<std::int64_t, double>> values;
    each("SELECT x.trial_id, x.objective, x.value, x.value_type FROM trial_values x",
         [&](FrozenTrial& t, detail::Stmt& q) {
           values[t.trial_id][q.i64(1)] = detail::value_from(q.opt_f64(2), q.text(3));
         });
    for (auto& [id, byobj] : values) {
      auto& t = out[index[id]];
      for (const auto& [obj, v] : byobj) t.values.push_back(v);
    }
    each("SELECT x.trial_id, x.step, x.intermediate_value, x.intermediate_value_type FROM trial_intermediate_values x",
         [](FrozenTrial& t, detail::Stmt& q) {
           t.intermediate_values[q.i64(1)] = detail::value_from(q.opt_f64(2), q.text(3));
         });
    each("SELECT x.trial_id, x.\"key\", x.value_json FROM trial_user_attributes x",
         [](FrozenTrial& t, detail::Stmt& q) { t.user_attrs[q.text(1)] = python_json_loads(q.text(2)); });
    each("SELECT x.trial_id, x.\"key\", x.value_json FROM trial_system_attributes x",
         [](FrozenTrial& t, detail::Stmt& q) { t.system_attrs[q.text(1)] = python_json_loads(q.text(2)); });
    return out;
  }

  std::filesystem::path path_;
  std::string url_;
  sqlite3* db_ = nullptr;
  std::recursive_mutex mutex_;
};

}  // namespace qnum::search
