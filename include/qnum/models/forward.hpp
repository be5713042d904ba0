// A classifier as the training loop, evaluation and prediction see it: a module plus the
// function that maps one batch (feature rows or padded token ids, data/dataset.hpp) to logits
// [rows, classes]. Feature models call Module::forward on the features; BERT's forward takes
// the token arrays (bert_forward, models/bert.hpp).
#pragma once

#include <functional>
#include <memory>

#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/nn/module.hpp"

namespace qnum::models {

/// Logits [rows, classes] of a model for one batch.
using Forward = std::function<Tensor(const data::Batch&)>;

/// The Forward of a module that maps features [B, F] to logits (the caller keeps `m` alive).
inline Forward features_forward(nn::Module& m) {
  return [&m](const data::Batch& b) {
    qnum::detail::require(b.features.defined(), "this model takes feature rows, but the data are tokenized text");
    return m.forward(b.features.to(m.device()));  // the batch goes where the model is
  };
}

/// The same, sharing ownership of the module.
inline Forward features_forward(std::shared_ptr<nn::Module> m) {
  return [m](const data::Batch& b) {
    qnum::detail::require(b.features.defined(), "this model takes feature rows, but the data are tokenized text");
    return m->forward(b.features.to(m->device()));
  };
}

}  // namespace qnum::models
