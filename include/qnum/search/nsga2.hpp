// NSGAIISampler: Optuna 4.x's NSGA-II for multi-objective studies (optuna/samplers/nsgaii/) with
// its defaults — population 50, uniform crossover (swapping_prob 0.5) with probability 0.9,
// mutation probability 1 / n_params (a mutated parameter is re-drawn at random), binary
// tournaments on Pareto dominance, elites by non-domination rank then crowding distance.
// Generations and cached parents live in trial/study system attributes under Optuna's keys
// ("NSGAIISampler:generation", "NSGAIISampler:parent:<g>"), so workers sharing a storage agree.
// Randomness is numpy's RandomState(seed) stream in Optuna's order of draws.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/multi_objective.hpp"
#include "qnum/search/sampler.hpp"
#include "qnum/search/tpe.hpp"
#include "qnum/search/tpe_random.hpp"

namespace qnum::search {

/// NSGAIISampler settings; the defaults are Optuna 4.x's.
struct NSGAIIOptions {
  std::int64_t population_size = 50;
  std::optional<double> mutation_prob;  // unset: 1 / max(1, number of parameters)
  double crossover_prob = 0.9;
  double swapping_prob = 0.5;  // uniform crossover: chance to take the second parent's value

  void validate() const {
    qnum::detail::require(population_size >= 2, "NSGAIISampler: population_size must be >= 2, got ", population_size);
    qnum::detail::require(!mutation_prob || (*mutation_prob >= 0.0 && *mutation_prob <= 1.0),
                          "NSGAIISampler: mutation_prob must be in [0, 1], got ", mutation_prob.value_or(0.0));
    qnum::detail::require(crossover_prob >= 0.0 && crossover_prob <= 1.0,
                          "NSGAIISampler: crossover_prob must be in [0, 1], got ", crossover_prob);
    qnum::detail::require(swapping_prob >= 0.0 && swapping_prob <= 1.0,
                          "NSGAIISampler: swapping_prob must be in [0, 1], got ", swapping_prob);
  }
};

/// Non-domination rank of each point (0 = Pareto front) for minimisation of every column;
/// equal points share a rank (multi_objective.hpp, Optuna's sort).
inline std::vector<int> non_domination_ranks(const std::vector<std::vector<double>>& loss) {
  return mo::nondomination_ranks(loss, 0);
}

namespace detail {

/// Optuna's _crowding_distance_sort: per objective a stable sort and the normalised gap of
/// the neighbours, summed; then sorted by distance, largest first (ties reversed, as Optuna's
/// sort + reverse).
inline void crowding_distance_sort(std::vector<const FrozenTrial*>& pop) {
  std::map<std::int64_t, double> dist;
  if (pop.empty()) return;
  const double inf = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < pop[0]->values.size(); ++i) {
    std::stable_sort(pop.begin(), pop.end(),
                     [i](const FrozenTrial* a, const FrozenTrial* b) { return a->values[i] < b->values[i]; });
    if (pop.front()->values[i] == pop.back()->values[i]) continue;
    std::vector<double> vs{-inf};
    for (const auto* t : pop) vs.push_back(t->values[i]);
    vs.push_back(inf);
    double vmin = 0, vmax = 0;
    for (double v : vs)
      if (v != -inf) {
        vmin = v;
        break;
      }
    for (auto it = vs.rbegin(); it != vs.rend(); ++it)
      if (*it != inf) {
        vmax = *it;
        break;
      }
    double width = vmax - vmin;
    if (width <= 0) width = 1.0;
    for (std::size_t j = 0; j < pop.size(); ++j) {
      const double gap = vs[j] == vs[j + 2] ? 0.0 : vs[j + 2] - vs[j];
      dist[pop[j]->number] += gap / width;
    }
  }
  std::stable_sort(pop.begin(), pop.end(),
                   [&](const FrozenTrial* a, const FrozenTrial* b) { return dist[a->number] < dist[b->number]; });
  std::reverse(pop.begin(), pop.end());
}

}  // namespace detail

/// Optuna's NSGA-II elite selection: whole ranks while they fit, the last one cut by crowding.
inline std::vector<const FrozenTrial*> nsga2_select_elite(const std::vector<const FrozenTrial*>& population,
                                                          const std::vector<StudyDirection>& directions,
                                                          std::int64_t population_size) {
  if (population.empty()) return {};
  std::vector<std::vector<double>> loss;
  for (const auto* t : population) {
    std::vector<double> v = t->values;
    for (std::size_t k = 0; k < v.size(); ++k)
      if (directions[k] == StudyDirection::maximize) v[k] = -v[k];
    loss.push_back(std::move(v));
  }
  const std::vector<int> rank = non_domination_ranks(loss);
  const int max_rank = *std::max_element(rank.begin(), rank.end());
  std::vector<const FrozenTrial*> elite;
  for (int r = 0; r <= max_rank; ++r) {
    std::vector<const FrozenTrial*> individuals;
    for (std::size_t i = 0; i < population.size(); ++i)
      if (rank[i] == r) individuals.push_back(population[i]);
    if (static_cast<std::int64_t>(elite.size() + individuals.size()) < population_size) {
      elite.insert(elite.end(), individuals.begin(), individuals.end());
    } else {
      detail::crowding_distance_sort(individuals);
      const auto n = static_cast<std::size_t>(population_size) - elite.size();
      elite.insert(elite.end(), individuals.begin(), individuals.begin() + static_cast<std::ptrdiff_t>(n));
      break;
    }
  }
  return elite;
}

/// Optuna's NSGAIISampler (see the file comment). Seeds in [0, 2^32) as numpy's RandomState.
class NSGAIISampler final : public Sampler {
 public:
  explicit NSGAIISampler(std::uint64_t seed = 0, NSGAIIOptions options = {})
      : options_(std::move(options)), rng_(check_seed(seed)), random_rng_(check_seed(seed)) {
    options_.validate();
  }

  std::string name() const override { return "NSGAIISampler"; }
  const NSGAIIOptions& options() const { return options_; }

  static constexpr const char* kGenerationKey = "NSGAIISampler:generation";
  static constexpr const char* kParentKeyPrefix = "NSGAIISampler:parent:";

  // Optuna assigns the generation lazily in sample_relative; qnum's Trial skips
  // sample_relative for an empty relative space, so it is assigned here (same value in a
  // sequential run: it depends on COMPLETE trials only).
  void before_trial(StudyView& study, const FrozenTrial& trial) override { generation_of(study, trial); }

  SearchSpace infer_relative_search_space(StudyView& study, const FrozenTrial&) override {
    SearchSpace out;
    for (auto& [name, d] : intersection_search_space(study.get_trials_shared(), /*include_pruned=*/false))
      if (!single(d)) out.emplace(name, d);
    return out;
  }

  std::map<std::string, double> sample_relative(StudyView& study, const FrozenTrial& trial,
                                                const SearchSpace& space) override {
    const std::int64_t generation = generation_of(study, trial);
    const auto all = study.get_trials_shared();  // shared, not copied
    const std::vector<const FrozenTrial*> parents = parent_population(study, all, generation);
    if (parents.empty() || space.empty()) return {};
    return make_child(study, space, parents);
  }

  double sample_independent(StudyView&, const FrozenTrial&, const std::string&, const Distribution& d) override {
    return detail::optuna_random_internal(random_rng_, d);
  }

  void reseed_rng(std::uint64_t seed) override {
    rng_ = NumpyRandomState(static_cast<std::uint32_t>(seed ^ (seed >> 32)));
    random_rng_ = NumpyRandomState(static_cast<std::uint32_t>(seed ^ (seed >> 32)));
  }

 private:
  static std::uint32_t check_seed(std::uint64_t seed) {
    qnum::detail::require(seed <= 0xffffffffull, "NSGAIISampler: seed ", seed,
                          " out of range; numpy's RandomState takes seeds in [0, 2^32)");
    return static_cast<std::uint32_t>(seed);
  }

  static std::optional<std::int64_t> generation_attr(const FrozenTrial& t) {
    if (!t.system_attrs.is_object()) return std::nullopt;
    const auto it = t.system_attrs.find(kGenerationKey);
    if (it == t.system_attrs.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<std::int64_t>();
  }

  // Optuna's get_trial_generation: the newest generation among COMPLETE trials, or the next
  // one once it holds population_size trials; stored on the trial.
  std::int64_t generation_of(StudyView& study, const FrozenTrial& trial) {
    if (const auto g = generation_attr(trial)) return *g;
    if (const auto g = generation_attr(study.storage().get_trial(trial.trial_id))) return *g;
    const auto done = study.get_trials_shared({TrialState::complete});
    std::int64_t max_gen = 0, count = 0;
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      const std::int64_t g = generation_attr(**it).value_or(-1);
      if (g < max_gen) continue;
      if (g > max_gen)
        max_gen = g, count = 1;
      else
        ++count;
    }
    const std::int64_t generation = count < options_.population_size ? max_gen : max_gen + 1;
    study.storage().set_trial_system_attr(trial.trial_id, kGenerationKey, generation);
    return generation;
  }

  using Trials = std::vector<std::shared_ptr<const FrozenTrial>>;

  std::vector<const FrozenTrial*> population(const Trials& all, std::int64_t generation) const {
    std::vector<const FrozenTrial*> out;
    for (const auto& t : all)
      if (t->state == TrialState::complete && generation_attr(*t) == generation) out.push_back(t.get());
    return out;
  }

  // Optuna's get_parent_population: cached ids (returned in trial order), or selected now
  // from the previous generation and its parents (returned in elite order) and cached.
  std::vector<const FrozenTrial*> parent_population(StudyView& study, const Trials& all, std::int64_t generation) {
    if (generation == 0) return {};
    const std::string key = kParentKeyPrefix + std::to_string(generation);
    const nlohmann::json attrs = study.storage().get_study_system_attrs(study.study_id());
    if (attrs.is_object() && attrs.contains(key)) {
      std::set<std::int64_t> ids;
      for (const auto& id : attrs[key]) ids.insert(id.get<std::int64_t>());
      std::vector<const FrozenTrial*> out;
      for (const auto& t : all)
        if (ids.count(t->trial_id)) out.push_back(t.get());
      return out;
    }
    std::vector<const FrozenTrial*> candidates = population(all, generation - 1);
    const std::vector<const FrozenTrial*> previous_parents = parent_population(study, all, generation - 1);
    candidates.insert(candidates.end(), previous_parents.begin(), previous_parents.end());
    std::vector<const FrozenTrial*> elite =
        nsga2_select_elite(candidates, study.directions(), options_.population_size);
    nlohmann::json ids = nlohmann::json::array();
    for (const auto* t : elite) ids.push_back(t->trial_id);
    study.storage().set_study_system_attr(study.study_id(), key, ids);
    return elite;
  }

  const FrozenTrial* select_parent(const std::vector<const FrozenTrial*>& pop,
                                   const std::vector<StudyDirection>& dirs) {
    const FrozenTrial* c0 = pop[rng_.randint(pop.size())];
    const FrozenTrial* c1 = pop[rng_.randint(pop.size())];
    return dominates(c0->values, c1->values, dirs) ? c0 : c1;
  }

  // Optuna's NSGAIIChildGenerationStrategy with UniformCrossover: crossover (or a random
  // parent's copy), then each parameter kept with probability 1 - mutation_prob; the others
  // are left to sample_independent.
  std::map<std::string, double> make_child(StudyView& study, const SearchSpace& space,
                                           const std::vector<const FrozenTrial*>& parents) {
    const auto& dirs = study.directions();
    std::vector<std::pair<std::string, double>> child;  // Optuna's key order
    if (rng_.next_double() < options_.crossover_prob) {
      std::vector<std::string> cat, num;
      for (const auto& [name, d] : space)
        (std::holds_alternative<CategoricalDistribution>(d) ? cat : num).push_back(name);
      for (;;) {
        child.clear();
        const FrozenTrial* p0 = select_parent(parents, dirs);
        std::vector<const FrozenTrial*> rest;
        for (const auto* t : parents)
          if (t != p0) rest.push_back(t);
        const FrozenTrial* p1 = select_parent(rest, dirs);
        const FrozenTrial* pick[2] = {p0, p1};
        if (!cat.empty()) {
          std::vector<int> mask(cat.size());
          for (auto& m : mask) m = rng_.next_double() >= options_.swapping_prob;
          for (std::size_t j = 0; j < cat.size(); ++j) child.emplace_back(cat[j], pick[mask[j]]->params.at(cat[j]));
        }
        if (!num.empty()) {
          std::vector<int> mask(num.size());
          for (auto& m : mask) m = rng_.next_double() >= options_.swapping_prob;
          for (std::size_t j = 0; j < num.size(); ++j)
            child.emplace_back(num[j], untransform(space.at(num[j]), pick[mask[j]]->params.at(num[j])));
        }
        bool ok = true;
        for (const auto& [name, v] : child) ok = ok && contains(space.at(name), v);
        if (ok) break;
      }
    } else {
      const FrozenTrial* p = parents[rng_.randint(parents.size())];
      for (const auto& [name, d] : space) child.emplace_back(name, p->params.at(name));
    }
    const double mutation_prob = options_.mutation_prob.value_or(1.0 / std::max(1.0, double(child.size())));
    std::map<std::string, double> out;
    for (const auto& [name, v] : child)
      if (rng_.next_double() >= mutation_prob) out[name] = v;
    return out;
  }

  // _SearchSpaceTransform's round trip of a parent value (log, then exp and the clip/round).
  static double untransform(const Distribution& d, double v) {
    if (const auto* f = std::get_if<FloatDistribution>(&d)) {
      if (f->log) {
        const double x = std::exp(std::log(v));
        return single(d) ? x : std::min(x, std::nextafter(f->high, f->high - 1));
      }
      if (f->step) return std::clamp(std::nearbyint((v - f->low) / *f->step) * *f->step + f->low, f->low, f->high);
      return single(d) ? v : std::min(v, std::nextafter(f->high, f->high - 1));
    }
    const auto& i = std::get<IntDistribution>(d);
    if (i.log) return std::clamp(std::nearbyint(std::exp(std::log(v))), double(i.low), double(i.high));
    return std::clamp(std::nearbyint((v - double(i.low)) / double(i.step)) * double(i.step) + double(i.low),
                      double(i.low), double(i.high));
  }

  NSGAIIOptions options_;
  NumpyRandomState rng_, random_rng_;
};

}  // namespace qnum::search
