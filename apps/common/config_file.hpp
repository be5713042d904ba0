// The config files of `qnum transform`, `qnum search --config` and `--quantize`: TOML
// (MASE's lab files) or JSON (MASE's pass_args dicts), read as one JSON object, and the
// check that a table holds only known keys.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/toml_guard.hpp"

namespace qnum::cli::detail {

/// `file` parsed as TOML once the toml++ guard (io/toml_guard.hpp) accepted its text; a syntax
/// error is one qnum::Error "FILE:LINE:COLUMN: TOML syntax error: ...".
inline toml::table read_toml_file(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  io::check_toml_text(text, file.string());  // toml++ 3.3.0 has UB on some non-ASCII text
  try {
    return toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    qnum::detail::fail(file.string(), ":", b.line, ":", b.column,
                       ": TOML syntax error: ", qnum::detail::excerpt(e.description(), 200));
  }
}

/// A config file as JSON: a .json file as it is, anything else read as TOML (tables →
/// objects, arrays → arrays; integers stay integers).
inline nlohmann::json toml_file_as_json(const std::filesystem::path& file) {
  qnum::detail::require(std::filesystem::is_regular_file(file), "--config: cannot open '", file.string(), "'");
  if (file.extension() == ".json") {
    try {
      auto j = nlohmann::json::parse(read_file(file));
      qnum::detail::require(j.is_object(), file.string(), ": the config must be a JSON object");
      return j;
    } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of double's range
      qnum::detail::fail(file.string(), ": JSON error: ", qnum::detail::excerpt(e.what(), 200));
    }
  }
  const toml::table table = read_toml_file(file);
  std::ostringstream out;
  out << toml::json_formatter{table};
  auto j = nlohmann::json::parse(out.str(), nullptr, false);
  // Should toml++'s JSON not parse back (it is not nlohmann's), an error rather than an exception.
  qnum::detail::require(!j.is_discarded(), file.string(), ": a TOML value with no JSON form");
  return j;
}

inline void require_keys(const nlohmann::json& j, const std::string& where,
                         std::initializer_list<const char*> allowed) {
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok |= key == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    qnum::detail::require(ok, where, ": unknown key '", qnum::detail::excerpt(key, 80), "' (allowed: ", list, ")");
  }
}

}  // namespace qnum::cli::detail
