// MASE's own example configs (tests/fixtures/mase_configs, copied unchanged) against the key
// table of include/qnum/io/mase_config.hpp: every top-level key they use is known, each
// command honours its own and notes the rest in one line (accelerator = "gpu" says qnum
// runs on the CPU), a key MASE does not know is an error naming it, and flags beat the file,
// which beats the defaults.
#include <doctest/doctest.h>

#define TOML_HEADER_ONLY 1
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "qnum/io/mase_config.hpp"

using namespace qnum::mase;
using qnum_test::error_of;

namespace {

const std::filesystem::path kConfigs = std::filesystem::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "mase_configs";

nlohmann::json toml_as_json(const std::filesystem::path& file) {
  std::ostringstream out;
  out << toml::json_formatter{toml::parse_file(file.string())};
  return nlohmann::json::parse(out.str());
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string note_for(const TopLevelPlan& p, const std::string& key) {
  for (const auto& n : p.notes)
    if (n.rfind(key + " ", 0) == 0 || n.rfind(key + ":", 0) == 0) return n;
  return "";
}

}  // namespace

TEST_CASE("MASE's example configs: every top-level key is known, each command honours its own") {
  for (const std::string name : {"jsc_toy_by_type.toml", "search_toy_tpe.toml", "toy_uniform.toml"}) {
    INFO(name);
    const auto cfg = toml_as_json(kConfigs / name);
    for (const auto c : {Command::train, Command::test, Command::transform, Command::search}) {
      const auto plan = plan_top_level(cfg, c, name, keys_read_by(c));
      CHECK(plan.honoured.size() + plan.notes.size() == cfg.size());
      CHECK(has(plan.honoured, "model"));
      CHECK(has(plan.honoured, "dataset"));
      for (const auto& n : plan.notes) CHECK(n.find('\n') == std::string::npos);
    }
  }
  const auto cfg = toml_as_json(kConfigs / "jsc_toy_by_type.toml");
  const auto train = plan_top_level(cfg, Command::train, "jsc_toy_by_type.toml", keys_read_by(Command::train));
  CHECK(has(train.honoured, "max_epochs"));
  CHECK(has(train.honoured, "learning_rate"));
  CHECK(has(train.honoured, "accelerator"));
  CHECK(has(train.honoured, "log_every_n_steps"));
  CHECK(note_for(train, "passes") ==
        "passes: ignored by qnum train: used by qnum transform (the passes `qnum "
        "transform` runs, in order)");
  CHECK(note_for(train, "search").find("used by qnum search") != std::string::npos);
  const auto transform =
      plan_top_level(cfg, Command::transform, "jsc_toy_by_type.toml", keys_read_by(Command::transform));
  CHECK(has(transform.honoured, "passes"));
  CHECK(note_for(transform, "max_epochs") ==
        "max_epochs = 5: ignored by qnum transform: used by qnum train test "
        "(epochs to train)");
  CHECK(has(transform.honoured, "transform"));
  CHECK(note_for(train, "transform") ==
        "transform: ignored by qnum train: used by qnum transform (style = \"graph\" "
        "or \"module\": qnum's passes work on the module tree either way)");
  const auto search = plan_top_level(cfg, Command::search, "jsc_toy_by_type.toml", keys_read_by(Command::search));
  CHECK(has(search.honoured, "search"));
  CHECK(note_for(search, "learning_rate") ==
        "learning_rate = 0.01: ignored by qnum search: used by qnum train test (the peak learning rate)");
  CHECK(!has(search.honoured, "passes"));
  // The table's "used by" agrees with what each command reads.
  for (const auto c : {Command::train, Command::test, Command::transform, Command::search})
    for (const auto& e : kTopLevelKeys) {
      if (e.qnum.empty()) continue;
      const std::string used = " " + std::string(e.commands) + " ";
      const bool listed = used.find(" " + std::string(command_name(c)) + " ") != std::string::npos;
      CHECK_MESSAGE(listed == has(keys_read_by(c), std::string(e.key)), e.key, " / ", command_name(c));
    }
}

TEST_CASE("every MASE CLI_DEFAULTS key is in the table, once; unknown keys stay errors") {
  for (const char* k : {"model",
                        "dataset",
                        "config",
                        "task",
                        "load_name",
                        "load_type",
                        "batch_size",
                        "to_debug",
                        "log_level",
                        "report_to",
                        "seed",
                        "quant_config",
                        "training_optimizer",
                        "trainer_precision",
                        "learning_rate",
                        "weight_decay",
                        "max_epochs",
                        "max_steps",
                        "accumulate_grad_batches",
                        "log_every_n_steps",
                        "t_max",
                        "eta_min",
                        "num_workers",
                        "num_devices",
                        "num_nodes",
                        "accelerator",
                        "strategy",
                        "is_to_auto_requeue",
                        "github_ci",
                        "disable_dataset_cache",
                        "is_pretrained",
                        "max_token_len",
                        "project_dir",
                        "project"}) {
    INFO(k);
    CHECK(find_top_level_key(k) != nullptr);
  }
  for (std::size_t i = 0; i < kTopLevelKeys.size(); ++i)
    for (std::size_t j = i + 1; j < kTopLevelKeys.size(); ++j) CHECK(kTopLevelKeys[i].key != kTopLevelKeys[j].key);
  for (const auto& k : kTopLevelKeys) CHECK(!k.why.empty());

  const nlohmann::json bad = {{"model", "jsc-tiny"}, {"max_epoch", 5}};
  const auto e = error_of([&] { plan_top_level(bad, Command::train, "run.toml", keys_read_by(Command::train)); });
  CHECK(e.find("run.toml: unknown key 'max_epoch' (neither MASE nor qnum train has it; qnum train reads: model, "
               "dataset, max_epochs") == 0);
  CHECK(!error_of([&] { plan_top_level(nlohmann::json::array(), Command::train, "x", {}); }).empty());
}

TEST_CASE("precedence: flags over the file over defaults") {
  const nlohmann::json defaults = {{"batch_size", 128}, {"learning_rate", 1e-5}, {"max_epochs", 20}};
  const nlohmann::json file = {{"batch_size", 512}, {"learning_rate", 1e-2}};
  const nlohmann::json flags = {{"batch_size", 64}, {"learning_rate", nullptr}};  // null: flag not given
  const auto m = merge_settings(defaults, file, flags);
  CHECK(m["batch_size"] == 64);
  CHECK(m["learning_rate"] == 1e-2);
  CHECK(m["max_epochs"] == 20);
}
