// Loader for MASE reference cases (tests/fixtures/mase_ref, copied from shared/data/mase_ref):
// turns a manifest record into the CLI's spec text and role, and compares outputs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/spec_text.hpp"

namespace qnum_test {

struct MaseCase {
  std::string id, func, family, spec;  // spec: `family:key=value,...` with MASE's kwargs
  std::optional<qnum::Role> role;
  std::filesystem::path input, output;  // output empty for error cases
  std::filesystem::path rand;           // stochastic cases: MASE's uniform draws
  std::optional<std::uint64_t> seed;    // stochastic cases: torch.manual_seed before the call
  bool expect_error = false;
  std::string error_message;
  bool scaled_mean = false;  // output multiplies by a per-sample mean: allow a few ulp
  nlohmann::json record;
};

inline std::string json_value_text(const nlohmann::json& v) {
  if (v.is_null()) return "none";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number_float()) return qnum::detail::format_double(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : "x") + json_value_text(e);
    return s;
  }
  return v.dump();
}

inline std::filesystem::path mase_ref_dir() {
  if (const char* d = std::getenv("QNUM_MASE_REF_DIR")) return d;
  return std::filesystem::path(QNUM_TEST_FIXTURES_DIR) / "mase_ref";
}

/// All cases of the manifest (the committed public subset unless QNUM_MASE_REF_DIR points
/// at another folder with the same layout).
inline std::vector<MaseCase> load_mase_cases() {
  const auto dir = mase_ref_dir();
  std::ifstream in(dir / "manifest.json");
  if (!in) return {};
  const auto manifest = nlohmann::json::parse(in);
  std::vector<MaseCase> cases;
  for (const auto& r : manifest.at("cases")) {
    MaseCase c;
    c.record = r;
    c.id = r.at("id");
    c.func = r.at("func");
    c.family = c.func;
    const std::string suffix = "_quantizer";
    if (c.family.size() > suffix.size() && c.family.ends_with(suffix))
      c.family = c.family.substr(0, c.family.size() - suffix.size());
    std::string spec = c.family;
    bool first = true;
    auto add = [&](const std::string& k, const nlohmann::json& v) {
      spec += (first ? ":" : ",") + k + "=" + json_value_text(v);
      first = false;
    };
    for (const auto& [k, v] : r.at("kwargs").items()) {
      if (k == "skip_first_dim") continue;
      if (k == "q_config" && v.is_object()) {
        for (const auto& [k2, v2] : v.items()) add(k2, v2);
        continue;
      }
      add(k, v);
    }
    c.spec = spec;
    if (r.contains("role") && r.at("role").is_string()) c.role = qnum::parse_role(r.at("role").get<std::string>());
    c.input = dir / r.at("files").at("input").get<std::string>();
    if (r.contains("seed") && r.at("seed").is_number_integer()) c.seed = r.at("seed").get<std::uint64_t>();
    if (r.at("files").contains("rand")) c.rand = dir / r.at("files").at("rand").get<std::string>();
    if (r.at("files").contains("output")) c.output = dir / r.at("files").at("output").get<std::string>();
    c.expect_error = r.contains("error");
    if (c.expect_error) c.error_message = r.at("error").at("message");
    const auto& kw = r.at("kwargs");
    c.scaled_mean = (c.family == "binary" && kw.contains("bipolar") && kw.at("bipolar") == false) ||
                    (c.family == "ternary" && kw.contains("scaling_factor") && kw.at("scaling_factor") == true);
    cases.push_back(std::move(c));
  }
  return cases;
}

/// Distance in units in the last place between two floats of the same sign (large if not).
inline std::int64_t ulp_distance(float a, float b) {
  auto key = [](float x) {
    const auto u = static_cast<std::int64_t>(qnum::detail::float_bits(x));
    return u & 0x80000000 ? -(u & 0x7fffffff) : u;
  };
  const auto d = key(a) - key(b);
  return d < 0 ? -d : d;
}

}  // namespace qnum_test
