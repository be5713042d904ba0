// PostgresStorage: studies in a PostgreSQL database with Optuna's RDB schema (rdb_storage.hpp;
// DDL as SQLAlchemy emits it for PostgreSQL: SERIAL keys, native enum types studydirection,
// trialstate, trialvaluetype, trialintermediatevaluetype), through libpq. Workers on several
// machines share one study: every operation is one transaction; trial numbering and grid
// claims lock the study's row (SELECT ... FOR UPDATE), state changes lock the trial's row,
// so numbers never repeat, a grid point is claimed once and a WAITING trial is started once.
// Heartbeats use the server's clock, so machines with skewed clocks agree on staleness.
// Needs libpq (Debian libpq-dev); the build defines QNUM_HAVE_POSTGRES when found.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/rdb_storage.hpp"

namespace qnum::search {

namespace detail {

// Optuna's DDL for PostgreSQL (compared with pg_dump of an Optuna 5.0-created database).
// The enum types are created only if missing (CREATE TYPE has no IF NOT EXISTS).
inline constexpr const char* kOptunaPostgresSchema[] = {
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'studydirection') THEN "
    "CREATE TYPE studydirection AS ENUM ('NOT_SET', 'MINIMIZE', 'MAXIMIZE'); END IF; "
    "IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'trialstate') THEN "
    "CREATE TYPE trialstate AS ENUM ('RUNNING', 'COMPLETE', 'PRUNED', 'FAIL', 'WAITING'); END IF; "
    "IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'trialvaluetype') THEN "
    "CREATE TYPE trialvaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG'); END IF; "
    "IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'trialintermediatevaluetype') THEN "
    "CREATE TYPE trialintermediatevaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG', 'NAN'); END IF; END $$",
    "CREATE TABLE IF NOT EXISTS studies (study_id SERIAL NOT NULL, study_name VARCHAR(512) NOT NULL, "
    "PRIMARY KEY (study_id))",
    "CREATE UNIQUE INDEX IF NOT EXISTS ix_studies_study_name ON studies (study_name)",
    "CREATE TABLE IF NOT EXISTS version_info (version_info_id INTEGER NOT NULL, schema_version INTEGER, "
    "library_version VARCHAR(256), PRIMARY KEY (version_info_id), CHECK (version_info_id=1))",
    "CREATE TABLE IF NOT EXISTS study_directions (study_direction_id SERIAL NOT NULL, direction studydirection NOT "
    "NULL, study_id INTEGER NOT NULL, objective INTEGER NOT NULL, PRIMARY KEY (study_direction_id), "
    "UNIQUE (study_id, objective), FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE TABLE IF NOT EXISTS study_user_attributes (study_user_attribute_id SERIAL NOT NULL, study_id INTEGER, "
    "key VARCHAR(512), value_json TEXT, PRIMARY KEY (study_user_attribute_id), UNIQUE (study_id, key), "
    "FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE TABLE IF NOT EXISTS study_system_attributes (study_system_attribute_id SERIAL NOT NULL, study_id "
    "INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (study_system_attribute_id), UNIQUE (study_id, key), "
    "FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE TABLE IF NOT EXISTS trials (trial_id SERIAL NOT NULL, number INTEGER, study_id INTEGER, state "
    "trialstate NOT NULL, datetime_start TIMESTAMP WITHOUT TIME ZONE, datetime_complete TIMESTAMP WITHOUT TIME "
    "ZONE, PRIMARY KEY (trial_id), FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE INDEX IF NOT EXISTS ix_trials_study_id ON trials (study_id)",
    "CREATE TABLE IF NOT EXISTS trial_user_attributes (trial_user_attribute_id SERIAL NOT NULL, trial_id INTEGER, "
    "key VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_user_attribute_id), UNIQUE (trial_id, key), "
    "FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS trial_system_attributes (trial_system_attribute_id SERIAL NOT NULL, trial_id "
    "INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_system_attribute_id), UNIQUE (trial_id, key), "
    "FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS trial_params (param_id SERIAL NOT NULL, trial_id INTEGER, param_name VARCHAR(512), "
    "param_value FLOAT, distribution_json TEXT, PRIMARY KEY (param_id), UNIQUE (trial_id, param_name), "
    "FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS trial_values (trial_value_id SERIAL NOT NULL, trial_id INTEGER NOT NULL, objective "
    "INTEGER NOT NULL, value FLOAT, value_type trialvaluetype NOT NULL, PRIMARY KEY (trial_value_id), "
    "UNIQUE (trial_id, objective), FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS trial_intermediate_values (trial_intermediate_value_id SERIAL NOT NULL, trial_id "
    "INTEGER NOT NULL, step INTEGER NOT NULL, intermediate_value FLOAT, intermediate_value_type "
    "trialintermediatevaluetype NOT NULL, PRIMARY KEY (trial_intermediate_value_id), UNIQUE (trial_id, step), "
    "FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS trial_heartbeats (trial_heartbeat_id SERIAL NOT NULL, trial_id INTEGER NOT NULL, "
    "heartbeat TIMESTAMP WITHOUT TIME ZONE NOT NULL, PRIMARY KEY (trial_heartbeat_id), UNIQUE (trial_id), "
    "FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32) NOT NULL, CONSTRAINT alembic_version_pkc "
    "PRIMARY KEY (version_num))",
};

// A statement with RdbStorage's interface: `?` placeholders become $1, $2, ...; parameters
// go as text (the server infers their types: enums, timestamps); the result is read as text.
class PgStmt {
 public:
  PgStmt(PGconn* conn, const std::string& sql, const std::string& url) : conn_(conn), url_(url) {
    int n = 0;
    for (const char c : sql)
      if (c == '?')
        sql_ += "$" + std::to_string(++n);
      else
        sql_ += c;
    values_.resize(static_cast<std::size_t>(n));
  }
  ~PgStmt() {
    if (res_) PQclear(res_);
  }
  PgStmt(const PgStmt&) = delete;
  PgStmt& operator=(const PgStmt&) = delete;

  PgStmt& bind(int i, std::int64_t v) { return set(i, std::to_string(v)); }
  PgStmt& bind(int i, int v) { return set(i, std::to_string(v)); }
  PgStmt& bind(int i, double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);  // exact round trip through float8
    return set(i, buf);
  }
  PgStmt& bind(int i, const std::string& v) { return set(i, v); }
  PgStmt& bind(int i, const char* v) { return set(i, std::string(v)); }
  PgStmt& bind_null(int i) {
    values_.at(static_cast<std::size_t>(i - 1)).reset();
    return *this;
  }
  PgStmt& bind(int i, std::optional<double> v) { return v ? bind(i, *v) : bind_null(i); }

  /// Executes on the first call; true while a row is available.
  bool step() {
    if (!res_) {
      execute();
      row_ = 0;
    } else {
      ++row_;
    }
    return row_ < PQntuples(res_);
  }
  void run() {
    while (step()) {
    }
  }
  std::int64_t i64(int c) const { return std::strtoll(cell(c), nullptr, 10); }
  double f64(int c) const { return std::strtod(cell(c), nullptr); }
  bool is_null(int c) const { return PQgetisnull(res_, row_, c) != 0; }
  std::optional<double> opt_f64(int c) const { return is_null(c) ? std::nullopt : std::optional<double>(f64(c)); }
  std::string text(int c) const { return std::string(cell(c), static_cast<std::size_t>(PQgetlength(res_, row_, c))); }

 private:
  PgStmt& set(int i, std::string v) {
    values_.at(static_cast<std::size_t>(i - 1)) = std::move(v);
    return *this;
  }
  const char* cell(int c) const { return PQgetvalue(res_, row_, c); }
  void execute() {
    std::vector<const char*> ptrs;
    for (const auto& v : values_) ptrs.push_back(v ? v->c_str() : nullptr);
    res_ = PQexecParams(conn_, sql_.c_str(), static_cast<int>(ptrs.size()), nullptr, ptrs.data(), nullptr, nullptr, 0);
    const auto status = PQresultStatus(res_);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(res_);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      qnum::detail::fail("PostgreSQL ", url_, ": ", msg, " in: ", sql_.substr(0, 120));
    }
  }

  PGconn* conn_;
  const std::string& url_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  PGresult* res_ = nullptr;
  int row_ = 0;
};

// One libpq connection with RdbStorage's connection interface.
class PgConn {
 public:
  explicit PgConn(const std::string& url) : url_(redact_url_password(url)) {
    // SQLAlchemy's driver suffix (postgresql+psycopg2://) is accepted so one URL serves
    // qnum and Optuna; libpq takes postgresql:// and postgres:// URIs.
    std::string conninfo = url;
    if (const auto plus = conninfo.find('+'), scheme = conninfo.find("://");
        plus != std::string::npos && scheme != std::string::npos && plus < scheme)
      conninfo.erase(plus, scheme - plus);
    conn_ = PQconnectdb(conninfo.c_str());
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = conn_ ? PQerrorMessage(conn_) : "out of memory";
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      for (auto& c : msg)
        if (c == '\n') c = ' ';
      PQfinish(conn_);
      conn_ = nullptr;
      qnum::detail::fail("cannot open ", url_, ": ", msg);
    }
    try {
      exec("SET client_min_messages = warning");
      exec("SET datestyle = 'ISO'");
      exec("SET extra_float_digits = 3");  // doubles come back exactly (servers before 12 need it)
      init_schema();
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
  }
  ~PgConn() {
    if (conn_) PQfinish(conn_);
  }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  PgStmt stmt(const std::string& sql) { return PgStmt(conn_, sql, url_); }

  // READ COMMITTED transactions; what must not interleave takes a row lock (below).
  template <class F>
  auto write(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    return transaction(f);
  }
  template <class F>
  auto read(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    return transaction(f);
  }
  // Study creation: one at a time, so a name taken meanwhile is seen (not a unique violation).
  void lock_studies() { exec("LOCK TABLE studies IN SHARE ROW EXCLUSIVE MODE"); }
  // Trial numbering and grid claims of one study, one at a time: later statements of the
  // transaction see everything committed before the lock was granted.
  void lock_study(std::int64_t study_id) {
    auto q = stmt("SELECT study_id FROM studies WHERE study_id = ? FOR UPDATE");
    q.bind(1, study_id).run();
  }
  const char* row_lock() const { return " FOR NO KEY UPDATE"; }
  TimePoint db_now() {
    auto q = stmt("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')");
    q.step();
    const auto t = parse_sql_datetime(q.text(0));
    qnum::detail::require(t.has_value(), "PostgreSQL ", url_, ": unreadable server time '", q.text(0), "'");
    return *t;
  }
  const std::string& url() const { return url_; }

 private:
  template <class F>
  auto transaction(F& f) -> decltype(f()) {
    if (depth_++ > 0) {  // nested (init_schema's write): part of the outer transaction
      struct Depth {
        int& d;
        ~Depth() { --d; }
      } guard{depth_};
      return f();
    }
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } guard{depth_};
    exec("BEGIN");
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
      PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
  }
  void exec(const char* sql) {
    PGresult* r = PQexec(conn_, sql);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(r);
      PQclear(r);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      qnum::detail::fail("PostgreSQL ", url_, ": ", msg);
    }
    PQclear(r);
  }

  void init_schema() {
    write([&] {
      // Workers starting together: one creates the tables, the others wait and then see them.
      exec("SELECT pg_advisory_xact_lock(7413220015)");
      bool has_tables = false;
      {
        auto q = stmt("SELECT to_regclass('alembic_version') IS NOT NULL");
        q.step();
        has_tables = q.text(0) == "t";
      }
      if (has_tables) {
        auto q = stmt("SELECT version_num FROM alembic_version");
        check_alembic_revision(url_, q.step() ? q.text(0) : std::string());
        return;
      }
      auto q = stmt("SELECT to_regclass('studies') IS NOT NULL OR to_regclass('trials') IS NOT NULL");
      q.step();
      qnum::detail::require(q.text(0) == "f", "cannot use ", url_,
                            ": it has study tables but no alembic_version (not an Optuna/qnum study database)");
      for (const char* ddl : kOptunaPostgresSchema) exec(ddl);
      auto v = stmt(
          "INSERT INTO version_info (version_info_id, schema_version, library_version) VALUES (1, ?, ?) "
          "ON CONFLICT DO NOTHING");
      v.bind(1, kOptunaSchemaVersion).bind(2, kOptunaVerifiedVersion).run();
      auto a = stmt("INSERT INTO alembic_version (version_num) VALUES (?) ON CONFLICT DO NOTHING");
      a.bind(1, kOptunaAlembicRevision).run();
    });
  }

  std::string url_;
  PGconn* conn_ = nullptr;
  std::recursive_mutex mutex_;
  int depth_ = 0;
};

}  // namespace detail

class PostgresStorage final : public detail::RdbStorage<detail::PgConn> {
 public:
  /// Connects to `postgresql://user:password@host:port/database` (also postgres://, a
  /// SQLAlchemy driver suffix such as postgresql+psycopg2://, and libpq's ?host=/socket/dir
  /// parameters) and creates Optuna's tables in an empty database. An error names the URL
  /// (without password) when the server cannot be reached or the schema is another one.
  explicit PostgresStorage(const std::string& url) : RdbStorage(url) {}
};

}  // namespace qnum::search
