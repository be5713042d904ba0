// Atomic writes after a writer was killed mid-write: its temporary file is removed by the next
// write of the same target on this host; a live writer's (this process's), another host's and
// another target's are kept.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qnum/io/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {
void touch(const fs::path& p) { std::ofstream(p) << "partial"; }

/// The pid of a process that has exited (a child, reaped).
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}
}  // namespace

TEST_CASE("write_file_atomic removes the temporary files of killed writers of the same target") {
  const fs::path dir = fs::temp_directory_path() / ("qnum-atomic-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "best.safetensors";
  const std::string prefix = qnum::detail::temp_prefix(target);
  REQUIRE(prefix.starts_with(".tmp.best.safetensors."));
  const fs::path killed = dir / (prefix + std::to_string(dead_pid()) + ".123");
  const fs::path live = dir / (prefix + std::to_string(getpid()) + ".456");
  const fs::path other_host = dir / (".tmp.best.safetensors.some-other-host." + std::to_string(dead_pid()) + ".7");
  const fs::path other_target = dir / (qnum::detail::temp_prefix(dir / "last.safetensors") +
                                       std::to_string(dead_pid()) + ".8");
  const fs::path not_a_pid = dir / (prefix + "x1.9");
  for (const auto& p : {killed, live, other_host, other_target, not_a_pid}) touch(p);

  qnum::write_file_atomic(target, "complete");
  CHECK(qnum::read_file(target) == "complete");
  CHECK_FALSE(fs::exists(killed));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other_host));
  CHECK(fs::exists(other_target));
  CHECK(fs::exists(not_a_pid));
  // Nothing of this write is left behind either.
  std::size_t temps = 0;
  for (const auto& e : fs::directory_iterator(dir)) temps += e.path().filename().string().starts_with(prefix);
  CHECK(temps == 2);  // live and not_a_pid
  fs::remove_all(dir);
}
