// PostgresStorage against a real server: tests/search/test_postgres.sh starts one in a temp
// directory and runs these cases with QNUM_TEST_POSTGRES_URL set; without it (the plain
// search suite) the cases that need a server return at once. Round trip, grid points claimed
// once by interleaved workers, distinct trial numbers across processes, a SIGKILLed worker's
// trial failed on resume, finished trials shared between reads, bad URLs.
#include <doctest/doctest.h>

#if defined(QNUM_HAVE_POSTGRES)
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/postgres_storage.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "search/helpers.hpp"
#include "search/kill_worker.hpp"

using namespace qnum::search;
using qnum_search_test::toy_objective;
using qnum_search_test::error_of;

namespace {

// The server's URL, or empty (cases return) when the suite runs without one.
std::string pg_url() {
  const char* u = std::getenv("QNUM_TEST_POSTGRES_URL");
  return u ? std::string(u) : std::string();
}
// Study names unique to this process: one database serves every case and rerun.
std::string unique(const std::string& name) { return name + "-" + std::to_string(::getpid()); }

}  // namespace

TEST_CASE("search.postgres: a study round-trips with every kind of value") {
  const std::string url = pg_url();
  if (url.empty()) return;
  const std::string name = unique("rt");
  std::vector<FrozenTrial> written;
  {
    Study s(open_storage(url), name, {StudyDirection::maximize}, std::make_shared<RandomSampler>(3));
    s.set_user_attr("note", "hello");
    s.optimize(
        [](Trial& t) -> double {
          const double x = t.suggest_float("x", 0.0, 1.0);
          t.suggest_float("lr", 1e-5, 1e-1, std::nullopt, true);
          t.suggest_float("q", 0.0, 1.0, 0.25);
          t.suggest_int("n", 1, 64, 1, true);
          t.suggest_categorical(
              "c", std::vector<CategoricalChoice>{std::monostate{}, true, std::int64_t{3}, 2.5, std::string("s")});
          t.report(0.1 + x / 3, 0);  // not exact in decimal: checks the float8 round trip
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
  auto s = Study::load(open_storage(url), name);
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
    REQUIRE(read[i].intermediate_values.size() == 3);
    CHECK(read[i].intermediate_values.at(0) == written[i].intermediate_values.at(0));
    CHECK(std::isnan(read[i].intermediate_values.at(1)));
    CHECK(read[i].intermediate_values.at(2) == -HUGE_VAL);
    CHECK(read[i].datetime_start == written[i].datetime_start);
    CHECK(read[i].datetime_complete.has_value());
  }
  CHECK(read[1].values == std::vector<double>{HUGE_VAL});
  CHECK(read[2].state == TrialState::fail);
  CHECK(read[2].system_attrs["fail_reason"] == "failed on purpose");
  CHECK(s.best_trial().number == 1);
  // A second connection finds the schema in place and the name taken.
  CHECK(error_of([&] {
          Study again(open_storage(url), name, {StudyDirection::maximize}, nullptr, nullptr, OpenMode::create);
        }).find("already exists") != std::string::npos);
}

TEST_CASE("search.postgres: finished trials are read once and shared; running ones are fresh") {
  const std::string url = pg_url();
  if (url.empty()) return;
  auto storage = open_storage(url);
  Study s(storage, unique("shared"), {StudyDirection::minimize}, std::make_shared<RandomSampler>(4));
  s.optimize(toy_objective, 3);
  Trial running = s.ask();
  running.suggest_float("x", -1.0, 1.0);
  const auto a = s.get_trials_shared();
  const auto b = s.get_trials_shared();
  const auto copies = s.get_trials();
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (std::size_t i = 0; i < 3; ++i) CHECK(a[i].get() == b[i].get());  // the same object
  CHECK(a[3].get() != b[3].get());
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(a[i]->number == copies[i].number);
    CHECK(a[i]->params == copies[i].params);
    CHECK(a[i]->values == copies[i].values);
  }
  s.tell(running, TrialState::complete, {0.5});
  const auto c = s.get_trials_shared({TrialState::complete});
  REQUIRE(c.size() == 4);
  CHECK(c[0].get() == a[0].get());
  CHECK(c[3]->values == std::vector<double>{0.5});
}

TEST_CASE("search.postgres: two Study objects, interleaved, run each grid point once") {
  const std::string url = pg_url();
  if (url.empty()) return;
  const std::string name = unique("grid");
  const GridSpace space{{"a", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}},
                        {"b", {std::string("x"), std::string("y"), std::string("z")}}};
  Study w1(open_storage(url), name, {StudyDirection::minimize}, std::make_shared<GridSampler>(space));
  Study w2(open_storage(url), name, {StudyDirection::minimize}, std::make_shared<GridSampler>(space));
  auto value = [](Trial& t) {
    return double(t.suggest_int("a", 0, 3)) +
           double(t.suggest_categorical("b", std::vector<std::string>{"x", "y", "z"})[0]);
  };
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
  Study w3(open_storage(url), name, {StudyDirection::minimize}, grid);
  CHECK(grid->is_exhausted(w3));
}

TEST_CASE("search.postgres: four processes on one study get distinct trial numbers and grid points") {
  const std::string url = pg_url();
  if (url.empty()) return;
  const std::string name = unique("par"), grid_name = unique("pgrid");
  const GridSpace space{{"a", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4}}},
                        {"b", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}}};
  std::vector<pid_t> kids;
  for (int w = 0; w < 4; ++w) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        // Every worker creates-or-loads the study at once: creation races are part of the test.
        Study s(open_storage(url), name, {StudyDirection::minimize}, std::make_shared<RandomSampler>(100 + w));
        s.optimize(toy_objective, 15);
        Study g(open_storage(url), grid_name, {StudyDirection::minimize}, std::make_shared<GridSampler>(space));
        g.optimize([](Trial& t) { return double(t.suggest_int("a", 0, 4) * 10 + t.suggest_int("b", 0, 3)); }, 20);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "worker %d: %s\n", w, e.what());
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
  auto s = Study::load(open_storage(url), name);
  const auto trials = s.trials();
  REQUIRE(trials.size() == 60);
  std::set<std::int64_t> numbers;
  for (const auto& t : trials) {
    numbers.insert(t.number);
    CHECK(t.state == TrialState::complete);
  }
  CHECK(numbers.size() == 60);
  CHECK(*numbers.rbegin() == 59);
  // 20 grid points, each COMPLETE exactly once; a worker that came too late records a FAIL.
  auto g = Study::load(open_storage(url), grid_name);
  std::multiset<std::int64_t> values;
  for (const auto& t : g.trials())
    if (t.state == TrialState::complete) values.insert(std::int64_t(t.value()));
  CHECK(values.size() == 20);
  CHECK(std::set<std::int64_t>(values.begin(), values.end()).size() == 20);
}

TEST_CASE("search.postgres: a SIGKILLed worker's trial becomes FAIL on resume; completed trials stay") {
  const std::string url = pg_url();
  if (url.empty()) return;
  const std::string name = unique("kill");
  { Study init(open_storage(url), name, {StudyDirection::minimize}); }
  // Killed in trial 3's objective, after its parameters and heartbeats.
  auto storage = qnum_search_test::kill_worker_in_trial([&] { return open_storage(url); }, name,
                                                        std::make_shared<RandomSampler>(1),
                                                        qnum_search_test::hang_in_trial(3, toy_objective), 3, 2);

  Study resumed(storage, name, {StudyDirection::minimize}, std::make_shared<RandomSampler>(2));
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

TEST_CASE("search.postgres: an unreachable server is a clear error without the password") {
  // Port 1 on the loopback refuses at once; no server needed.
  const std::string msg = error_of([] { open_storage("postgresql://qnum:s3cret@127.0.0.1:1/studies"); });
  CHECK(msg.find("cannot open postgresql://qnum:***@127.0.0.1:1/studies") != std::string::npos);
  CHECK(msg.find("s3cret") == std::string::npos);
  CHECK(error_of([] { open_storage("postgres://127.0.0.1:1/x?connect_timeout=2"); }).find("cannot open postgres://") !=
        std::string::npos);
  CHECK(error_of([] { open_storage("postgresql+psycopg2://127.0.0.1:1/x"); }).find("cannot open") != std::string::npos);
}

TEST_CASE("search.postgres: a database that does not exist is a clear error") {
  const std::string url = pg_url();
  if (url.empty()) return;
  auto base = url;
  const auto q = base.find('?');
  const auto slash = base.rfind('/', q == std::string::npos ? std::string::npos : q);
  const std::string missing =
      base.substr(0, slash + 1) + "qnum_no_such_db" + (q == std::string::npos ? "" : base.substr(q));
  CHECK(error_of([&] { open_storage(missing); }).find("qnum_no_such_db") != std::string::npos);
}

#endif  // QNUM_HAVE_POSTGRES
