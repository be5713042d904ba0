// The prune pass (MASE's prune_transform_pass, spec/system.md §4, without its pitfalls):
// weight and activation sparsity for every Linear (quantized ones included).
//
//   {"weight":     {"sparsity": 0.5, "method": "random" | "l1-norm", "scope": "local" | "global"},
//    "activation": {"sparsity": 0.5, "method": "random" | "l1-norm", "scope": "local" | "global"}}
//
// Weights. The mask is computed once, from the live weights at pass time (MASE ranks a
// possibly stale copy), and prunes EXACTLY round(s·n) entries: per layer (local) or over
// all layers together (global). l1-norm prunes the smallest |w| (ties: lower flat index
// first); random prunes a seeded uniformly random subset (MASE's is a Bernoulli draw with
// only the expected sparsity). The mask becomes the layer's `weight_mask` buffer and the
// pruned master weights are set to 0; the layer computes with weight ⊙ mask, so pruned
// entries receive no gradient and stay pruned through fine-tuning, and the mask is saved
// in state_dict ("<layer>.weight_mask").
//
// Activations. An input transform on each Linear multiplies its input by a mask before the
// layer's input quantizer, on every forward call (training and evaluation), as MASE's
// pre-hook does, except that masks are per sample — each slice x[i] along the first (batch)
// axis keeps all but its round(s·m) smallest |x| (l1-norm, local) — so a sample's result
// does not depend on what else is in its batch. random draws round(s·m) positions per
// sample from a counter-based stream (seed, call, sample). global l1-norm uses one threshold
// t for all layers, the s-quantile of |x| over calibration batches (required) of every
// layer's inputs, fixed at pass time: it keeps |x| > t. Gradients flow through kept entries.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/layers.hpp"

namespace qnum::passes {

enum class PruneMethod { random, l1_norm };
enum class PruneScope { local, global };

/// One side (weight or activation) of a prune config.
struct PruneSpec {
  double sparsity = 0.0;  ///< fraction of entries set to zero, in [0, 1)
  PruneMethod method = PruneMethod::random;
  PruneScope scope = PruneScope::local;
  bool active() const { return sparsity > 0.0; }
  std::string to_string() const {
    return std::string(method == PruneMethod::random ? "random" : "l1-norm") + " " +
           (scope == PruneScope::local ? "local" : "global") + " " + qnum::detail::format_double(sparsity);
  }
};

struct PruneConfig {
  PruneSpec weight, activation;
  std::uint64_t seed = 0;  ///< random masks (weights and activations)
};

namespace detail {

inline PruneSpec parse_prune_side(const nlohmann::json& j, const std::string& side) {
  using qnum::detail::require;
  require(j.is_object(), "prune config: '", side, "' must be a table, got ", j.dump());
  PruneSpec s;
  for (const auto& [key, v] : j.items()) {
    const std::string where = "prune config: " + side + "." + key;
    if (key == "sparsity") {
      require(v.is_number(), where, " must be a number");
      s.sparsity = v.get<double>();
      require(s.sparsity >= 0.0 && s.sparsity < 1.0, where, " = ", s.sparsity, " must be in [0, 1)");
    } else if (key == "method") {
      require(v.is_string(), where, " must be a string");
      const auto m = v.get<std::string>();
      if (m == "random")
        s.method = PruneMethod::random;
      else if (m == "l1-norm" || m == "l1_norm" || m == "l1")
        s.method = PruneMethod::l1_norm;
      else
        qnum::detail::fail(where, ": unknown method '", m, "' (allowed: random, l1-norm)");
    } else if (key == "scope") {
      require(v.is_string(), where, " must be a string");
      const auto m = v.get<std::string>();
      if (m == "local")
        s.scope = PruneScope::local;
      else if (m == "global")
        s.scope = PruneScope::global;
      else
        qnum::detail::fail(where, ": unknown scope '", m, "' (allowed: local, global)");
    } else if (key == "granularity") {
      require(v.is_string() && (v.get<std::string>() == "elementwise" || v.get<std::string>() == "element"), where,
              ": only \"elementwise\" is implemented (MASE's \"channel\" has no implementation either)");
    } else {
      qnum::detail::fail("prune config: unknown key '", side, ".", key,
                         "' (allowed: sparsity, method, scope, granularity)");
    }
  }
  return s;
}

/// Flat indices of the k smallest |v| (ties: lower index first).
inline std::vector<std::size_t> smallest_k(std::span<const float> v, std::size_t k) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  auto less = [&](std::size_t a, std::size_t b) {
    const float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
    return fa < fb || (fa == fb && a < b);
  };
  k = std::min(k, idx.size());
  std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), less);
  idx.resize(k);
  return idx;
}

/// k distinct indices of [0, n) drawn uniformly from `rng` (partial Fisher–Yates).
inline std::vector<std::size_t> random_k(std::size_t n, std::size_t k, std::mt19937_64& rng) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  k = std::min(k, n);
  for (std::size_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<std::size_t> pick(i, n - 1);
    std::swap(idx[i], idx[pick(rng)]);
  }
  idx.resize(k);
  return idx;
}

inline std::size_t count_for(double sparsity, std::size_t n) {
  return static_cast<std::size_t>(std::llround(sparsity * static_cast<double>(n)));
}

}  // namespace detail

/// Parses MASE's prune config (both sections optional here; a missing one prunes nothing).
inline PruneConfig parse_prune_config(const nlohmann::json& j) {
  qnum::detail::require(j.is_object(), "prune config must be a table/object, got ", j.dump());
  PruneConfig c;
  for (const auto& [key, v] : j.items()) {
    if (key == "weight")
      c.weight = detail::parse_prune_side(v, key);
    else if (key == "activation")
      c.activation = detail::parse_prune_side(v, key);
    else if (key == "seed") {
      qnum::detail::require(v.is_number_integer() && v.get<long long>() >= 0, "prune config: seed must be a ",
                            "non-negative integer");
      c.seed = v.get<std::uint64_t>();
    } else
      qnum::detail::fail("prune config: unknown key '", key, "' (allowed: weight, activation, seed)");
  }
  return c;
}

/// The weight entries a prune pass drops: for each layer (its flat weight values, in
/// module order) the flat indices to zero, exactly round(s·n) per layer (local) or over all
/// layers together (global); l1-norm takes the smallest |w| (ties: lower flat index first,
/// layers in order), random a uniformly random subset seeded by (seed, layer) or (seed,
/// 2^20) for global. The one selection rule of qnum's prune pass, the Python binding's too.
inline std::vector<std::vector<std::size_t>> select_weight_prune(const PruneSpec& w, std::uint64_t seed,
                                                                 const std::vector<std::span<const float>>& weights) {
  std::vector<std::vector<std::size_t>> drop(weights.size());
  if (!w.active()) return drop;
  if (w.scope == PruneScope::local) {
    for (std::size_t l = 0; l < weights.size(); ++l) {
      const std::size_t n = weights[l].size(), k = detail::count_for(w.sparsity, n);
      if (w.method == PruneMethod::l1_norm) {
        drop[l] = detail::smallest_k(weights[l], k);
      } else {
        std::mt19937_64 rng(nn::detail::derive_seed(seed, l));
        drop[l] = detail::random_k(n, k, rng);
      }
    }
    return drop;
  }
  std::vector<float> all;
  std::vector<std::size_t> offset{0};
  for (const auto& v : weights) {
    all.insert(all.end(), v.begin(), v.end());
    offset.push_back(all.size());
  }
  const std::size_t k = detail::count_for(w.sparsity, all.size());
  std::vector<std::size_t> flat;
  if (w.method == PruneMethod::l1_norm) {
    flat = detail::smallest_k(all, k);
  } else {
    std::mt19937_64 rng(nn::detail::derive_seed(seed, 1u << 20));
    flat = detail::random_k(all.size(), k, rng);
  }
  for (auto i : flat) {
    const std::size_t l =
        static_cast<std::size_t>(std::upper_bound(offset.begin(), offset.end(), i) - offset.begin()) - 1;
    drop[l].push_back(i - offset[l]);
  }
  return drop;
}

/// The drop mask of activation pruning for one layer input `v` of `samples` slices (see
/// the header): 1 keeps, 0 prunes. `call` numbers the layer's forward calls (random draws).
inline std::vector<float> activation_prune_mask(const PruneSpec& spec, std::uint64_t seed, std::uint64_t call,
                                                float global_threshold, std::span<const float> v,
                                                std::size_t samples) {
  std::vector<float> mask(v.size(), 1.0f);
  if (spec.scope == PruneScope::global && spec.method == PruneMethod::l1_norm) {
    for (std::size_t i = 0; i < v.size(); ++i) mask[i] = std::fabs(v[i]) > global_threshold ? 1.0f : 0.0f;
    return mask;
  }
  const std::size_t m = v.size() / samples;
  const std::size_t k = detail::count_for(spec.sparsity, m);
  for (std::size_t s = 0; s < samples; ++s) {
    std::vector<std::size_t> drop;
    if (spec.method == PruneMethod::l1_norm) {
      drop = detail::smallest_k(v.subspan(s * m, m), k);
    } else {
      std::mt19937_64 rng(nn::detail::derive_seed(nn::detail::derive_seed(seed, call), s));
      drop = detail::random_k(m, k, rng);
    }
    for (auto i : drop) mask[s * m + i] = 0.0f;
  }
  return mask;
}

/// The global l1-norm activation threshold: about round(s·n) of the calibration magnitudes
/// `seen` (|x| of every Linear input) lie at or below it (`seen` is reordered).
inline float activation_prune_threshold(double sparsity, std::vector<float>& seen) {
  qnum::detail::require(!seen.empty(), "prune: the calibration batches reached no Linear layer");
  const std::size_t k = std::min(detail::count_for(sparsity, seen.size()), seen.size() - 1);
  std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(k), seen.end());
  // Keep |x| > t with t the k-th smallest: about k of the calibration values are pruned.
  return k == 0 ? 0.0f : *std::max_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(k));
}

/// Activation pruning of one layer's input (see the header for the exact rule).
class ActivationPruner : public nn::InputTransform {
 public:
  ActivationPruner(PruneSpec spec, std::uint64_t seed, float global_threshold = 0.0f)
      : spec_(spec), seed_(seed), threshold_(global_threshold) {}

  Tensor apply(const Tensor& x, bool /*training*/) override {
    if (!spec_.active() || x.numel() == 0) return x;
    const std::size_t samples = x.rank() >= 2 ? static_cast<std::size_t>(x.shape()[0]) : 1;
    auto mask = activation_prune_mask(spec_, seed_, calls_, threshold_, x.values(), samples);
    ++calls_;
    return mul(x, Tensor(x.shape(), std::move(mask)));
  }
  std::string describe() const override { return spec_.to_string(); }
  const PruneSpec& spec() const { return spec_; }
  std::uint64_t seed() const { return seed_; }
  float threshold() const { return threshold_; }

 private:
  PruneSpec spec_;
  std::uint64_t seed_;
  float threshold_;
  std::uint64_t calls_ = 0;
};

/// Per-layer outcome of a prune pass.
struct PruneRow {
  std::string path;
  std::int64_t weights = 0, pruned = 0;  ///< entries of the weight, and how many are zero in the mask
  double sparsity() const { return weights ? static_cast<double>(pruned) / static_cast<double>(weights) : 0.0; }
  std::string activation;  ///< the activation rule installed ("" for none)
};

struct PruneReport {
  std::vector<PruneRow> rows;
  double weight_sparsity() const {
    std::int64_t n = 0, p = 0;
    for (const auto& r : rows) n += r.weights, p += r.pruned;
    return n ? static_cast<double>(p) / static_cast<double>(n) : 0.0;
  }
};

namespace detail {

/// The inputs each Linear receives on `batches` (for global activation thresholds).
class InputRecorder : public nn::ModuleObserver {
 public:
  explicit InputRecorder(std::vector<float>& out) : out_(out) {}
  void enter(nn::Module& m, std::span<const Tensor> inputs) override {
    if (dynamic_cast<nn::Linear*>(&m))
      for (float v : inputs[0].values()) out_.push_back(std::fabs(v));
  }
  void exit(nn::Module&, const Tensor&) override {}

 private:
  std::vector<float>& out_;
};

}  // namespace detail

/// Every Linear of `model` with its path, in module order.
inline std::vector<std::pair<std::string, nn::Linear*>> linear_layers(nn::Module& model) {
  std::vector<std::pair<std::string, nn::Linear*>> out;
  for (auto& [path, m] : model.named_modules())
    if (auto* l = dynamic_cast<nn::Linear*>(m)) out.emplace_back(path, l);
  return out;
}

/// Prunes `model` in place (see the header). Global l1-norm activation pruning needs
/// `calibrate`, which runs the model on calibration batches (called once, in eval mode
/// without gradients; every Linear input it reaches counts): models with inputs other than
/// one tensor (BERT) pass their own loop.
inline PruneReport prune(nn::Module& model, const PruneConfig& config, const std::function<void()>& calibrate) {
  auto layers = linear_layers(model);
  qnum::detail::require(!layers.empty() || (!config.weight.active() && !config.activation.active()),
                        "prune: the model has no Linear layer to prune");
  const PruneSpec& w = config.weight;
  if (w.active()) {
    std::vector<Tensor> live;  // the live (masked) weights the scores come from
    std::vector<std::span<const float>> weights;
    for (auto& [path, lin] : layers) live.push_back(lin->effective_weight());
    for (const auto& t : live) weights.push_back(t.values());
    const auto drop = select_weight_prune(w, config.seed, weights);
    for (std::size_t l = 0; l < layers.size(); ++l) {
      nn::Linear& lin = *layers[l].second;
      std::vector<float> mask = lin.weight_mask.defined()
                                    ? lin.weight_mask.to_vector()
                                    : std::vector<float>(static_cast<std::size_t>(lin.weight.numel()), 1.0f);
      for (auto i : drop[l]) mask[i] = 0.0f;
      lin.set_weight_mask(mask);
      auto wv = lin.weight.values();
      for (std::size_t i = 0; i < mask.size(); ++i)
        if (mask[i] == 0.0f) wv[i] = 0.0f;
    }
  }

  const PruneSpec& a = config.activation;
  float threshold = 0.0f;
  if (a.active() && a.scope == PruneScope::global && a.method == PruneMethod::l1_norm) {
    qnum::detail::require(calibrate != nullptr,
                          "prune: global l1-norm activation pruning needs calibration batches (the threshold is the ",
                          "sparsity quantile of every Linear's inputs on them)");
    std::vector<float> seen;
    {
      detail::InputRecorder rec(seen);
      const bool was_training = model.is_training();
      model.eval();
      autograd::NoGradGuard no_grad;
      auto& slot = nn::detail::module_observer();
      qnum::detail::require(slot == nullptr, "prune: another trace is running on this thread");
      slot = &rec;
      try {
        calibrate();
      } catch (...) {
        slot = nullptr;
        throw;
      }
      slot = nullptr;
      model.train(was_training);
    }
    threshold = activation_prune_threshold(a.sparsity, seen);
  }

  PruneReport report;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    auto& [path, lin] = layers[l];
    if (a.active())
      lin->input_transform =
          std::make_shared<ActivationPruner>(a, nn::detail::derive_seed(config.seed, 1000 + l), threshold);
    PruneRow row{path, lin->weight.numel(), 0, ""};
    if (lin->weight_mask.defined())
      for (float m : lin->weight_mask.values()) row.pruned += m == 0.0f;
    if (lin->input_transform) row.activation = lin->input_transform->describe();
    report.rows.push_back(row);
  }
  return report;
}

/// prune() with calibration batches given as the model's single-tensor inputs (none: no
/// calibration, an error only where global l1-norm activation pruning needs one).
inline PruneReport prune(nn::Module& model, const PruneConfig& config, const std::vector<Tensor>& calibration = {}) {
  if (calibration.empty()) return prune(model, config, std::function<void()>{});
  return prune(model, config, [&] {
    for (const auto& x : calibration) model(x);
  });
}

}  // namespace qnum::passes
