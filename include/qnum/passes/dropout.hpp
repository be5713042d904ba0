// Dropout removal at the model level: the twin of MASE's tutorial-1 graph pass, which erases
// the dropout nodes of a traced graph (passes::remove_nodes does that on a qnum Trace). A
// qnum model's forward is C++ code, not a graph to recompile, so its Dropout layers become
// identities (p = 0) instead: training-mode outputs then equal eval-mode ones.
#pragma once

#include <cstdint>

#include "qnum/nn/layers.hpp"

namespace qnum::passes {

/// How many Dropout layers `model` has, and how many of them are active (p > 0).
struct DropoutCount {
  std::int64_t layers = 0, active = 0;
};

inline DropoutCount count_dropout(nn::Module& model) {
  DropoutCount c;
  for (auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) {
      ++c.layers;
      c.active += d->p > 0.0f;
    }
  return c;
}

/// Sets p = 0 on every Dropout of `model` (each becomes an identity in training too) and
/// returns the count before the change.
inline DropoutCount remove_dropout(nn::Module& model) {
  const DropoutCount before = count_dropout(model);
  for (auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) d->p = 0.0f;
  return before;
}

}  // namespace qnum::passes
