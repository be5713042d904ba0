// open_storage(url): `memory`, `sqlite:///relative/file.db`, `sqlite:////absolute/file.db`,
// `postgresql://user:pass@host:port/db` (also postgres:// and postgresql+<driver>://) —
// SQLAlchemy's URL forms, as Optuna takes them.
#pragma once

#include <memory>
#include <string>

#include "qnum/core/error.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/storage.hpp"
#if defined(QNUM_HAVE_SQLITE)
#include "qnum/search/sqlite_storage.hpp"
#endif
#if defined(QNUM_HAVE_POSTGRES)
#include "qnum/search/postgres_storage.hpp"
#endif

namespace qnum::search {

/// The storage a URL names. `create_if_missing` = false makes a missing SQLite file an error
/// (for commands that only read).
inline std::shared_ptr<Storage> open_storage(const std::string& url, bool create_if_missing = true) {
  const std::string allowed =
      "allowed: memory, sqlite:///relative.db, sqlite:////absolute.db, postgresql://user:pass@host:port/db";
  if (url == "memory" || url == "memory://" || url == ":memory:") return std::make_shared<InMemoryStorage>();
  const std::string sqlite_prefix = "sqlite:///";
  if (url.rfind(sqlite_prefix, 0) == 0) {
    const std::string path = url.substr(sqlite_prefix.size());
    qnum::detail::require(!path.empty() && path != ":memory:", "storage URL '", url, "' names no database file (",
                          allowed, ")");
#if defined(QNUM_HAVE_SQLITE)
    return std::make_shared<SqliteStorage>(path, create_if_missing);
#else
    qnum::detail::fail("storage URL '", url,
                       "': this qnum was built without SQLite (install libsqlite3-dev and rebuild)");
#endif
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0 || url.rfind("postgresql+", 0) == 0) {
#if defined(QNUM_HAVE_POSTGRES)
    (void)create_if_missing;  // the server's database exists; Optuna's tables are created when missing
    return std::make_shared<PostgresStorage>(url);
#else
    qnum::detail::fail("storage URL '", detail::redact_url_password(url),
                       "': this qnum was built without PostgreSQL (install libpq-dev and rebuild)");
#endif
  }
  if (url.rfind("sqlite:", 0) == 0)
    qnum::detail::fail("storage URL '", url, "' is malformed: SQLite URLs have three slashes (", allowed, ")");
  qnum::detail::fail("unknown storage URL '", url, "' (", allowed, ")");
}

}  // namespace qnum::search
