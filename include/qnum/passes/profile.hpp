// The statistics profile (MASE's profile_statistics_analysis_pass, spec/system.md §2.3):
// per weight (every parameter of every leaf layer) and per activation (the input of every
// leaf layer, over N batches) the count, min, max, mean, population variance (Welford, as
// MASE's variance_online), range = max - min, and mean |x| (MASE's abs_mean).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "qnum/nn/module.hpp"
#include "qnum/passes/trace.hpp"

namespace qnum::passes {

/// Streaming statistics of a set of values (Welford in double).
struct Stats {
  std::int64_t count = 0;
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  double mean = 0, m2 = 0, abs_sum = 0;

  void add(std::span<const float> v) {
    for (float f : v) {
      const double x = f;
      ++count;
      min = std::min(min, x);
      max = std::max(max, x);
      const double d = x - mean;
      mean += d / static_cast<double>(count);
      m2 += d * (x - mean);
      abs_sum += std::fabs(x);
    }
  }
  double variance() const { return count > 0 ? m2 / static_cast<double>(count) : 0.0; }  ///< population
  double range() const { return count > 0 ? max - min : 0.0; }
  double abs_mean() const { return count > 0 ? abs_sum / static_cast<double>(count) : 0.0; }
};

struct ProfileEntry {
  std::string name;  ///< "<layer>.<parameter>" for weights, "<layer>.data_in_0" for activations
  std::string kind;  ///< "weight" or "activation"
  Stats stats;
};

struct Profile {
  std::vector<ProfileEntry> entries;
  std::int64_t batches = 0;
  std::string table() const {
    std::string s =
        "name                                          kind        count        min        max       mean   "
        "variance      range   abs_mean\n";
    char buf[512];
    for (const auto& e : entries) {
      std::snprintf(buf, sizeof buf, "%-45s %-10s %6lld %10.4g %10.4g %10.4g %10.4g %10.4g %10.4g\n", e.name.c_str(),
                    e.kind.c_str(), static_cast<long long>(e.stats.count), e.stats.min, e.stats.max, e.stats.mean,
                    e.stats.variance(), e.stats.range(), e.stats.abs_mean());
      s += buf;
    }
    return s;
  }
};

namespace detail {

class ActivationRecorder : public nn::ModuleObserver {
 public:
  ActivationRecorder(nn::Module& root, Profile& p) : profile_(p) {
    for (auto& [path, m] : root.named_modules())
      if (is_leaf_layer(*m)) paths_[m] = path;
  }
  void enter(nn::Module& m, std::span<const Tensor> inputs) override {
    if (inside_ > 0) {  // within a layer: not a layer input of its own
      ++inside_;
      return;
    }
    const auto it = paths_.find(&m);
    if (it == paths_.end()) return;  // a container: its children are the layers
    inside_ = 1;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string name =
          (it->second.empty() ? std::string("model") : it->second) + ".data_in_" + std::to_string(i);
      auto slot = index_.find(name);
      if (slot == index_.end()) {
        slot = index_.emplace(name, profile_.entries.size()).first;
        profile_.entries.push_back({name, "activation", {}});
      }
      profile_.entries[slot->second].stats.add(inputs[i].values());
    }
  }
  void exit(nn::Module&, const Tensor&) override {
    if (inside_ > 0) --inside_;
  }

 private:
  Profile& profile_;
  std::map<const nn::Module*, std::string> paths_;
  std::map<std::string, std::size_t> index_;
  int inside_ = 0;
};

}  // namespace detail

/// Profiles `model`: weights as they are now, activations over whatever `run` feeds it (any
/// number of forward calls, e.g. through a text model's Forward), in eval mode without
/// gradients (the mode is restored). Profile::batches is left for the caller to set.
inline Profile profile_statistics(nn::Module& model, const std::function<void()>& run) {
  Profile p;
  for (auto& [path, m] : model.named_modules()) {
    if (!detail::is_leaf_layer(*m)) continue;
    for (auto& [name, t] : m->named_parameters()) {
      if (name.find('.') != std::string::npos) continue;
      ProfileEntry e{path.empty() ? name : path + "." + name, "weight", {}};
      e.stats.add(t.values());
      p.entries.push_back(e);
    }
  }
  detail::ActivationRecorder rec(model, p);
  const bool was_training = model.is_training();
  model.eval();
  {
    autograd::NoGradGuard no_grad;
    detail::ObserverSlot<nn::ModuleObserver> slot(nn::detail::module_observer(), &rec, "profile_statistics");
    try {
      run();
    } catch (...) {
      model.train(was_training);
      throw;
    }
  }
  model.train(was_training);
  return p;
}

/// The same over `batches` of feature rows, one forward call each.
inline Profile profile_statistics(nn::Module& model, const std::vector<Tensor>& batches) {
  Profile p = profile_statistics(model, [&] {
    for (const auto& x : batches) model(x);
  });
  p.batches = static_cast<std::int64_t>(batches.size());
  return p;
}

}  // namespace qnum::passes
