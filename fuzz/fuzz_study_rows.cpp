// Study rows read back from SQLite (search/rdb_storage.hpp): a study written by qnum (two
// trials with parameters, values, intermediate values, attributes and a heartbeat) whose
// cells are then overwritten by the input — up to 16 NUL-separated texts, one per column
// below, stored as SQLite text — and read back: studies, trials, attributes, stale trials,
// the trials table and a Study loaded from it. Decoding any cell either works or is a
// one-line qnum::Error.
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "qnum/search/sqlite_storage.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"

namespace fs = std::filesystem;
namespace qs = qnum::search;

namespace {

// The cells the input overwrites (each statement binds one text).
constexpr std::array<const char*, 16> kUpdates = {
    "UPDATE trials SET state = ? WHERE number = 0",
    "UPDATE trials SET datetime_start = ? WHERE number = 0",
    "UPDATE trials SET datetime_complete = ? WHERE number = 1",
    "UPDATE trial_params SET param_value = ? WHERE param_name = 'x'",
    "UPDATE trial_params SET distribution_json = ? WHERE param_name = 'c'",
    "UPDATE trial_params SET param_name = ? WHERE param_name = 'k'",
    "UPDATE trial_values SET value = ? WHERE trial_id = 1",
    "UPDATE trial_values SET value_type = ? WHERE trial_id = 2",
    "UPDATE trial_intermediate_values SET intermediate_value_type = ?",
    "UPDATE trial_user_attributes SET value_json = ?",
    "UPDATE trial_system_attributes SET value_json = ? WHERE key = 'fail_reason'",
    "UPDATE study_directions SET direction = ?",
    "UPDATE study_user_attributes SET value_json = ?",
    "UPDATE trials SET number = ? WHERE number = 1",
    "UPDATE trial_params SET distribution_json = ? WHERE param_name = 'x'",
    "UPDATE trial_heartbeats SET heartbeat = ?",
};

// A study with every kind of row, written once per process; each input starts from a copy.
fs::path template_db(const fs::path& dir) {
  const fs::path db = dir / "template.db";
  auto storage = qs::open_storage("sqlite:///" + db.string());
  qs::Study s(storage, "fuzz", {qs::StudyDirection::minimize});
  s.set_user_attr("note", "study attr");
  s.optimize(
      [](qs::Trial& t) {
        const double x = t.suggest_float("x", -1.0, 1.0);
        const auto k = t.suggest_int("k", 1, 4);
        const auto c = t.suggest_categorical("c", {qs::ParamValue(std::string("a")), qs::ParamValue(true)});
        t.set_user_attr("tag", std::to_string(k));
        t.report(x, 1);
        if (t.number() == 1) throw qnum::Error("failed on purpose");
        return x * x + static_cast<double>(k) + (std::holds_alternative<bool>(c) ? 1.0 : 0.0);
      },
      2);
  storage->record_heartbeat(1);
  return db;
}

// The database every input starts from: the template's rows with the input's cells written
// over them, through one connection held for the whole process. Before each input it puts
// back every table's rows from the template (attached), in one transaction, so no input sees
// another's cells. Copying the file per input instead made SQLite open the copy twice and
// parse its schema each time (perf: the harness's own connection was a third of the time);
// qnum's storage, the code under test, still opens the file afresh per input.
class CaseDb {
 public:
  CaseDb(const fs::path& templ, const fs::path& db) {
    fs::copy_file(templ, db, fs::copy_options::overwrite_existing);
    qnum::fuzz::check(sqlite3_open(db.string().c_str(), &db_) == SQLITE_OK, "open the case database");
    sqlite3_stmt* attach = prepare("ATTACH DATABASE ? AS tmpl");
    sqlite3_bind_text(attach, 1, templ.c_str(), -1, SQLITE_TRANSIENT);
    qnum::fuzz::check(sqlite3_step(attach) == SQLITE_DONE, "attach the template");
    sqlite3_finalize(attach);
    std::vector<std::string> tables;
    sqlite3_stmt* q = prepare("SELECT name FROM tmpl.sqlite_master WHERE type = 'table' AND name != 'sqlite_stat1'");
    while (sqlite3_step(q) == SQLITE_ROW) tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
    sqlite3_finalize(q);
    for (const auto& t : tables) {
      restore_.push_back(prepare("DELETE FROM main.\"" + t + "\""));
      restore_.push_back(prepare("INSERT INTO main.\"" + t + "\" SELECT * FROM tmpl.\"" + t + "\""));
    }
    for (const char* sql : kUpdates) updates_.push_back(prepare(sql));
  }
  ~CaseDb() {
    for (auto* st : restore_) sqlite3_finalize(st);
    for (auto* st : updates_) sqlite3_finalize(st);
    sqlite3_close(db_);
  }
  CaseDb(const CaseDb&) = delete;
  CaseDb& operator=(const CaseDb&) = delete;

  void restore() {
    exec("BEGIN IMMEDIATE");
    for (auto* st : restore_) {
      qnum::fuzz::check(sqlite3_step(st) == SQLITE_DONE, "restore the template's rows");
      sqlite3_reset(st);
    }
    exec("COMMIT");
  }
  // Cell `i` (kUpdates) := text; a constraint failure (NOT NULL, UNIQUE) leaves it as it was.
  void update(std::size_t i, std::string_view text) {
    sqlite3_stmt* st = updates_[i];
    sqlite3_bind_text(st, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }

 private:
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    qnum::fuzz::check(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK, "prepare");
    return st;
  }
  void exec(const char* sql) { qnum::fuzz::check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK, sql); }

  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> restore_, updates_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = [] {
    const fs::path d = qnum::fuzz::scratch_dir() / ("qnum-fuzz-study-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  static const fs::path db = dir / "case.db";
  static CaseDb case_db(template_db(dir), db);

  case_db.restore();
  std::string_view text = qnum::fuzz::as_text(data, size);
  for (std::size_t i = 0; i < kUpdates.size() && !text.empty(); ++i) {
    const auto end = text.find('\0');
    const auto cell = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (cell != "-") case_db.update(i, cell);  // "-": leave this cell as written
  }

  qnum::fuzz::expect_clean([&] {
    auto storage = qs::open_storage("sqlite:///" + db.string(), false);
    for (const auto& info : storage->get_all_studies()) {
      (void)storage->get_study_user_attrs(info.study_id);
      (void)storage->get_study_system_attrs(info.study_id);
      for (const auto& t : storage->get_all_trials(info.study_id)) {
        qnum::fuzz::check(t.params.size() == t.distributions.size(), "a distribution per parameter");
        (void)storage->get_trial(t.trial_id);
      }
      (void)storage->get_stale_trial_ids(info.study_id, 0.0);
    }
    auto study = qs::Study::load(storage, "fuzz");
    (void)study.trials_table().to_csv();
  });
  return 0;
}
