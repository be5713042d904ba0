// End to end: `qnum quantize --mode mase` on every MASE reference case reproduces MASE's
// float32 output bit for bit (NaN equals NaN), and error cases exit with code 2.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "format/conformance.hpp"
#include "format/mase_ref.hpp"
#include "qnum/core/error.hpp"
#include "qnum/io/npy.hpp"

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }

int run(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

TEST_CASE("cli: qnum quantize --mode mase reproduces every MASE reference case") {
  const auto cases = qnum_test::load_mase_cases();
  REQUIRE(!cases.empty());
  const auto tmp = std::filesystem::temp_directory_path() / ("qnum-cli-ref-" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  int matched = 0, errors = 0;
  for (const auto& c : cases) {
    INFO("case ", c.id, ": ", c.spec);
    const auto out = tmp / (c.id + ".out.npy");
    std::string cmd = quoted(QNUM_CLI_PATH) + " quantize --mode mase --format " + quoted(c.spec);
    if (c.role) cmd += " --role " + std::string(qnum::to_string(*c.role));
    if (c.seed) cmd += " --seed " + std::to_string(*c.seed);
    cmd += " " + quoted(c.input.string()) + " " + quoted(out.string()) + " 2>" + quoted((tmp / "stderr").string());
    if (c.expect_error && c.error_message == "object of type 'int' has no len()") continue;  // see test_mase_ref
    const int rc = run(cmd);
    if (c.expect_error) {
      CHECK(rc == 2);
      CHECK(!std::filesystem::exists(out));
      ++errors;
      continue;
    }
    REQUIRE(rc == 0);
    const auto got = qnum::read_npy(out);
    const auto want = qnum::read_npy(c.output);
    CHECK(got.shape == want.shape);
    REQUIRE(got.data.size() == want.data.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < got.data.size(); ++i)
      if (!qnum_test::same_bits(got.data[i], want.data[i]) &&
          !(c.scaled_mean && qnum_test::ulp_distance(got.data[i], want.data[i]) <= 4))
        ++mismatches;
    CHECK(mismatches == 0);
    matched += mismatches == 0;
  }
  std::filesystem::remove_all(tmp);
  MESSAGE(matched, " cases bit-exact, ", errors, " error cases exit 2");
}
