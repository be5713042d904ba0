// Evaluation of a classifier on a whole dataset (feature table or tokenized text): mean
// cross-entropy and accuracy over all rows, in eval mode and without recording gradients
// (so BERT's attention takes the fused kernel). The trainer's validation step, `qnum test`
// and the labs all use it, so the numbers they report are the same computation.
#pragma once

#include <cstdint>
#include <limits>

#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/models/forward.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/ops.hpp"

namespace qnum::train {

/// The result of evaluate(): mean cross-entropy and accuracy over `count` rows.
struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  std::int64_t count = 0;
};

/// Runs `forward` over `data` in batches of `batch_size` (dataset order; token batches padded
/// to a multiple of pad_to_multiple_of) with `model` in eval mode under NoGradGuard, and
/// returns the cross-entropy averaged over every row (each row's -log_softmax at its label,
/// summed in double; not a mean of batch means) and the fraction of rows whose arg-max logit
/// (the first on ties) is the label. The model's train/eval mode is restored afterwards. An
/// empty dataset gives NaN loss and accuracy and count 0.
template <class Data>
Evaluation evaluate(nn::Module& model, const models::Forward& forward, const Data& data, std::int64_t batch_size,
                    std::int64_t pad_to_multiple_of = 1) {
  qnum::detail::require(batch_size > 0, "evaluate: batch_size must be positive, got ", batch_size);
  Evaluation r;
  if (data.size() == 0) return r;
  const bool was_training = model.is_training();
  model.eval();
  autograd::NoGradGuard no_grad;
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  try {
    for (const data::Batch& b : data::batches(data, {batch_size, false, false, 0, pad_to_multiple_of})) {
      const Tensor logits = forward(b).to(Device::cpu());  // a few values per row: read back to score
      qnum::detail::require(logits.rank() == 2 && logits.size(0) == static_cast<std::int64_t>(b.labels.size()),
                            "evaluate: the model returned ", to_string(logits.shape()), " for a batch of ",
                            b.labels.size(), " rows (expected [rows, classes])");
      const std::int64_t c = logits.size(1);
      const Tensor lp = log_softmax(logits, 1);
      const float* pl = logits.data();
      const float* plp = lp.data();
      for (std::size_t i = 0; i < b.labels.size(); ++i) {
        const std::int64_t y = b.labels[i];
        qnum::detail::require(y >= 0 && y < c, "evaluate: label ", y, " of row ", b.indices[i], " is out of range [0, ",
                              c, ")");
        const float* row = pl + static_cast<std::int64_t>(i) * c;
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < c; ++k)
          if (row[k] > row[best]) best = k;
        correct += best == y;
        loss_sum -= plp[static_cast<std::int64_t>(i) * c + y];
      }
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  r.count = data.size();
  r.loss = loss_sum / static_cast<double>(r.count);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
  return r;
}

/// evaluate() of a model mapping feature rows [B, F] to logits.
inline Evaluation evaluate(nn::Module& model, const data::Dataset& data, std::int64_t batch_size) {
  return evaluate(model, models::features_forward(model), data, batch_size);
}

}  // namespace qnum::train
