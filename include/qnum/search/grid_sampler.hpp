// GridSampler (Optuna's GridSampler): every combination of the given values exactly once.
// The grid is the Cartesian product over the parameter names in sorted order (the last name
// varies fastest), shuffled exactly as Optuna shuffles it (numpy's RandomState(seed).shuffle,
// reproduced: MT19937 init_genrand + bounded rejection draws), so a grid id names the same
// point in qnum and Optuna. Trial number k < grid size takes grid id k; other trials (or
// collisions) take a free point through Storage::claim_grid_id, atomically, so workers
// sharing a storage never run a point twice while free points remain. The study stops when
// the grid is exhausted.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/sampler.hpp"

namespace qnum::search {

/// Parameter name -> the values to try (None, bool, int, float or str).
using GridSpace = std::map<std::string, std::vector<ParamValue>>;

namespace detail {

/// numpy's legacy random_interval(max) on an MT19937 stream: the smallest bit mask >= max,
/// 32-bit draws masked until one is <= max.
inline std::uint32_t numpy_random_interval(std::mt19937& mt, std::uint32_t max) {
  if (max == 0) return 0;
  std::uint32_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  std::uint32_t v;
  while ((v = static_cast<std::uint32_t>(mt()) & mask) > max) {
  }
  return v;
}

/// numpy.random.RandomState(seed).shuffle(list) as a permutation of [0, n).
inline std::vector<std::int64_t> numpy_shuffled_indices(std::size_t n, std::uint32_t seed) {
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::int64_t>(i);
  std::mt19937 mt(seed);  // init_genrand(seed), as numpy's legacy integer seeding
  for (std::size_t i = n; i-- > 1;) {
    const auto j = numpy_random_interval(mt, static_cast<std::uint32_t>(i));
    std::swap(idx[i], idx[j]);
  }
  return idx;
}

}  // namespace detail

class GridSampler final : public Sampler {
 public:
  /// `seed` orders the grid as Optuna's GridSampler(search_space, seed) does (None = 0).
  explicit GridSampler(GridSpace space, std::uint32_t seed = 0) : space_(std::move(space)) {
    qnum::detail::require(!space_.empty(), "GridSampler: the search space is empty");
    std::size_t n = 1;
    for (const auto& [name, values] : space_) {
      qnum::detail::require(!values.empty(), "GridSampler: parameter '", name, "' has no values");
      qnum::detail::require(n <= (std::size_t(1) << 31) / values.size(),
                            "GridSampler: the grid has more than 2^31 points");
      n *= values.size();
      nlohmann::json list = nlohmann::json::array();
      for (const auto& v : values) list.push_back(to_json(v));
      space_json_[name] = list;
    }
    // itertools.product order, then Optuna's shuffle.
    std::vector<std::vector<ParamValue>> product(n);
    for (std::size_t g = 0; g < n; ++g) {
      std::size_t rest = g;
      std::vector<ParamValue> point(space_.size());
      std::size_t k = space_.size();
      for (auto it = space_.rbegin(); it != space_.rend(); ++it) {
        point[--k] = it->second[rest % it->second.size()];
        rest /= it->second.size();
      }
      product[g] = std::move(point);
    }
    const auto perm = detail::numpy_shuffled_indices(n, seed);
    grids_.resize(n);
    for (std::size_t i = 0; i < n; ++i) grids_[i] = product[static_cast<std::size_t>(perm[i])];
  }

  std::size_t size() const { return grids_.size(); }
  /// The point of grid id g, by parameter name.
  std::map<std::string, ParamValue> point(std::int64_t g) const {
    std::map<std::string, ParamValue> out;
    std::size_t k = 0;
    for (const auto& [name, values] : space_) out.emplace(name, grids_.at(static_cast<std::size_t>(g))[k++]);
    return out;
  }
  /// Optuna's search_space system attribute of this grid.
  const nlohmann::json& search_space_json() const { return space_json_; }

  void before_trial(StudyView& study, const FrozenTrial& trial) override {
    if (trial.system_attrs.contains("grid_id") || trial.system_attrs.contains("fixed_params")) return;
    const std::int64_t n = static_cast<std::int64_t>(grids_.size());
    const std::int64_t preferred = trial.number < n ? trial.number : -1;
    std::vector<std::int64_t> order(grids_.size());
    for (std::int64_t g = 0; g < n; ++g) order[static_cast<std::size_t>(g)] = g;
    const auto g = study.storage().claim_grid_id(study.study_id(), trial.trial_id, space_json_, preferred, order);
    // Optuna would re-evaluate a point here; qnum never runs a point twice.
    if (g < 0)
      throw StudyExhausted("GridSampler: no free grid point (every point is finished or running in another worker)");
  }
  SearchSpace infer_relative_search_space(StudyView&, const FrozenTrial&) override { return {}; }
  std::map<std::string, double> sample_relative(StudyView&, const FrozenTrial&, const SearchSpace&) override {
    return {};
  }
  double sample_independent(StudyView&, const FrozenTrial& trial, const std::string& name,
                            const Distribution& d) override {
    qnum::detail::require(trial.system_attrs.contains("grid_id"),
                          "GridSampler: all parameters must be specified when using GridSampler with enqueue_trial");
    const auto it = space_.find(name);
    qnum::detail::require(it != space_.end(), "GridSampler: the parameter name '", name, "' is not found in the grid");
    const auto g = trial.system_attrs["grid_id"].get<std::int64_t>();
    const auto& value =
        grids_.at(static_cast<std::size_t>(g))[static_cast<std::size_t>(std::distance(space_.begin(), it))];
    try {
      return to_internal(d, value);
    } catch (const qnum::Error& e) {
      qnum::detail::fail("GridSampler: grid value ", to_string(value), " of '", name,
                         "' does not fit its distribution: ", e.what());
    }
  }
  /// Stops the study when no point is free: every point is finished or running (this
  /// trial's included). Optuna stops only when all are finished and lets a worker re-run a
  /// point another one is running; qnum never runs a point twice.
  void after_trial(StudyView& study, const FrozenTrial&, TrialState, const std::vector<double>&) override {
    if (free_grid_ids(study).empty()) study.stop();
  }
  /// True when every point has a finished trial (Optuna's is_exhausted).
  bool is_exhausted(StudyView& study) const { return unvisited_grid_ids(study, false).empty(); }
  /// Points that no trial has finished and no trial is running.
  std::vector<std::int64_t> free_grid_ids(StudyView& study) const { return unvisited_grid_ids(study, true, false); }
  std::string name() const override { return "GridSampler"; }

 private:
  // Optuna's _get_unvisited_grid_ids: not finished and not running (or, if that leaves
  // none, not finished).
  std::vector<std::int64_t> unvisited_grid_ids(StudyView& study, bool exclude_running = true,
                                               bool fall_back_to_running = true) const {
    std::vector<char> visited(grids_.size(), 0), running(grids_.size(), 0);
    for (const auto& shared : study.get_trials_shared()) {
      const FrozenTrial& t = *shared;
      if (!t.system_attrs.contains("grid_id") || !t.system_attrs.contains("search_space") ||
          t.system_attrs["search_space"] != space_json_)
        continue;
      const auto g = static_cast<std::size_t>(t.system_attrs["grid_id"].get<std::int64_t>());
      if (g >= grids_.size()) continue;
      if (is_finished(t.state))
        visited[g] = 1;
      else if (t.state == TrialState::running)
        running[g] = 1;
    }
    std::vector<std::int64_t> out;
    for (std::size_t g = 0; g < grids_.size(); ++g)
      if (!visited[g] && !(exclude_running && running[g])) out.push_back(static_cast<std::int64_t>(g));
    if (out.empty() && exclude_running && fall_back_to_running)
      for (std::size_t g = 0; g < grids_.size(); ++g)
        if (!visited[g]) out.push_back(static_cast<std::int64_t>(g));
    return out;
  }

  GridSpace space_;
  nlohmann::json space_json_ = nlohmann::json::object();
  std::vector<std::vector<ParamValue>> grids_;
};

}  // namespace qnum::search
