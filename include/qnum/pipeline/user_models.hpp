// The user's own models, by name, in every program: $QNUM_MODELS names a TOML file whose
// [models.NAME] tables register NAME as an architecture string of a built-in family, so
// `qnum train NAME ...`, every other command and the lab programs take it:
//
//   [models.jsc-custom]   # the lab reports' network, 1,295 parameters
//   architecture = "jsc-seq:bn,relu,linear32,bn,relu,dropout0.2,linear16,bn,relu,dropout0.2,linear5,bn,relu"
//   description = "lab 1's jsc-custom"
//
// (A Module written in C++ is registered by the program that holds it:
// register_model(name, factory); see docs/models.md.)
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/io/config_file.hpp"
#include "qnum/core/error.hpp"
#include "qnum/pipeline/registry.hpp"

namespace qnum::pipeline {

/// Registers every [models.NAME] of `file`; each architecture is built once here, so a bad one
/// is an error naming the file and the model before any work starts.
inline void register_models_file(const std::filesystem::path& file) {
  const std::string where = "QNUM_MODELS file '" + file.string() + "'";
  qnum::detail::require(std::filesystem::is_regular_file(file), where, ": no such file");
  const nlohmann::json j = io::toml_file_as_json(file);
  io::require_keys(j, where, {"models"});
  qnum::detail::require(j.contains("models") && j["models"].is_object() && !j["models"].empty(), where,
                        ": needs [models.NAME] tables with an architecture, e.g. [models.jsc-custom] architecture = "
                        "\"jsc-seq:bn,relu,linear5\"");
  for (const auto& [name, m] : j["models"].items()) {
    const std::string at = where + ", [models." + name + "]";
    qnum::detail::require(m.is_object(), at, ": must be a table");
    io::require_keys(m, at, {"architecture", "description"});
    qnum::detail::require(m.contains("architecture") && m["architecture"].is_string(), at,
                          ": needs architecture = \"...\" (e.g. jsc-seq:..., jsc-mlp:16-32-5, bert:2-128-2-512)");
    const std::string arch = m["architecture"].get<std::string>();
    qnum::detail::require(!find_model(name) || detail::user_models().count(name) != 0, at,
                          ": '", name, "' is a built-in model name; choose another");
    qnum::detail::require(arch != name, at, ": the architecture cannot be the model's own name");
    try {
      make_classifier(arch);  // a bad architecture fails here, naming the file
    } catch (const qnum::Error& e) {
      qnum::detail::fail(at, ": ", e.what());
    }
    register_model(name, arch);
    if (m.contains("description")) {
      qnum::detail::require(m["description"].is_string(), at, ": description must be a string");
      detail::user_models()[name].description = m["description"].get<std::string>();
    }
  }
}

/// Registers the models of $QNUM_MODELS when it is set (every program calls this first).
inline void register_models_from_env() {
  if (const char* file = std::getenv("QNUM_MODELS"); file != nullptr && *file != '\0') register_models_file(file);
}

}  // namespace qnum::pipeline
