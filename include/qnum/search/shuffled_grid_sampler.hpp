// ShuffledGridSampler: a grid search over a Cartesian product too large to list — the
// NAS-BERT space of MASE's tutorial 5 has about 2^60 points, while GridSampler (Optuna's
// order) holds every point in memory. Each point is visited at most once, in a seeded
// pseudo-random order, as Optuna's GridSampler does, but without materialising the grid:
//
//   product index  the point in itertools.product order over the sorted names (the last
//                  name varies fastest), decoded digit by digit (mixed radix)
//   grid id g      product index perm(g), where perm is a seeded bijection of [0, N): a
//                  4-round Feistel network on the smallest even-bit domain >= N, walked
//                  until it lands inside [0, N) (a permutation of [0, N) by construction)
//
// Trial number k < N takes grid id k; a trial whose id another worker holds takes the first
// free id of a window after it, through Storage::claim_grid_id (one transaction), so workers
// sharing a storage never run a point twice. Trials record Optuna's system attributes
// "grid_id" and "search_space", but the id-to-point map is this sampler's, not Optuna's
// GridSampler's (whose numpy shuffle needs the whole grid). A parameter the grid lacks is an
// error naming it, as in Optuna; grid parameters a trial never suggests are ignored (a
// conditional space: a 2-layer model ignores the choices of layers 2..7).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/sampler.hpp"

namespace qnum::search {

class ShuffledGridSampler final : public Sampler {
 public:
  /// `space`: name -> values (at least one each); at most 2^62 points in all.
  explicit ShuffledGridSampler(GridSpace space, std::uint64_t seed = 0) : space_(std::move(space)), seed_(seed) {
    qnum::detail::require(!space_.empty(), "ShuffledGridSampler: the search space is empty");
    n_ = 1;
    for (const auto& [name, values] : space_) {
      qnum::detail::require(!values.empty(), "ShuffledGridSampler: parameter '", name, "' has no values");
      qnum::detail::require(n_ <= (std::uint64_t(1) << 62) / values.size(),
                            "ShuffledGridSampler: the grid has more than 2^62 points");
      n_ *= values.size();
      nlohmann::json list = nlohmann::json::array();
      for (const auto& v : values) list.push_back(to_json(v));
      space_json_[name] = list;
    }
    // Strides of the mixed-radix product index: the last name varies fastest.
    std::uint64_t stride = 1;
    for (auto it = space_.rbegin(); it != space_.rend(); ++it) {
      stride_[it->first] = stride;
      stride *= it->second.size();
    }
    half_bits_ = 1;
    while (half_bits_ < 31 && (std::uint64_t(1) << (2 * half_bits_)) < n_) ++half_bits_;
  }

  /// Number of grid points.
  std::uint64_t size() const { return n_; }
  /// The product index of grid id g (a permutation of [0, size())).
  std::uint64_t product_index(std::uint64_t g) const {
    qnum::detail::require(g < n_, "ShuffledGridSampler: grid id ", g, " is outside [0, ", n_, ")");
    std::uint64_t x = g;
    do x = feistel(x);
    while (x >= n_);
    return x;
  }
  /// The point of grid id g, by parameter name.
  std::map<std::string, ParamValue> point(std::uint64_t g) const {
    const std::uint64_t p = product_index(g);
    std::map<std::string, ParamValue> out;
    for (const auto& [name, values] : space_) out.emplace(name, values[(p / stride_.at(name)) % values.size()]);
    return out;
  }
  /// Optuna's search_space system attribute of this grid.
  const nlohmann::json& search_space_json() const { return space_json_; }

  void before_trial(StudyView& study, const FrozenTrial& trial) override {
    if (trial.system_attrs.contains("grid_id") || trial.system_attrs.contains("fixed_params")) return;
    const auto n = static_cast<std::int64_t>(std::min<std::uint64_t>(n_, std::uint64_t(1) << 62));
    const std::int64_t preferred = trial.number < n ? trial.number : -1;
    // Fallbacks: the whole grid when small, else a window of ids after this trial's number.
    std::vector<std::int64_t> order;
    const std::int64_t window = std::min<std::int64_t>(n, kWindow);
    const std::int64_t start = n <= kWindow ? 0 : (trial.number + 1) % n;
    for (std::int64_t i = 0; i < window; ++i) order.push_back((start + i) % n);
    const auto g = study.storage().claim_grid_id(study.study_id(), trial.trial_id, space_json_, preferred, order);
    if (g < 0) throw StudyExhausted("ShuffledGridSampler: no free grid point");
  }
  SearchSpace infer_relative_search_space(StudyView&, const FrozenTrial&) override { return {}; }
  std::map<std::string, double> sample_relative(StudyView&, const FrozenTrial&, const SearchSpace&) override {
    return {};
  }
  double sample_independent(StudyView&, const FrozenTrial& trial, const std::string& name,
                            const Distribution& d) override {
    qnum::detail::require(trial.system_attrs.contains("grid_id"),
                          "ShuffledGridSampler: all parameters must be specified with enqueue_trial");
    const auto it = space_.find(name);
    qnum::detail::require(it != space_.end(), "ShuffledGridSampler: the parameter name '", name,
                          "' is not found in the grid");
    const auto p = product_index(trial.system_attrs["grid_id"].get<std::uint64_t>());
    const ParamValue& value = it->second[(p / stride_.at(name)) % it->second.size()];
    try {
      return to_internal(d, value);
    } catch (const qnum::Error& e) {
      qnum::detail::fail("ShuffledGridSampler: grid value ", to_string(value), " of '", name,
                         "' does not fit its distribution: ", e.what());
    }
  }
  /// Stops the study once every point has a trial (only reachable for small grids).
  void after_trial(StudyView& study, const FrozenTrial&, TrialState, const std::vector<double>&) override {
    if (n_ > kWindow) return;
    std::vector<char> held(n_, 0);
    std::uint64_t count = 0;
    for (const auto& t : study.get_trials_shared()) {
      if (!t->system_attrs.contains("grid_id") || !t->system_attrs.contains("search_space") ||
          t->system_attrs["search_space"] != space_json_ || t->state == TrialState::waiting)
        continue;
      const auto g = t->system_attrs["grid_id"].get<std::uint64_t>();
      if (g < n_ && !held[g]) held[g] = 1, ++count;
    }
    if (count >= n_) study.stop();
  }
  std::string name() const override { return "ShuffledGridSampler"; }

 private:
  static constexpr std::int64_t kWindow = 4096;

  static std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// One pass of the keyed Feistel bijection on [0, 2^(2·half_bits)).
  std::uint64_t feistel(std::uint64_t x) const {
    const std::uint64_t mask = (std::uint64_t(1) << half_bits_) - 1;
    std::uint64_t l = x >> half_bits_, r = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t f = mix(r ^ mix(seed_ * 4 + round + 0x9E3779B97F4A7C15ull)) & mask;
      const std::uint64_t t = l ^ f;
      l = r;
      r = t;
    }
    return (l << half_bits_) | r;
  }

  GridSpace space_;
  std::uint64_t seed_;
  std::uint64_t n_ = 1;
  int half_bits_ = 1;
  std::map<std::string, std::uint64_t> stride_;
  nlohmann::json space_json_ = nlohmann::json::object();
};

}  // namespace qnum::search
