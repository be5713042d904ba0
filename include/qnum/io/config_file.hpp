// Config files (`qnum transform`, `qnum search --config`, `--quantize`, $QNUM_MODELS): TOML
// (MASE's lab files) or JSON (MASE's pass_args dicts), read as one JSON object, and the
// check that a table holds only known keys. TOML through toml++ (header-only unless the
// program links its library), after io/toml_guard.hpp's check.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"
#include "qnum/io/toml_guard.hpp"

namespace qnum::io {

/// TOML text parsed once the toml++ guard (io/toml_guard.hpp) accepted it; `name` (the file)
/// starts every error: a syntax error is one qnum::Error "NAME:LINE:COLUMN: TOML syntax error: ...".
inline toml::table parse_toml_text(std::string_view text, const std::string& name) {
  check_toml_text(text, name);  // toml++ 3.3.0 has UB on some non-ASCII text
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    qnum::detail::fail(name, ":", b.line, ":", b.column,
                       ": TOML syntax error: ", qnum::detail::excerpt(e.description(), 200));
  }
}

/// `file` parsed as TOML (parse_toml_text).
inline toml::table read_toml_file(const std::filesystem::path& file) {
  return parse_toml_text(read_file(file), file.string());
}

/// A config's text as JSON: JSON as it is (`json`), otherwise read as TOML (tables → objects,
/// arrays → arrays; integers stay integers). `name` (the file) starts every error.
inline nlohmann::json config_text_as_json(std::string_view text, const std::string& name, bool json) {
  if (json) {
    try {
      auto j = parse_json(text, name);
      qnum::detail::require(j.is_object(), name, ": the config must be a JSON object");
      return j;
    } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of double's range
      qnum::detail::fail(name, ": JSON error: ", qnum::detail::excerpt(e.what(), 200));
    }
  }
  const toml::table table = parse_toml_text(text, name);
  std::ostringstream out;
  out << toml::json_formatter{table};
  auto j = parse_json(out.str(), name, false);
  // Should toml++'s JSON not parse back (it is not nlohmann's), an error rather than an exception.
  qnum::detail::require(!j.is_discarded(), name, ": a TOML value with no JSON form");
  return j;
}

/// A config file as JSON (config_text_as_json): a .json file as it is, anything else as TOML.
inline nlohmann::json toml_file_as_json(const std::filesystem::path& file) {
  qnum::detail::require(std::filesystem::is_regular_file(file), "--config: cannot open '", file.string(), "'");
  return config_text_as_json(read_file(file), file.string(), file.extension() == ".json");
}

/// Fails unless every key of the object `j` is one of `allowed` (`where` starts the message).
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

}  // namespace qnum::io
