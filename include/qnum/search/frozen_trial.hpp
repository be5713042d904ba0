// Trial states, study directions and FrozenTrial — the record of one trial as a storage
// holds it — with Optuna's enum values and names (optuna/trial/_state.py,
// optuna/study/_study_direction.py), which are also what Optuna's database stores.
#pragma once

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/distributions.hpp"

namespace qnum::search {

/// Optuna's TrialState (same numbers).
enum class TrialState : int { running = 0, complete = 1, pruned = 2, fail = 3, waiting = 4 };

/// Optuna's StudyDirection (same numbers).
enum class StudyDirection : int { not_set = 0, minimize = 1, maximize = 2 };

/// "RUNNING", "COMPLETE", ... (the names Optuna's database stores).
inline std::string_view to_string(TrialState s) {
  constexpr std::string_view names[] = {"RUNNING", "COMPLETE", "PRUNED", "FAIL", "WAITING"};
  return names[static_cast<int>(s)];
}
inline TrialState parse_trial_state(std::string_view s) {
  for (int i = 0; i <= 4; ++i)
    if (to_string(static_cast<TrialState>(i)) == s) return static_cast<TrialState>(i);
  qnum::detail::fail("unknown trial state '", std::string(s), "' (allowed: RUNNING, COMPLETE, PRUNED, FAIL, WAITING)");
}
inline bool is_finished(TrialState s) { return s != TrialState::running && s != TrialState::waiting; }

/// "NOT_SET", "MINIMIZE", "MAXIMIZE".
inline std::string_view to_string(StudyDirection d) {
  constexpr std::string_view names[] = {"NOT_SET", "MINIMIZE", "MAXIMIZE"};
  return names[static_cast<int>(d)];
}
/// Accepts minimize/maximize in any case (as the database and the CLI spell them).
inline StudyDirection parse_direction(std::string_view s) {
  std::string lower(s);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "minimize") return StudyDirection::minimize;
  if (lower == "maximize") return StudyDirection::maximize;
  if (lower == "not_set") return StudyDirection::not_set;
  qnum::detail::fail("unknown study direction '", std::string(s), "' (allowed: minimize, maximize)");
}

using Clock = std::chrono::system_clock;
using TimePoint = std::chrono::time_point<Clock, std::chrono::microseconds>;
inline TimePoint now() { return std::chrono::time_point_cast<std::chrono::microseconds>(Clock::now()); }

/// One trial as stored: parameters in the internal representation (see distributions.hpp)
/// with their distributions, objective values (empty until finished with values),
/// intermediate values by step, and user/system attributes as JSON objects.
struct FrozenTrial {
  std::int64_t number = -1;    // 0, 1, ... within the study
  std::int64_t trial_id = -1;  // unique within the storage
  TrialState state = TrialState::running;
  std::vector<double> values;
  std::map<std::string, double> params;
  std::map<std::string, Distribution> distributions;
  std::map<std::int64_t, double> intermediate_values;
  nlohmann::json user_attrs = nlohmann::json::object();
  nlohmann::json system_attrs = nlohmann::json::object();
  std::optional<TimePoint> datetime_start, datetime_complete;

  /// The external value of a parameter (double, int64 or the categorical choice).
  ParamValue param(const std::string& name) const {
    const auto it = params.find(name);
    qnum::detail::require(it != params.end(), "trial ", number, " has no parameter '", name, "'");
    return to_external(distributions.at(name), it->second);
  }
  /// The single objective value; an error for multi-objective or unfinished trials.
  double value() const {
    qnum::detail::require(values.size() == 1, "trial ", number, " has ", values.size(),
                          " objective values; value() needs exactly one");
    return values[0];
  }
  std::optional<std::int64_t> last_step() const {
    if (intermediate_values.empty()) return std::nullopt;
    return intermediate_values.rbegin()->first;
  }
};

/// Whether `a` Pareto-dominates `b` under the directions (no worse in every objective,
/// better in one); Optuna's _dominates for complete trials.
inline bool dominates(const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<StudyDirection>& dirs) {
  bool better = false;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    const double x = dirs[i] == StudyDirection::maximize ? -a[i] : a[i];
    const double y = dirs[i] == StudyDirection::maximize ? -b[i] : b[i];
    if (x > y) return false;
    if (x < y) better = true;
  }
  return better;
}

}  // namespace qnum::search
