// The abstract Pruner (Optuna's BasePruner): asked by Trial::should_prune() whether the
// running trial, given its intermediate values and the study's other trials, should stop.
#pragma once

#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/sampler.hpp"

namespace qnum::search {

class Pruner {
 public:
  virtual ~Pruner() = default;
  /// True when the trial should be pruned now.
  virtual bool prune(StudyView& study, const FrozenTrial& trial) = 0;
  virtual std::string name() const = 0;
};

/// Never prunes (Optuna's NopPruner).
class NopPruner final : public Pruner {
 public:
  bool prune(StudyView&, const FrozenTrial&) override { return false; }
  std::string name() const override { return "NopPruner"; }
};

}  // namespace qnum::search
