// `qnum train --config run.toml` (apps/cli/run_config.hpp): TOML parsed from memory
// (parse_run_config, which read_run_config calls) into overrides, or refused with
// FILE:LINE:COLUMN and the key.
#include "cli/run_config.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Non-ASCII input included: io/toml_guard.hpp keeps it from toml++ 3.3.0's undefined
  // behaviour (marzer/tomlplusplus#295).
  qnum::fuzz::expect_clean([&] { qnum::cli::parse_run_config(qnum::fuzz::as_text(data, size), "fuzz-run.toml"); });
  return 0;
}
