// Storage::get_all_trials_shared / StudyView::get_trials_shared: finished trials are handed
// out as the same immutable object on every read (the in-memory and SQLite storages; the
// PostgreSQL case is in test_postgres.cpp), unfinished ones as fresh copies, and the content
// equals get_all_trials' copies — including a trial finished by another connection.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "search/helpers.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"

using namespace qnum::search;
using qnum_search_test::toy_objective;
namespace fs = std::filesystem;

namespace {

void check_shared_reads(const std::shared_ptr<Storage>& storage, const std::shared_ptr<Storage>& other) {
  Study s(storage, "shared", {StudyDirection::minimize}, std::make_shared<RandomSampler>(4));
  s.optimize(toy_objective, 3);
  Trial running = s.ask();
  running.suggest_float("x", -1.0, 1.0);
  const auto a = s.get_trials_shared();
  const auto b = s.get_trials_shared();
  const auto copies = s.get_trials();
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (std::size_t i = 0; i < 3; ++i) CHECK(a[i].get() == b[i].get());
  CHECK(a[3].get() != b[3].get());
  CHECK(a[3]->state == TrialState::running);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(a[i]->number == copies[i].number);
    CHECK(a[i]->trial_id == copies[i].trial_id);
    CHECK(a[i]->state == copies[i].state);
    CHECK(a[i]->params == copies[i].params);
    CHECK(a[i]->distributions == copies[i].distributions);
    CHECK(a[i]->values == copies[i].values);
    CHECK(a[i]->system_attrs == copies[i].system_attrs);
  }
  // The running trial is finished through another connection to the same study: the next
  // read sees it finished, the earlier finished ones are still the same objects.
  CHECK(other->set_trial_state_values(running.trial_id(), TrialState::complete, {0.25}));
  const auto c = s.get_trials_shared({TrialState::complete});
  REQUIRE(c.size() == 4);
  CHECK(c[0].get() == a[0].get());
  CHECK(c[3]->state == TrialState::complete);
  CHECK(c[3]->values == std::vector<double>{0.25});
  CHECK(s.get_trials_shared({TrialState::running}).empty());
  CHECK(s.get_trials_shared({TrialState::complete})[3].get() == c[3].get());
}

}  // namespace

TEST_CASE("search.shared_trials: in memory, finished trials are one shared object") {
  auto storage = std::make_shared<InMemoryStorage>();
  check_shared_reads(storage, storage);
}

#if defined(QNUM_HAVE_SQLITE)
TEST_CASE("search.shared_trials: SQLite reads finished trials once, also across connections") {
  const fs::path path = fs::temp_directory_path() / ("qnum-shared-" + std::to_string(::getpid()) + ".db");
  fs::remove(path);
  {
    const std::string url = "sqlite:///" + path.string();
    check_shared_reads(open_storage(url), open_storage(url));
  }
  fs::remove(path);
  fs::remove(path.string() + "-wal");
  fs::remove(path.string() + "-shm");
}
#endif
