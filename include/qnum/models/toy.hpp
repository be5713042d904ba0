// MASE's `toy` model (chop/models/toy/toy.py, ToyNet), the model of its search_toy_tpe.toml
// and toy_uniform.toml: seq_blocks = Linear(in, 8) ReLU Linear(8, 8) ReLU Linear(8, classes)
// on the flattened input, no normalisation. MASE sizes it from its dataset (toy_tiny: 4
// inputs, 2 classes); qnum's feature datasets (jsc, jsc-synthetic) have 16 features and 5
// classes, so `toy` is ToyNet at that size. Its layer paths "0", "2", "4" are MASE's node
// names seq_blocks_0, seq_blocks_2, seq_blocks_4.
#pragma once

#include <cstdint>
#include <memory>

#include "qnum/models/jsc.hpp"

namespace qnum::models {

/// ToyNet for 16 features and 5 classes, initialised from `seed` (PyTorch's init rules).
inline std::shared_ptr<nn::Sequential> make_toy_model(std::uint64_t seed = 0) {
  return detail::JscBuilder(seed).linear(kJscFeatures, 8).relu().linear(8, 8).relu().linear(8, kJscClasses).done();
}

}  // namespace qnum::models
