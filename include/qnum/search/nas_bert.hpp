// The NAS-BERT search space of MASE's tutorial 5 / lab 2 (spec/system.md §7.1), applied in
// full: a trial picks BERT's sizes and, for every square Linear of the model it built, a
// layer class {linear, identity}.
//
//   num_hidden_layers    suggest_int(name, 0, len-1): an index into the list, as MASE
//   num_attention_heads  (default lists [2,4,8], [2,4,8,16], [128,192,256,384,512],
//   hidden_size           [512,768,1024,1536,2048])
//   intermediate_size
//   "<module path>_type" suggest_categorical over {"linear", "identity"} for each Linear with
//                        in_features == out_features of the model of those sizes, in module
//                        order (bert_square_linear_paths): query, key, value, attention
//                        output dense per layer, the FFN denses when intermediate_size ==
//                        hidden_size, the pooler dense.
//
// Unlike MASE — whose setattr of num_layers/num_heads left every model at bert-tiny's 2
// layers and 2 heads — all four sizes take effect. A hidden size that is not a multiple of
// the head count (Hugging Face's BertConfig raises) ends the trial PRUNED, with the reason in
// its user attribute "pruned_reason", before any type parameter is drawn; with the default
// lists every combination divides. The model is freshly initialised (HF's init, not
// pretrained) from the given seed; identity choices replace their Linears in place
// (models::replace_with_identity), so the identity layers carry no parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_surgery.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/trial.hpp"

namespace qnum::search {

/// One sampled architecture: the config and the square Linears that became Identity.
struct NasBertChoice {
  models::BertConfig config;
  std::vector<std::string> identity;  ///< module paths, in module order
  std::int64_t square_linears = 0;    ///< how many square Linears the config has

  nlohmann::json to_json() const {
    return {{"num_hidden_layers", config.num_hidden_layers},
            {"num_attention_heads", config.num_attention_heads},
            {"hidden_size", config.hidden_size},
            {"intermediate_size", config.intermediate_size},
            {"square_linears", square_linears},
            {"identity", identity}};
  }
};

class NasBertSpace {
 public:
  /// The four size parameters, in the order a trial suggests them (MASE's order).
  static const std::vector<std::string>& size_names() {
    static const std::vector<std::string> names{"num_hidden_layers", "num_attention_heads", "hidden_size",
                                                "intermediate_size"};
    return names;
  }

  /// `base` gives everything but the four sizes (vocabulary, positions, labels, dropouts).
  explicit NasBertSpace(models::BertConfig base = models::bert_config("bert-tiny"),
                        std::vector<std::int64_t> layers = {2, 4, 8}, std::vector<std::int64_t> heads = {2, 4, 8, 16},
                        std::vector<std::int64_t> hidden = {128, 192, 256, 384, 512},
                        std::vector<std::int64_t> intermediate = {512, 768, 1024, 1536, 2048},
                        std::vector<std::string> linear_choices = {"linear", "identity"})
      : base_(std::move(base)),
        lists_{std::move(layers), std::move(heads), std::move(hidden), std::move(intermediate)},
        choices_(std::move(linear_choices)) {
    for (std::size_t k = 0; k < lists_.size(); ++k) {
      const std::string& name = size_names()[k];
      qnum::detail::require(!lists_[k].empty(), "NAS-BERT space: ", name, " needs at least one value");
      std::set<std::int64_t> seen;
      for (const auto v : lists_[k]) {
        qnum::detail::require(v > 0, "NAS-BERT space: ", name, " value ", v, " must be > 0");
        qnum::detail::require(seen.insert(v).second, "NAS-BERT space: ", name, " value ", v, " appears twice");
      }
    }
    qnum::detail::require(!choices_.empty(), "NAS-BERT space: the linear layer choices are empty");
    std::set<std::string> seen;
    for (const auto& c : choices_) {
      qnum::detail::require(c == "linear" || c == "identity", "NAS-BERT space: unknown linear layer choice '", c,
                            "' (allowed: linear, identity)");
      qnum::detail::require(seen.insert(c).second, "NAS-BERT space: linear layer choice '", c, "' appears twice");
    }
  }

  const models::BertConfig& base() const { return base_; }
  /// The value list of size parameter k (size_names() order).
  const std::vector<std::int64_t>& values(std::size_t k) const { return lists_.at(k); }
  const std::vector<std::string>& linear_choices() const { return choices_; }

  /// The config of the given sizes (base's other fields); not validated.
  models::BertConfig config(std::int64_t layers, std::int64_t heads, std::int64_t hidden,
                            std::int64_t intermediate) const {
    models::BertConfig c = base_;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.hidden_size = hidden;
    c.intermediate_size = intermediate;
    return c;
  }

  /// Draws a trial's architecture (see the file comment); throws TrialPruned for a hidden
  /// size that the head count does not divide.
  NasBertChoice sample(Trial& trial) const {
    std::int64_t v[4];
    for (std::size_t k = 0; k < 4; ++k) {
      const auto idx = trial.suggest_int(size_names()[k], 0, static_cast<std::int64_t>(lists_[k].size()) - 1);
      v[k] = lists_[k][static_cast<std::size_t>(idx)];
    }
    NasBertChoice c;
    c.config = config(v[0], v[1], v[2], v[3]);
    if (c.config.hidden_size % c.config.num_attention_heads != 0) {
      const std::string reason =
          "hidden_size " + std::to_string(c.config.hidden_size) + " is not a multiple of num_attention_heads " +
          std::to_string(c.config.num_attention_heads) + " (Hugging Face's BertConfig would raise); trial pruned";
      trial.set_user_attr("pruned_reason", reason);
      throw TrialPruned(reason);
    }
    c.config.validate();
    const auto paths = models::bert_square_linear_paths(c.config);
    c.square_linears = static_cast<std::int64_t>(paths.size());
    for (const auto& p : paths)
      if (trial.suggest_categorical(p + "_type", choices_) == "identity") c.identity.push_back(p);
    return c;
  }

  /// A fresh model of `choice` (HF's initialisation from `seed`) with its identities applied.
  static std::shared_ptr<models::BertForSequenceClassification> build(const NasBertChoice& choice, std::uint64_t seed) {
    auto m = std::make_shared<models::BertForSequenceClassification>(choice.config, seed);
    for (const auto& p : choice.identity) models::replace_with_identity(*m, p);
    return m;
  }

  /// Every parameter a trial can suggest, with its values, for a grid sampler: the four
  /// indices and the union of "<path>_type" over every size combination (the grid holds
  /// points whose type parameters a smaller model never reads).
  GridSpace grid() const {
    GridSpace g;
    for (std::size_t k = 0; k < 4; ++k) {
      auto& vals = g[size_names()[k]];
      for (std::size_t i = 0; i < lists_[k].size(); ++i) vals.emplace_back(static_cast<std::int64_t>(i));
    }
    std::vector<ParamValue> types(choices_.begin(), choices_.end());
    for (const auto l : lists_[0])
      for (const auto h : lists_[2])
        for (const auto i : lists_[3])
          for (const auto& p : models::bert_square_linear_paths(config(l, 1, h, i))) g.emplace(p + "_type", types);
    return g;
  }

  /// Number of distinct architectures (size combinations whose hidden size the heads divide,
  /// times 2^square Linears when both choices are allowed), as a double (it can exceed 2^64).
  double architectures() const {
    double n = 0;
    for (const auto l : lists_[0])
      for (const auto a : lists_[1])
        for (const auto h : lists_[2])
          for (const auto i : lists_[3]) {
            if (h % a != 0) continue;
            const auto sq = models::bert_square_linear_paths(config(l, a, h, i)).size();
            double t = 1;
            for (std::size_t s = 0; s < sq; ++s) t *= static_cast<double>(choices_.size());
            n += t;
          }
    return n;
  }

 private:
  models::BertConfig base_;
  std::vector<std::vector<std::int64_t>> lists_;
  std::vector<std::string> choices_;
};

}  // namespace qnum::search
