// SqliteStorage: studies in one SQLite file with Optuna's RDB schema (rdb_storage.hpp;
// DDL as SQLAlchemy emits it for SQLite), so optuna.load_study(storage="sqlite:///file.db")
// reads what qnum writes and qnum reads what Optuna writes.
// Several processes can share one file: WAL journal, a busy timeout, and one IMMEDIATE
// transaction per operation, so trial numbers (the count of the study's earlier trials,
// computed inside the transaction that inserts the trial) never repeat.
// Needs SQLite >= 3.35 (RETURNING; Debian libsqlite3-dev); the build defines QNUM_HAVE_SQLITE.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/rdb_storage.hpp"

namespace qnum::search {

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

// One SQLite connection with RdbStorage's connection interface.
class SqliteConn {
 public:
  using Statement = Stmt;

  SqliteConn(const std::filesystem::path& path, bool create_if_missing, int busy_timeout_ms)
      : url_("sqlite:///" + path.string()) {
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
  ~SqliteConn() {
    if (db_) sqlite3_close(db_);
  }
  SqliteConn(const SqliteConn&) = delete;
  SqliteConn& operator=(const SqliteConn&) = delete;

  Stmt stmt(const std::string& sql) { return Stmt(db_, sql); }

  // One IMMEDIATE transaction (the write lock is taken up front, so two writers never
  // deadlock upgrading read locks); rolled back on any error.
  template <class F>
  auto write(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    begin("BEGIN IMMEDIATE");
    return finish(f);
  }
  // A read snapshot (deferred transaction): several SELECTs see one state of the file.
  template <class F>
  auto read(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    begin("BEGIN");
    return finish(f);
  }
  // The IMMEDIATE transaction already holds the file's only write lock.
  void lock_studies() {}
  void lock_study(std::int64_t) {}
  const char* row_lock() const { return ""; }
  TimePoint db_now() const { return now(); }  // one machine: its clock
  const std::string& url() const { return url_; }

 private:
  template <class F>
  auto finish(F& f) -> decltype(f()) {
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
      Stmt q(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'");
      q.step();
      has_tables = q.i64(0) > 0;
    }
    if (has_tables) {
      Stmt q(db_, "SELECT version_num FROM alembic_version");
      check_alembic_revision(url_, q.step() ? q.text(0) : std::string());
    } else if (existed) {
      Stmt q(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
      q.step();
      qnum::detail::require(q.i64(0) == 0, "cannot use ", url_,
                            ": it is an SQLite database but not an Optuna/qnum study database");
    }
    {
      // WAL lets readers run beside one writer; it is a property of the file, kept by every
      // later connection (Optuna's own connections included).
      Stmt q(db_, "PRAGMA journal_mode=WAL");
      q.step();
    }
    {
      // With WAL, NORMAL syncs at checkpoints only: a killed process loses nothing, an OS
      // crash may lose the last transactions; FULL costs an fsync per trial update.
      Stmt q(db_, "PRAGMA synchronous=NORMAL");
      q.run();
    }
    if (has_tables) return;
    write([&] {
      for (const char* ddl : kOptunaSchema) exec(ddl);
      Stmt v(db_,
             "INSERT OR IGNORE INTO version_info (version_info_id, schema_version, library_version) "
             "VALUES (1, ?, ?)");
      v.bind(1, kOptunaSchemaVersion).bind(2, kOptunaVerifiedVersion).run();
      Stmt a(db_, "SELECT count(*) FROM alembic_version");
      a.step();
      if (a.i64(0) == 0) {
        Stmt ins(db_, "INSERT INTO alembic_version (version_num) VALUES (?)");
        ins.bind(1, kOptunaAlembicRevision).run();
      }
    });
  }

  std::string url_;
  sqlite3* db_ = nullptr;
  std::recursive_mutex mutex_;
};

}  // namespace detail

class SqliteStorage final : public detail::RdbStorage<detail::SqliteConn> {
 public:
  /// Opens (creating when allowed and missing) the database file. An error names the file
  /// when it cannot be opened, is not a database, or holds another Optuna schema revision;
  /// such a file is left as it was.
  explicit SqliteStorage(const std::filesystem::path& path, bool create_if_missing = true, int busy_timeout_ms = 60000)
      : RdbStorage(path, create_if_missing, busy_timeout_ms) {}
};

}  // namespace qnum::search
