// MASE's `ch` spellings on `qnum train|test|transform|search`: every `ch` option qnum has
// no option of the same name for (qnum/io/mase_config.hpp's table) is accepted, with or
// without a value. After parsing, --task is checked (classification / cls), an option qnum
// honours under another name is an error saying that name (running with a setting the user
// did not get would be worse), and every other one is explained in one line on stderr.
#pragma once

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/mase_config.hpp"

namespace qnum::cli {

class MaseFlags {
 public:
  MaseFlags(CLI::App& app, const char* subcommand, mase::Command command)
      : cmd_(app.get_subcommand(subcommand)), command_(command) {
    for (const auto& k : mase::kTopLevelKeys) {
      const std::string flag(k.flag);
      if (!flag.starts_with("--") || cmd_->get_option_no_throw(flag) != nullptr) continue;
      cmd_->add_option(flag, values_[flag], "MASE's ch option (" + std::string(k.key) + ")")
          ->expected(0, 1)
          ->group("MASE's ch options (accepted; see docs/mase.md)");
    }
  }
  MaseFlags(const MaseFlags&) = delete;  // CLI11 holds pointers to values_
  MaseFlags& operator=(const MaseFlags&) = delete;

  /// Checks and explains the MASE options given to the parsed subcommand.
  void explain() const {
    if (!cmd_->parsed()) return;
    const std::string name(mase::command_name(command_));
    for (const auto& [flag, values] : values_) {
      if (cmd_->get_option(flag)->count() == 0) continue;
      const std::string value = values.empty() ? "" : values.front();
      const auto* k = mase::find_top_level_key(key_of(flag));
      if (k->key == "task") {
        qnum::detail::require(value == "classification" || value == "cls", "--task ", value, ": qnum ", name,
                              " does classification only (--task classification or cls)");
        continue;
      }
      const std::string given = flag + (value.empty() ? "" : " " + value);
      const std::string qnum_flag = "--" + dashed(k->qnum);
      if (!k->qnum.empty() && values_.count(qnum_flag) == 0 && cmd_->get_option_no_throw(qnum_flag) != nullptr)
        qnum::detail::fail(given, ": qnum ", name, " spells this ", qnum_flag, " (", k->why, ")");
      std::cerr << "note: " << given << ": ignored by qnum " << name << ": "
                << (k->qnum.empty()
                        ? std::string(k->why)
                        : "qnum " + name + " takes it from the config file only (" + std::string(k->why) + ")")
                << "\n";
    }
  }

 private:
  static std::string dashed(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
      if (c == '_') c = '-';
    return out;
  }
  static std::string key_of(const std::string& flag) {
    for (const auto& k : mase::kTopLevelKeys)
      if (k.flag == flag) return std::string(k.key);
    return "";
  }

  CLI::App* cmd_;
  mase::Command command_;
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace qnum::cli
