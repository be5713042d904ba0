// RandomSampler (Optuna's RandomSampler): every parameter drawn independently and uniformly
// in Optuna's transformed space — log scale for log distributions, [low - step/2,
// high + step/2] rounded to the step for discrete ones, a uniform index for categorical.
// Deterministic for a seed (its own 64-bit Mersenne Twister, not numpy's stream).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "qnum/search/sampler.hpp"

namespace qnum::search {

namespace detail {

/// A double uniform in [0, 1) from the top 53 bits of one draw (no library-defined mapping).
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Optuna's _SearchSpaceTransform(transform_log=True, transform_step=True) for one
/// numerical distribution: a uniform draw in the transformed bounds, untransformed.
inline double sample_uniform_internal(std::mt19937_64& rng, const Distribution& d) {
  const double u = uniform01(rng);
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
    const auto n = static_cast<double>(c->choices.size());
    return std::min(std::floor(u * n), n - 1);
  }
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (f->log) {
      const double x = std::exp(std::log(f->low) + u * (std::log(f->high) - std::log(f->low)));
      return f->low == f->high ? x : std::clamp(x, f->low, std::nextafter(f->high, f->high - 1));
    }
    if (f->step) {
      const double lo = f->low - 0.5 * *f->step, hi = f->high + 0.5 * *f->step;
      const double t = lo + u * (hi - lo);
      return std::clamp(std::nearbyint((t - f->low) / *f->step) * *f->step + f->low, f->low, f->high);
    }
    const double t = f->low + u * (f->high - f->low);
    return f->low == f->high ? t : std::min(t, std::nextafter(f->high, f->high - 1));
  }
  const auto& i = std::get<IntDistribution>(d);
  if (i.log) {
    const double lo = std::log(double(i.low) - 0.5), hi = std::log(double(i.high) + 0.5);
    const double v = std::nearbyint(std::exp(lo + u * (hi - lo)));
    return std::clamp(v, double(i.low), double(i.high));
  }
  const double lo = double(i.low) - 0.5 * double(i.step), hi = double(i.high) + 0.5 * double(i.step);
  const double t = lo + u * (hi - lo);
  const double index = std::floor((t - double(i.low)) / double(i.step) + 0.5);
  return std::clamp(index * double(i.step) + double(i.low), double(i.low), double(i.high));
}

}  // namespace detail

class RandomSampler final : public Sampler {
 public:
  explicit RandomSampler(std::uint64_t seed = 0) : rng_(seed) {}

  SearchSpace infer_relative_search_space(StudyView&, const FrozenTrial&) override { return {}; }
  std::map<std::string, double> sample_relative(StudyView&, const FrozenTrial&, const SearchSpace&) override {
    return {};
  }
  double sample_independent(StudyView&, const FrozenTrial&, const std::string&, const Distribution& d) override {
    return detail::sample_uniform_internal(rng_, d);
  }
  void reseed_rng(std::uint64_t seed) override { rng_.seed(seed); }
  std::string name() const override { return "RandomSampler"; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace qnum::search
