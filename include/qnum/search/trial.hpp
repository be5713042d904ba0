// Trial, the live handle an objective receives (Optuna's optuna.trial.Trial): suggest_float /
// suggest_int / suggest_categorical record each parameter in the storage as it is drawn,
// report() + should_prune() drive pruning, set_user_attr() keeps results with the trial.
// Throw TrialPruned from an objective to end the trial as PRUNED.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/distributions.hpp"
#include "qnum/search/frozen_trial.hpp"
#include "qnum/search/pruner.hpp"
#include "qnum/search/sampler.hpp"
#include "qnum/search/storage.hpp"

namespace qnum::search {

/// Thrown by an objective to stop its trial as PRUNED (Optuna's optuna.TrialPruned).
class TrialPruned : public std::exception {
 public:
  explicit TrialPruned(std::string message = "trial pruned") : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

class Trial {
 public:
  /// Called by Study after sampler.before_trial: reads the trial and draws its relative sample.
  Trial(StudyView& study, Sampler& sampler, Pruner& pruner, std::int64_t trial_id)
      : study_(&study), sampler_(&sampler), pruner_(&pruner), trial_id_(trial_id) {
    cached_ = study.storage().get_trial(trial_id);
    if (cached_.system_attrs.contains("fixed_params")) fixed_params_ = cached_.system_attrs["fixed_params"];
    relative_space_ = sampler.infer_relative_search_space(study, cached_);
    if (!relative_space_.empty()) relative_params_ = sampler.sample_relative(study, cached_, relative_space_);
  }

  std::int64_t number() const { return cached_.number; }
  std::int64_t trial_id() const { return trial_id_; }

  /// A float in [low, high] (Optuna's suggest_float), discretised by `step` or log-scaled
  /// (not both).
  double suggest_float(const std::string& name, double low, double high, std::optional<double> step = std::nullopt,
                       bool log = false) {
    const Distribution d = make(name, [&] { return Distribution(FloatDistribution(low, high, log, step)); });
    return std::get<double>(to_external(d, suggest(name, d)));
  }
  /// An integer in [low, high] (Optuna's suggest_int) with `step`, or log-scaled (step 1).
  std::int64_t suggest_int(const std::string& name, std::int64_t low, std::int64_t high, std::int64_t step = 1,
                           bool log = false) {
    const Distribution d = make(name, [&] { return Distribution(IntDistribution(low, high, log, step)); });
    return std::get<std::int64_t>(to_external(d, suggest(name, d)));
  }
  /// One of the choices (Optuna's suggest_categorical).
  ParamValue suggest_categorical(const std::string& name, std::vector<CategoricalChoice> choices) {
    const Distribution d = make(name, [&] { return Distribution(CategoricalDistribution(std::move(choices))); });
    return to_external(d, suggest(name, d));
  }
  /// Convenience: a string choice.
  std::string suggest_categorical(const std::string& name, const std::vector<std::string>& choices) {
    std::vector<CategoricalChoice> c(choices.begin(), choices.end());
    return std::get<std::string>(suggest_categorical(name, std::move(c)));
  }
  /// Convenience: an integer choice.
  std::int64_t suggest_categorical(const std::string& name, const std::vector<std::int64_t>& choices) {
    std::vector<CategoricalChoice> c(choices.begin(), choices.end());
    return std::get<std::int64_t>(suggest_categorical(name, std::move(c)));
  }

  /// Records an intermediate objective value at `step` (>= 0); a step already reported is
  /// ignored, as in Optuna. Single-objective studies only.
  void report(double value, std::int64_t step) {
    qnum::detail::require(!study_->is_multi_objective(),
                          "Trial.report is not supported for multi-objective optimization");
    qnum::detail::require(step >= 0, "Trial.report: step must be non-negative, got ", step);
    if (cached_.intermediate_values.count(step)) return;
    study_->storage().set_trial_intermediate_value(trial_id_, step, value);
    cached_.intermediate_values[step] = value;
  }
  /// Asks the study's pruner (Optuna's should_prune). Single-objective studies only.
  bool should_prune() {
    qnum::detail::require(!study_->is_multi_objective(),
                          "Trial.should_prune is not supported for multi-objective optimization");
    return pruner_->prune(*study_, cached_);
  }

  void set_user_attr(const std::string& key, const nlohmann::json& value) {
    study_->storage().set_trial_user_attr(trial_id_, key, value);
    cached_.user_attrs[key] = value;
  }
  void set_system_attr(const std::string& key, const nlohmann::json& value) {
    study_->storage().set_trial_system_attr(trial_id_, key, value);
    cached_.system_attrs[key] = value;
  }

  /// The parameters drawn so far, external values.
  std::map<std::string, ParamValue> params() const {
    std::map<std::string, ParamValue> out;
    for (const auto& [k, v] : cached_.params) out.emplace(k, to_external(cached_.distributions.at(k), v));
    return out;
  }
  const nlohmann::json& user_attrs() const { return cached_.user_attrs; }
  /// The trial as this handle knows it (parameters, reports and attributes set through it).
  const FrozenTrial& frozen() const { return cached_; }
  StudyView& study() { return *study_; }

 private:
  template <class F>
  Distribution make(const std::string& name, F&& f) {
    try {
      return f();
    } catch (const qnum::Error& e) {
      qnum::detail::fail("parameter '", name, "': ", e.what());
    }
  }

  double suggest(const std::string& name, const Distribution& d) {
    if (const auto it = cached_.distributions.find(name); it != cached_.distributions.end()) {
      check_distribution_compatibility(name, it->second, d);
      return cached_.params.at(name);
    }
    double internal = 0;
    if (fixed_params_.is_object() && fixed_params_.contains(name)) {
      try {
        internal = to_internal(d, param_value_from_json(fixed_params_[name]));
      } catch (const qnum::Error& e) {
        qnum::detail::fail("parameter '", name, "': enqueued value ", fixed_params_[name].dump(), ": ", e.what());
      }
    } else if (single(d)) {
      internal = std::holds_alternative<FloatDistribution>(d) ? std::get<FloatDistribution>(d).low
                 : std::holds_alternative<IntDistribution>(d) ? double(std::get<IntDistribution>(d).low)
                                                              : 0.0;
    } else if (const auto r = relative_params_.find(name); r != relative_params_.end()) {
      const auto s = relative_space_.find(name);
      qnum::detail::require(s != relative_space_.end() && s->second == d, "parameter '", name,
                            "': the distribution differs from the one the sampler sampled relatively");
      internal = r->second;
    } else {
      internal = sampler_->sample_independent(*study_, cached_, name, d);
    }
    qnum::detail::require(std::isfinite(internal), "parameter '", name, "': the sampler returned a non-finite value");
    study_->storage().set_trial_param(trial_id_, name, internal, d);
    cached_.distributions.insert_or_assign(name, d);
    cached_.params[name] = internal;
    return internal;
  }

  StudyView* study_;
  Sampler* sampler_;
  Pruner* pruner_;
  std::int64_t trial_id_;
  FrozenTrial cached_;
  nlohmann::json fixed_params_;
  SearchSpace relative_space_;
  std::map<std::string, double> relative_params_;
};

}  // namespace qnum::search
