// LoRA (spec/system.md §5): standard low-rank adapters, done the way MASE's version does not.
//
//   y = W·x + b + (alpha / rank) · B·A·dropout(x)      A: [rank, in], B: [out, rank]
//
// insert_lora attaches A (PyTorch's Linear init, from the seed) and B (zeros, so the model
// starts unchanged) to every targeted Linear as children `lora_A` / `lora_B`, freezes every
// other parameter of the model (base weights AND biases, which are kept) except those of
// modules named in `trainable` (e.g. a classifier head), and reports the trainable counts.
// fuse_lora folds each adapter into its base weight, W' = W + (alpha/rank)·B·A, and removes
// it; the fused model computes what the adapted one did (up to float rounding).
//
// Config keys (MASE's, plus the spellings its tutorial used by mistake): rank, lora_alpha
// (alias alpha; default = rank, i.e. scaling 1), lora_dropout (alias dropout; default 0),
// target (regex on module paths; default every Linear), trainable (list of regexes), seed.
#pragma once

#include <cstdint>
#include <memory>
#include <regex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/passes/prune.hpp"

namespace qnum::passes {

struct LoraConfig {
  std::int64_t rank = 0;
  double alpha = 0.0;  ///< 0: use rank (scaling 1)
  double dropout = 0.0;
  std::string target = ".*";           ///< regex over module paths of the Linears to adapt
  std::vector<std::string> trainable;  ///< regexes of modules whose own parameters stay trainable
  std::uint64_t seed = 0;
};

inline LoraConfig parse_lora_config(const nlohmann::json& j) {
  using qnum::detail::require;
  require(j.is_object(), "lora config must be a table/object, got ", j.dump());
  LoraConfig c;
  for (const auto& [key, v] : j.items()) {
    const std::string where = "lora config: " + key;
    if (key == "rank") {
      require(v.is_number_integer(), where, " must be an integer");
      c.rank = v.get<std::int64_t>();
    } else if (key == "lora_alpha" || key == "alpha") {
      require(v.is_number(), where, " must be a number");
      c.alpha = v.get<double>();
      require(c.alpha > 0.0, where, " must be > 0");
    } else if (key == "lora_dropout" || key == "dropout") {
      require(v.is_number(), where, " must be a number");
      c.dropout = v.get<double>();
    } else if (key == "target") {
      require(v.is_string(), where, " must be a regex string");
      c.target = v.get<std::string>();
    } else if (key == "trainable") {
      require(v.is_array(), where, " must be a list of regex strings");
      for (const auto& e : v) {
        require(e.is_string(), where, " must be a list of regex strings");
        c.trainable.push_back(e.get<std::string>());
      }
    } else if (key == "seed") {
      require(v.is_number_integer(), where, " must be an integer");
      c.seed = v.get<std::uint64_t>();
    } else {
      qnum::detail::fail("lora config: unknown key '", key,
                         "' (allowed: rank, lora_alpha, alpha, lora_dropout, dropout, target, trainable, seed)");
    }
  }
  require(c.rank >= 1, "lora config: rank must be >= 1, got ", c.rank);
  require(c.dropout >= 0.0 && c.dropout < 1.0, "lora config: dropout ", c.dropout, " must be in [0, 1)");
  return c;
}

/// Trainable parameters per module (own parameters only, so rows add up to the total).
struct TrainableRow {
  std::string path, type;
  std::int64_t trainable = 0, total = 0;
};

struct TrainableReport {
  std::vector<TrainableRow> rows;
  std::int64_t trainable() const {
    std::int64_t n = 0;
    for (const auto& r : rows) n += r.trainable;
    return n;
  }
  std::int64_t total() const {
    std::int64_t n = 0;
    for (const auto& r : rows) n += r.total;
    return n;
  }
  /// A text table, one row per module with parameters, then the totals.
  std::string table() const {
    std::string out = "module                                              type              trainable      total\n";
    char buf[256];
    for (const auto& r : rows) {
      std::snprintf(buf, sizeof buf, "%-51s %-16s %10lld %10lld\n", (r.path.empty() ? "(root)" : r.path).c_str(),
                    r.type.c_str(), static_cast<long long>(r.trainable), static_cast<long long>(r.total));
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "%-51s %-16s %10lld %10lld\n", "total", "", static_cast<long long>(trainable()),
                  static_cast<long long>(total()));
    return out + buf;
  }
};

inline TrainableReport trainable_parameters(nn::Module& model) {
  TrainableReport r;
  for (auto& [path, m] : model.named_modules()) {
    TrainableRow row{path, m->type_name(), 0, 0};
    // Own parameters: those whose names have no dot.
    for (auto& [name, t] : m->named_parameters()) {
      if (name.find('.') != std::string::npos) continue;
      row.total += t.numel();
      if (t.requires_grad()) row.trainable += t.numel();
    }
    if (row.total > 0) r.rows.push_back(row);
  }
  return r;
}

/// Attaches one adapter to `lin`: A from `seed` (PyTorch's Linear init), B = 0, the given
/// scaling (alpha / rank) and adapter dropout. Freezes nothing (insert_lora does).
inline void attach_lora(nn::Linear& lin, std::int64_t rank, float scaling, double dropout, std::uint64_t seed) {
  qnum::detail::require(!lin.lora_A, "attach_lora: the layer already has an adapter");
  lin.lora_A = lin.register_module("lora_A", std::make_shared<nn::Linear>(lin.in_features, rank, false, seed));
  lin.lora_B = lin.register_module("lora_B", std::make_shared<nn::Linear>(rank, lin.out_features, false, seed));
  std::fill(lin.lora_B->weight.values().begin(), lin.lora_B->weight.values().end(), 0.0f);
  if (dropout > 0.0)
    lin.lora_dropout = lin.register_module(
        "lora_dropout", std::make_shared<nn::Dropout>(static_cast<float>(dropout), nn::detail::derive_seed(seed, 7)));
  lin.lora_scaling = scaling;
  lin.lora_A->train(lin.is_training());
  lin.lora_B->train(lin.is_training());
  if (lin.lora_dropout) lin.lora_dropout->train(lin.is_training());
}

/// Attaches adapters (see the header) and returns the trainable-parameter report. An
/// adapter already present, a rank larger than min(in, out), or a target regex matching no
/// Linear is an error; nothing is changed then.
inline TrainableReport insert_lora(nn::Module& model, const LoraConfig& c) {
  using qnum::detail::require;
  require(c.rank >= 1, "insert_lora: rank must be >= 1, got ", c.rank);
  std::regex target, keep;
  try {
    target = std::regex(c.target);
  } catch (const std::regex_error& e) {
    qnum::detail::fail("insert_lora: bad target regex '", c.target, "': ", e.what());
  }
  std::vector<std::pair<std::string, nn::Linear*>> chosen;
  std::string names;
  for (auto& [path, lin] : linear_layers(model)) {
    if (path.find("lora_") != std::string::npos) continue;  // adapters' own Linears
    names += (names.empty() ? "" : ", ") + path;
    if (!std::regex_match(path, target)) continue;
    require(!lin->lora_A, "insert_lora: '", path, "' already has a LoRA adapter (fuse it first)");
    require(c.rank <= std::min(lin->in_features, lin->out_features), "insert_lora: rank ", c.rank,
            " is larger than layer '", path, "' allows (in ", lin->in_features, ", out ", lin->out_features, ")");
    chosen.emplace_back(path, lin);
  }
  require(!chosen.empty(), "insert_lora: target '", c.target, "' matches no Linear (layers: ", names, ")");

  std::vector<std::regex> trainable;
  for (const auto& t : c.trainable) {
    try {
      trainable.emplace_back(t);
    } catch (const std::regex_error& e) {
      qnum::detail::fail("insert_lora: bad trainable regex '", t, "': ", e.what());
    }
  }
  model.freeze();
  for (auto& [path, m] : model.named_modules())
    for (const auto& re : trainable)
      if (std::regex_match(path, re))
        for (auto& [name, t] : m->named_parameters()) t.set_requires_grad(true);

  const double alpha = c.alpha > 0.0 ? c.alpha : static_cast<double>(c.rank);
  std::uint64_t n = 0;
  for (auto& [path, lin] : chosen)
    attach_lora(*lin, c.rank, static_cast<float>(alpha / static_cast<double>(c.rank)), c.dropout,
                nn::detail::derive_seed(c.seed, n++));
  return trainable_parameters(model);
}

/// w [out, in] += scaling · b [out, r] · a [r, in] for the adapter of `lin` (a and b: its
/// adapter's weights, raw or as the forward uses them), each sum in double.
inline void add_lora_update(std::span<float> w, std::span<const float> a, std::span<const float> b,
                            const nn::Linear& lin) {
  const std::int64_t r = lin.lora_A->out_features, in = lin.in_features, out = lin.out_features;
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t i = 0; i < in; ++i) {
      double acc = 0.0;
      for (std::int64_t k = 0; k < r; ++k) acc += static_cast<double>(b[o * r + k]) * a[k * in + i];
      w[o * in + i] += static_cast<float>(lin.lora_scaling * acc);
    }
}

/// Folds every adapter into its base weight and removes it; returns how many were fused.
/// The base weights keep their (frozen) trainability.
inline std::size_t fuse_lora(nn::Module& model) {
  std::size_t fused = 0;
  // The adapted layers first: the adapters are Linear layers too, and fusing frees them, so
  // a walk over every Linear would read freed adapters after their parent was fused.
  std::vector<std::pair<std::string, nn::Linear*>> adapted;
  for (auto& [path, lin] : linear_layers(model))
    if (lin->lora_A) adapted.emplace_back(path, lin);
  for (auto& [path, lin] : adapted) {
    qnum::detail::require(!lin->weight_mask.defined(), "fuse_lora: layer '", path,
                          "' is pruned; fusing would put the adapter's update under its mask (fuse before pruning)");
    add_lora_update(lin->weight.values(), lin->lora_A->weight.values(), lin->lora_B->weight.values(), *lin);
    lin->remove_module("lora_A");
    lin->remove_module("lora_B");
    if (lin->lora_dropout) lin->remove_module("lora_dropout");
    lin->lora_A.reset();
    lin->lora_B.reset();
    lin->lora_dropout.reset();
    lin->lora_scaling = 0.0f;
    ++fused;
  }
  return fused;
}

}  // namespace qnum::passes
