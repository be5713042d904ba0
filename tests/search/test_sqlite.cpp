// SqliteStorage: Optuna's schema, round trips, several connections and processes on one
// file, stale-heartbeat recovery after SIGKILL, a database written by Optuna, bad input.
#include <doctest/doctest.h>

#include "qnum/search/storage_url.hpp"
#if defined(QNUM_HAVE_SQLITE)
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/sqlite_storage.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "search/helpers.hpp"
#include "search/kill_worker.hpp"

using namespace qnum::search;
using qnum_search_test::toy_objective;
using qnum_search_test::error_of;
using qnum_search_test::hang_in_trial;
using qnum_search_test::kill_worker_in_trial;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test case, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() / ("qnum-search-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("search.sqlite: a study round-trips with every kind of value") {
  TempDir dir;
  const std::string url = "sqlite:///" + (dir.path / "s.db").string();
  std::vector<FrozenTrial> written;
  {
    Study s(open_storage(url), "rt", {StudyDirection::maximize}, std::make_shared<RandomSampler>(3));
    s.set_user_attr("note", "hello");
    s.optimize(
        [](Trial& t) -> double {
          const double x = t.suggest_float("x", 0.0, 1.0);
          t.suggest_float("lr", 1e-5, 1e-1, std::nullopt, true);
          t.suggest_float("q", 0.0, 1.0, 0.25);
          t.suggest_int("n", 1, 64, 1, true);
          t.suggest_categorical(
              "c", std::vector<CategoricalChoice>{std::monostate{}, true, std::int64_t{3}, 2.5, std::string("s")});
          t.report(0.5, 0);
          t.report(std::nan(""), 1);
          t.report(-HUGE_VAL, 2);
          t.set_user_attr("nested", nlohmann::json{{"k", {1, 2.5, "v"}}});
          if (t.number() == 1) return HUGE_VAL;
          if (t.number() == 2) throw std::runtime_error("failed on purpose");
          return x;
        },
        4);
    written = s.trials();
  }
  auto storage = open_storage(url, false);
  auto s = Study::load(storage, "rt");
  CHECK(s.direction() == StudyDirection::maximize);
  CHECK(s.user_attrs()["note"] == "hello");
  const auto read = s.trials();
  REQUIRE(read.size() == 4);
  for (std::size_t i = 0; i < read.size(); ++i) {
    CHECK(read[i].number == static_cast<std::int64_t>(i));
    CHECK(read[i].state == written[i].state);
    CHECK(read[i].params == written[i].params);
    CHECK(read[i].distributions == written[i].distributions);
    CHECK(read[i].values == written[i].values);
    CHECK(read[i].user_attrs == written[i].user_attrs);
    CHECK(read[i].system_attrs == written[i].system_attrs);
    CHECK(read[i].intermediate_values.size() == 3);
    CHECK(std::isnan(read[i].intermediate_values.at(1)));
    CHECK(read[i].intermediate_values.at(2) == -HUGE_VAL);
    CHECK(read[i].datetime_start == written[i].datetime_start);
    CHECK(read[i].datetime_complete.has_value());
  }
  CHECK(read[1].values == std::vector<double>{HUGE_VAL});
  CHECK(read[2].state == TrialState::fail);
  CHECK(read[2].system_attrs["fail_reason"] == "failed on purpose");
  CHECK(s.best_trial().number == 1);
}

TEST_CASE("search.sqlite: the file has Optuna's tables, version rows and encodings") {
  TempDir dir;
  const auto path = dir.path / "o.db";
  {
    Study s(open_storage("sqlite:///" + path.string()), "enc", {StudyDirection::minimize, StudyDirection::maximize});
    s.optimize([](Trial& t) { return std::vector<double>{t.suggest_float("x", 0.0, 1.0), -HUGE_VAL}; }, 1);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.string().c_str(), &db) == SQLITE_OK);
  auto one = [&](const char* sql) {
    qnum::search::detail::Stmt q(db, sql);
    REQUIRE(q.step());
    return q.text(0);
  };
  CHECK(one("SELECT version_num FROM alembic_version") == "v3.2.0.a");
  CHECK(one("SELECT schema_version || ' ' || library_version FROM version_info") == "12 5.0.0");
  CHECK(one("SELECT group_concat(direction, ',') FROM study_directions ORDER BY objective") == "MINIMIZE,MAXIMIZE");
  CHECK(one("SELECT state FROM trials") == "COMPLETE");
  CHECK(one("SELECT value_type FROM trial_values WHERE objective = 1") == "INF_NEG");
  CHECK(one("SELECT count(*) FROM trial_values WHERE objective = 1 AND value IS NULL") == "1");
  CHECK(one("SELECT distribution_json FROM trial_params") ==
        R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})");
  CHECK(one("SELECT count(*) FROM sqlite_master WHERE type = 'table'") == "13");
  CHECK(one("PRAGMA journal_mode") == "wal");
  sqlite3_close(db);
}

TEST_CASE("search.sqlite: a database written by Optuna 5.0.0 is read") {
  // tests/fixtures/search/optuna_written.db: made by fixtures/make_optuna_db.py.
  const fs::path src = fs::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "search" / "optuna_written.db";
  TempDir dir;
  const auto copy = dir.path / "copy.db";
  fs::copy_file(src, copy);
  auto storage = open_storage("sqlite:///" + copy.string(), false);
  auto studies = storage->get_all_studies();
  REQUIRE(studies.size() == 2);
  auto s = Study::load(storage, "optuna-made");
  CHECK(s.direction() == StudyDirection::minimize);
  const auto trials = s.trials();
  REQUIRE(trials.size() == 5);
  CHECK(trials[0].state == TrialState::complete);
  CHECK(trials[0].values == std::vector<double>{0.25});
  CHECK(std::get<double>(trials[0].param("x")) == 0.5);
  CHECK(std::get<std::int64_t>(trials[0].param("n")) == 4);
  CHECK(std::get<std::string>(trials[0].param("c")) == "b");
  CHECK(trials[0].intermediate_values.at(0) == 1.0);
  CHECK(std::isnan(trials[0].intermediate_values.at(1)));
  CHECK(trials[0].user_attrs["acc"] == 0.9);
  CHECK(trials[1].state == TrialState::fail);
  CHECK(trials[2].state == TrialState::pruned);
  CHECK(trials[3].values == std::vector<double>{HUGE_VAL});
  CHECK(trials[4].state == TrialState::waiting);
  CHECK(trials[4].system_attrs["fixed_params"]["x"] == 0.125);
  // Continue the Optuna study in qnum: the waiting trial runs first, numbers go on.
  s.optimize(
      [](Trial& t) {
        const double x = t.suggest_float("x", 0.0, 1.0);
        t.suggest_int("n", 1, 8);
        t.suggest_categorical("c", std::vector<std::string>{"a", "b"});
        return x;
      },
      2);
  const auto after = s.trials();
  REQUIRE(after.size() == 6);
  CHECK(after[4].state == TrialState::complete);
  CHECK(after[4].values == std::vector<double>{0.125});
  CHECK(after[5].number == 5);
  // Grid trials written by Optuna are recognised: the grid continues where Optuna stopped.
  auto grid = std::make_shared<GridSampler>(GridSpace{{"a", {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}}});
  Study g(storage, "optuna-grid", {StudyDirection::minimize}, grid);
  g.optimize([](Trial& t) { return double(t.suggest_int("a", 1, 3)); }, 10);
  std::multiset<std::int64_t> seen;
  for (const auto& t : g.trials()) seen.insert(std::get<std::int64_t>(t.param("a")));
  CHECK(seen == std::multiset<std::int64_t>{1, 2, 3});
}

TEST_CASE("search.sqlite: two Study objects on one file, interleaved, run each grid point once") {
  TempDir dir;
  const std::string url = "sqlite:///" + (dir.path / "g.db").string();
  const GridSpace space{{"a", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}},
                        {"b", {std::string("x"), std::string("y"), std::string("z")}}};
  Study w1(open_storage(url), "grid", {StudyDirection::minimize}, std::make_shared<GridSampler>(space));
  Study w2(open_storage(url), "grid", {StudyDirection::minimize}, std::make_shared<GridSampler>(space));
  auto value = [](Trial& t) {
    return double(t.suggest_int("a", 0, 3)) +
           double(t.suggest_categorical("b", std::vector<std::string>{"x", "y", "z"})[0]);
  };
  // Both workers hold a running trial at once, in alternating order.
  for (int round = 0; round < 6; ++round) {
    Trial t1 = w1.ask();
    Trial t2 = w2.ask();
    const double v2 = value(t2), v1 = value(t1);
    w2.tell(t2, TrialState::complete, {v2});
    w1.tell(t1, TrialState::complete, {v1});
  }
  const auto trials = w1.trials();
  REQUIRE(trials.size() == 12);
  std::set<std::int64_t> ids, numbers;
  std::set<std::pair<std::int64_t, std::string>> points;
  for (const auto& t : trials) {
    ids.insert(t.system_attrs["grid_id"].get<std::int64_t>());
    numbers.insert(t.number);
    points.emplace(std::get<std::int64_t>(t.param("a")), std::get<std::string>(t.param("b")));
  }
  CHECK(ids.size() == 12);
  CHECK(numbers.size() == 12);
  CHECK(points.size() == 12);
  auto grid = std::make_shared<GridSampler>(space);
  Study w3(open_storage(url), "grid", {StudyDirection::minimize}, grid);
  CHECK(grid->is_exhausted(w3));
}

TEST_CASE("search.sqlite: three processes on one study get distinct trial numbers") {
  TempDir dir;
  const std::string url = "sqlite:///" + (dir.path / "p.db").string();
  { Study init(open_storage(url), "par", {StudyDirection::minimize}); }
  std::vector<pid_t> kids;
  for (int w = 0; w < 3; ++w) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        Study s(open_storage(url), "par", {StudyDirection::minimize}, std::make_shared<RandomSampler>(100 + w));
        s.optimize(toy_objective, 15);
      } catch (...) {
        rc = 3;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  for (const auto pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto s = Study::load(open_storage(url, false), "par");
  const auto trials = s.trials();
  REQUIRE(trials.size() == 45);
  std::set<std::int64_t> numbers;
  for (const auto& t : trials) {
    numbers.insert(t.number);
    CHECK(t.state == TrialState::complete);
  }
  CHECK(numbers.size() == 45);
  CHECK(*numbers.rbegin() == 44);
}

TEST_CASE("search.sqlite: a SIGKILLed worker's trial becomes FAIL on resume; completed trials stay") {
  TempDir dir;
  const std::string url = "sqlite:///" + (dir.path / "k.db").string();
  { Study init(open_storage(url), "kill", {StudyDirection::minimize}); }
  // Killed in trial 3's objective, after its parameters and heartbeats.
  auto storage = kill_worker_in_trial([&] { return open_storage(url, false); }, "kill",
                                      std::make_shared<RandomSampler>(1), hang_in_trial(3, toy_objective), 3, 2);

  Study resumed(storage, "kill", {StudyDirection::minimize}, std::make_shared<RandomSampler>(2));
  resumed.enable_heartbeat(0.05, 0.2);
  CHECK(resumed.fail_stale_trials() == std::vector<std::int64_t>{3});
  resumed.optimize(toy_objective, 2);
  const auto trials = resumed.trials();
  REQUIRE(trials.size() == 6);
  for (int i = 0; i < 3; ++i) CHECK(trials[static_cast<std::size_t>(i)].state == TrialState::complete);
  CHECK(trials[3].state == TrialState::fail);
  CHECK(trials[3].params.size() == 2);
  CHECK(trials[3].system_attrs["fail_reason"].get<std::string>().find("heartbeat") != std::string::npos);
  CHECK(trials[4].state == TrialState::complete);
  CHECK(trials[5].number == 5);
}

// A RandomSampler whose before_trial never returns for one trial number: the worker is
// stuck between creating that trial and starting its heartbeat thread.
class StuckBeforeTrial final : public Sampler {
 public:
  StuckBeforeTrial(std::uint64_t seed, std::int64_t number) : random_(seed), number_(number) {}
  SearchSpace infer_relative_search_space(StudyView& study, const FrozenTrial& trial) override {
    return random_.infer_relative_search_space(study, trial);
  }
  std::map<std::string, double> sample_relative(StudyView& study, const FrozenTrial& trial,
                                                const SearchSpace& space) override {
    return random_.sample_relative(study, trial, space);
  }
  double sample_independent(StudyView& study, const FrozenTrial& trial, const std::string& name,
                            const Distribution& distribution) override {
    return random_.sample_independent(study, trial, name, distribution);
  }
  void before_trial(StudyView& study, const FrozenTrial& trial) override {
    random_.before_trial(study, trial);
    if (trial.number == number_)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hangs until killed
  }
  std::string name() const override { return "StuckBeforeTrial"; }

 private:
  RandomSampler random_;
  std::int64_t number_;
};

TEST_CASE("search.sqlite: a worker killed before its first heartbeat thread beat leaves a trial that goes stale") {
  // Trial 3 is new; trial 4 is an enqueued (WAITING) trial the worker claims. Both are
  // created RUNNING with their first heartbeat in the same transaction.
  for (const bool enqueued : {false, true}) {
    CAPTURE(enqueued);
    TempDir dir;
    const std::string url = "sqlite:///" + (dir.path / "k.db").string();
    const std::int64_t stuck = enqueued ? 4 : 3;
    {
      Study init(open_storage(url), "kill", {StudyDirection::minimize});
      if (enqueued) {
        init.optimize(toy_objective, 4);
        init.enqueue_trial({{"x", ParamValue(0.5)}, {"k", ParamValue(std::int64_t{2})}});
      }
    }
    auto storage = kill_worker_in_trial([&] { return open_storage(url, false); }, "kill",
                                        std::make_shared<StuckBeforeTrial>(1, stuck), toy_objective, stuck, 0);

    Study resumed(storage, "kill", {StudyDirection::minimize}, std::make_shared<RandomSampler>(2));
    resumed.enable_heartbeat(0.05, 0.2);
    CHECK(resumed.fail_stale_trials() == std::vector<std::int64_t>{stuck});
    resumed.optimize(toy_objective, 1);
    const auto trials = resumed.trials();
    REQUIRE(trials.size() == static_cast<std::size_t>(stuck + 2));
    CHECK(trials[static_cast<std::size_t>(stuck)].state == TrialState::fail);
    CHECK(trials.back().state == TrialState::complete);
  }
  // A trial from ask() (no heartbeat thread of its own) is never stale, as in Optuna.
  TempDir dir;
  Study s(open_storage("sqlite:///" + (dir.path / "a.db").string()), "ask", {StudyDirection::minimize});
  s.enable_heartbeat(0.05, 0.0);
  Trial asked = s.ask();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(s.fail_stale_trials().empty());
  s.tell(asked, TrialState::complete, {1.0});
}

TEST_CASE("search.sqlite: bad URLs, files and directions give clear errors and change nothing") {
  TempDir dir;
  CHECK(error_of([&] {
          open_storage("sqlite:///" + (dir.path / "no" / "such" / "dir.db").string());
        }).find("cannot open sqlite:///") != std::string::npos);
  CHECK(error_of([&] {
          open_storage("sqlite:///" + (dir.path / "missing.db").string(), false);
        }).find("no such database file") != std::string::npos);
  CHECK(!fs::exists(dir.path / "missing.db"));
#if !defined(QNUM_HAVE_POSTGRES)  // with libpq: test_postgres.cpp
  CHECK(error_of([] {
          open_storage("postgresql://u:pw@localhost/db");
        }).find("'postgresql://u:***@localhost/db': this qnum was built without PostgreSQL") != std::string::npos);
#endif
  CHECK(error_of([] { open_storage("mysql://x"); }).find("unknown storage URL 'mysql://x'") != std::string::npos);
  CHECK(error_of([] { open_storage("sqlite://rel.db"); }).find("three slashes") != std::string::npos);

  const auto text = dir.path / "notes.txt";
  { std::ofstream(text) << "not a database, keep me\n"; }
  CHECK(!error_of([&] { open_storage("sqlite:///" + text.string()); }).empty());
  CHECK(file_bytes(text) == "not a database, keep me\n");

  const auto db = dir.path / "d.db";
  {
    Study s(open_storage("sqlite:///" + db.string()), "dir", {StudyDirection::minimize});
    s.optimize(toy_objective, 3);
  }
  const auto before = file_bytes(db);
  const auto msg =
      error_of([&] { Study s(open_storage("sqlite:///" + db.string()), "dir", {StudyDirection::maximize}); });
  CHECK(msg.find("study 'dir' exists in sqlite:///") != std::string::npos);
  CHECK(msg.find("with direction(s) minimize, not maximize") != std::string::npos);
  CHECK(file_bytes(db) == before);
  auto s = Study::load(open_storage("sqlite:///" + db.string(), false), "dir");
  CHECK(s.trials().size() == 3);
}

#endif  // QNUM_HAVE_SQLITE

TEST_CASE("sqlite: stored datetimes round-trip; tampered ones are refused, never overflow") {
  using qnum::search::detail::parse_sql_datetime;
  using qnum::search::detail::sql_datetime;
  const auto t = qnum::search::TimePoint(std::chrono::microseconds(1795840260123456LL));  // 2026-11-28 04:31:00.123456
  CHECK(sql_datetime(t) == "2026-11-28 04:31:00.123456");
  REQUIRE(parse_sql_datetime(sql_datetime(t)).has_value());
  CHECK(*parse_sql_datetime(sql_datetime(t)) == t);
  CHECK(parse_sql_datetime("2026-11-28 04:31:00.5") ==
        qnum::search::TimePoint(std::chrono::microseconds(1795840260500000LL)));  // fraction digits trimmed
  CHECK(parse_sql_datetime("2026-11-28T04:31:00") ==
        qnum::search::TimePoint(std::chrono::microseconds(1795840260000000LL)));
  // The fuzzer's case (fuzz_study_rows): a year with too many digits made secs * 10^6 overflow.
  for (const char* bad : {"20262026-11-28 04:31:00.123456", "2026-13-28 04:31:00", "2026-11-28 25:61:61",
                          "2026-11-28 04:31", "2026-11-28 04:31:00.", "-026-11-28 04:31:00", ""})
    CHECK_MESSAGE(!parse_sql_datetime(bad).has_value(), std::string(bad));
}
