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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = [] {
    const fs::path d = qnum::fuzz::scratch_dir() / ("qnum-fuzz-study-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  static const fs::path templ = template_db(dir);
  const fs::path db = dir / "case.db";
  fs::copy_file(templ, db, fs::copy_options::overwrite_existing);

  sqlite3* raw = nullptr;
  qnum::fuzz::check(sqlite3_open(db.string().c_str(), &raw) == SQLITE_OK, "open the copy");
  std::string_view text = qnum::fuzz::as_text(data, size);
  for (std::size_t i = 0; i < kUpdates.size() && !text.empty(); ++i) {
    const auto end = text.find('\0');
    const auto cell = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (cell == "-") continue;  // leave this cell as written
    sqlite3_stmt* st = nullptr;
    qnum::fuzz::check(sqlite3_prepare_v2(raw, kUpdates[i], -1, &st, nullptr) == SQLITE_OK, "prepare");
    sqlite3_bind_text(st, 1, cell.data(), static_cast<int>(cell.size()), SQLITE_TRANSIENT);
    sqlite3_step(st);  // a constraint failure (NOT NULL, UNIQUE) leaves the cell as it was
    sqlite3_finalize(st);
  }
  sqlite3_close(raw);

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
