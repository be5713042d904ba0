// Killing a study worker at a known point, for the stale-heartbeat tests of every storage.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "qnum/search/sampler.hpp"
#include "qnum/search/storage.hpp"
#include "qnum/search/study.hpp"

namespace qnum_search_test {

/// An objective that runs `objective`, then never returns in trial `number` (until killed).
template <class Objective>
auto hang_in_trial(std::int64_t number, Objective objective) {
  return [number, objective](qnum::search::Trial& t) {
    const double v = objective(t);
    if (t.number() == number)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    return v;
  };
}

/// Runs a worker in a child process — study `study` (minimize) in the storage `open()`
/// returns, with `sampler`, heartbeats every 0.05 s, `objective` for 10 trials — waits (no
/// time limit asserted) until trial `number` is RUNNING with `params` parameters, SIGKILLs
/// the child and lets its heartbeat age past a 0.2 s grace period. Returns the storage,
/// opened in the parent after the fork.
template <class Open, class Objective>
std::shared_ptr<qnum::search::Storage> kill_worker_in_trial(Open open, const std::string& study,
                                                            std::shared_ptr<qnum::search::Sampler> sampler,
                                                            Objective objective, std::int64_t number,
                                                            std::size_t params) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      qnum::search::Study s(open(), study, {qnum::search::StudyDirection::minimize}, sampler);
      s.enable_heartbeat(0.05);
      s.optimize(objective, 10);
    } catch (...) {
    }
    ::_exit(0);
  }
  std::shared_ptr<qnum::search::Storage> storage = open();
  const auto study_id = storage->find_study(study)->study_id;
  for (;;) {
    const auto running = storage->get_all_trials(study_id, {qnum::search::TrialState::running});
    if (!running.empty() && running[0].number == number && running[0].params.size() == params) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return storage;
}

}  // namespace qnum_search_test
