// What a finished study reports, shared by `qnum search`, `qnum study show` and the MASE
// search configs (mase_search.hpp): a trial's parameters as text and JSON, a trial as MASE's
// best.json holds it, the metrics as a study records them, MASE's "Best trial(s)" table, and
// the best-so-far SVG of a single-objective study, and its trials as a TensorBoard log.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/io/tensorboard.hpp"

#include "qnum/search/plot.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/study.hpp"

namespace qnum::search {

/// Writes a study's completed trials as a TensorBoard log in `dir`: one scalar per trial and
/// objective (tag "trial/<name>", step = the trial's number, wall time = its completion),
/// rewritten whole from the study each time, so a resumed or shared study's log holds every
/// trial once. `names` names the objectives in order.
inline void write_study_tensorboard(Study& study, const std::filesystem::path& dir,
                                    const std::vector<std::string>& names) {
  std::vector<io::tensorboard::Scalar> scalars;
  std::int64_t first = 0;
  for (const auto& t : study.get_trials({TrialState::complete})) {
    const double wall = t.datetime_complete
                            ? std::chrono::duration<double>(t.datetime_complete->time_since_epoch()).count()
                            : 0.0;
    if (first == 0 || static_cast<std::int64_t>(wall) < first) first = static_cast<std::int64_t>(wall);
    for (std::size_t i = 0; i < t.values.size(); ++i)
      scalars.push_back({"trial/" + (i < names.size() ? names[i] : "value_" + std::to_string(i)), t.number,
                         static_cast<float>(t.values[i]), wall});
  }
  std::sort(scalars.begin(), scalars.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  io::tensorboard::write_log_atomic(dir, scalars, first > 0 ? first : static_cast<std::int64_t>(io::tensorboard::wall_time_now()));
}

/// A trial's parameters as JSON (external values: choices as declared).
inline nlohmann::json params_json(const FrozenTrial& t) {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : t.params) p[k] = to_json(to_external(t.distributions.at(k), v));
  return p;
}

/// A trial's parameters as `name=value, ...` (values as Optuna prints them).
inline std::string params_text(const FrozenTrial& t) {
  std::string s;
  for (const auto& [k, v] : t.params) s += (s.empty() ? "" : ", ") + k + "=" + to_string(to_external(t.distributions.at(k), v));
  return s;
}

/// One trial as best.json holds it: MASE's columns (number, value(s), software_metrics,
/// hardware_metrics, scaled_metrics; its sampled_config is `quantize`) and the drawn params.
inline nlohmann::json trial_json(const FrozenTrial& t) {
  const auto attr = [&](const char* k) { return t.user_attrs.value(k, nlohmann::json::object()); };
  return {{"number", t.number},
          {"values", t.values},
          {"params", params_json(t)},
          {"metrics", attr("metrics")},
          {"software_metrics", attr("software_metrics")},
          {"hardware_metrics", attr("hardware_metrics")},
          {"scaled_metrics", attr("scaled_metrics")},
          {"quantize", t.user_attrs.contains("sampled_config") ? attr("sampled_config") : attr("quantize_config")}};
}

/// The metrics as the study records them.
inline nlohmann::json metrics_json(const std::vector<Metric>& metrics) {
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& m : metrics)
    mj.push_back({{"name", m.name}, {"scale", m.scale}, {"direction", std::string(to_string(m.direction))}});
  return mj;
}

/// The best-so-far curve of a single-objective study (its completed trials and the running
/// best) as SVG at `file`.
inline void write_best_so_far_svg(Study& study, const std::string& file, const std::string& title,
                                  const std::string& y_label) {
  PlotSeries values{"trial value", {}, true}, best{"best so far", {}, false};
  for (const auto& t : study.get_trials({TrialState::complete})) values.points.emplace_back(double(t.number), t.values[0]);
  for (const auto& [n, v] : study.best_so_far()) best.points.emplace_back(double(n), v);
  write_svg_line_plot(file, {values, best}, title, "trial number", y_label);
}

/// MASE's "Best trial(s)" table (an org-mode table as its tabulate prints): trial number,
/// objective value(s), the measured metrics and the scaled ones; `best` is one trial_json or
/// an array of them.
inline std::string best_trials_table(const nlohmann::json& best, const std::vector<Metric>& metrics) {
  const auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v);
    return std::string(b);
  };
  std::vector<std::vector<std::string>> rows{{"number", "value(s)", "accuracy", "loss", "average_bitwidth",
                                              "memory_density"}};
  for (const auto& m : metrics) rows[0].push_back("scaled " + m.name);
  for (const auto& t : best.is_array() ? best : nlohmann::json::array({best})) {
    std::string values;
    for (const auto& v : t["values"]) values += (values.empty() ? "" : ", ") + num(v.get<double>());
    const nlohmann::json& sw = t["software_metrics"];
    const nlohmann::json& hw = t["hardware_metrics"];
    rows.push_back({std::to_string(t["number"].get<std::int64_t>()), values, num(sw.value("accuracy", 0.0)),
                    num(sw.value("loss", 0.0)), num(hw.value("average_bitwidth", 0.0)),
                    num(hw.value("memory_density", 0.0))});
    for (const auto& m : metrics) rows.back().push_back(num(t["scaled_metrics"].value(m.name, 0.0)));
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (std::size_t j = 0; j < rows.size(); ++j) {
    for (std::size_t i = 0; i < rows[j].size(); ++i)
      out += (i ? " | " : "| ") + rows[j][i] + std::string(width[i] - rows[j][i].size(), ' ');
    out += " |\n";
    if (j == 0) {
      for (std::size_t i = 0; i < width.size(); ++i) out += (i ? "-+-" : "|-") + std::string(width[i], '-');
      out += "-|\n";
    }
  }
  return out;
}

}  // namespace qnum::search
