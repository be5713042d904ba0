// Samplers by name: the one factory every program uses (`qnum search`, `qnum search
// --config`, the Lab 2 and Lab 3 searches). A name and what the sampler needs beyond it:
//   tpe      TPESampler (Optuna 4.9; `multivariate` samples the parameters jointly)
//   random   RandomSampler
//   grid     GridSampler over `grid` (Optuna's order), or with `shuffle_grid` a
//            ShuffledGridSampler: a grid too large to list, each point once in a seeded order
//   nsgaii   NSGAIISampler (`population_size`)
// A program offers all of them, or the ones it lists in `offered` (its order is the order of
// the error message); any other name is one qnum::Error naming the allowed ones.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/nsga2.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/sampler.hpp"
#include "qnum/search/shuffled_grid_sampler.hpp"
#include "qnum/search/tpe.hpp"

namespace qnum::search {

/// What a sampler may need besides its name.
struct SamplerOptions {
  std::uint64_t seed = 0;
  std::optional<GridSpace> grid;  ///< grid: the points (every parameter's choices)
  bool shuffle_grid = false;      ///< grid: a seeded order of a grid too large to list
  bool multivariate = false;      ///< tpe: sample the intersection search space jointly
  std::int64_t population_size = 50;  ///< nsgaii
  /// The names the program offers, in the order its error lists them (empty: every sampler).
  std::vector<std::string> offered;
  std::string where;  ///< starts the error message ("search", a config file's table)
};

/// Every sampler name, in the order an error lists them when a program offers them all.
inline const std::vector<std::string>& sampler_names() {
  static const std::vector<std::string> names{"tpe", "random", "grid", "nsgaii"};
  return names;
}

/// Fails unless `name` is one of `offered` (empty: every sampler): "WHERE: unknown sampler
/// 'NAME' (allowed: ...)", the names in the order offered. Programs call it on their options
/// before any work; make_sampler calls it too.
inline void require_sampler_name(const std::string& name, const std::vector<std::string>& offered = {},
                                 const std::string& where = "") {
  const auto& names = offered.empty() ? sampler_names() : offered;
  bool ok = false;
  std::string allowed;
  for (const auto& n : names) {
    ok |= n == name;
    allowed += (allowed.empty() ? "" : ", ") + n;
  }
  qnum::detail::require(ok, where.empty() ? "" : where + ": ", "unknown sampler '", name, "' (allowed: ", allowed, ")");
}

/// The sampler called `name` (the file comment); unknown or not offered: one qnum::Error.
inline std::shared_ptr<Sampler> make_sampler(const std::string& name, const SamplerOptions& o) {
  require_sampler_name(name, o.offered, o.where);
  const std::string where = o.where.empty() ? "" : o.where + ": ";
  if (name == "tpe") {
    TPEOptions t;
    t.multivariate = o.multivariate;
    return std::make_shared<TPESampler>(o.seed, t);
  }
  if (name == "random") return std::make_shared<RandomSampler>(o.seed);
  if (name == "grid") {
    qnum::detail::require(o.grid.has_value(), where, "sampler 'grid' needs the search space's grid");
    if (o.shuffle_grid) return std::make_shared<ShuffledGridSampler>(*o.grid, o.seed);
    return std::make_shared<GridSampler>(*o.grid, static_cast<std::uint32_t>(o.seed));
  }
  if (name == "nsgaii") {
    NSGAIIOptions n;
    n.population_size = o.population_size;
    return std::make_shared<NSGAIISampler>(o.seed, n);
  }
  qnum::detail::fail(where, "sampler '", name, "' is offered but has no constructor here");
}

}  // namespace qnum::search
