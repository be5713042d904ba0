// The optimizer and learning-rate schedule of a training run, chosen by name as MASE's
// Lightning trainer does (spec/system.md §10.3):
//   adam   torch.optim.Adam(lr, weight_decay)
//   adamw  torch.optim.AdamW(lr, weight_decay)
//   sgd    torch.optim.SGD(lr, momentum 0.9, Nesterov, weight_decay 5e-4 — MASE hard-codes
//          it; qnum uses the run's weight_decay instead when that is > 0)
// Schedules are per epoch (the rate is set once at the start of each epoch and held for
// all its steps), as MASE's CosineAnnealingLR stepped by Lightning once per epoch:
//   cosine    eta_min + (lr - eta_min)·(1 + cos(π·e / max_epochs)) / 2, eta_min = 1e-6
//   linear    lr·(1 - e / max_epochs)
//   constant  lr
// with e the 0-based epoch. Being functions of the epoch alone, they resume exactly.
#pragma once

#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/nn/schedule.hpp"

namespace qnum::train {

/// The optimizer names make_optimizer knows.
inline std::vector<std::string> optimizer_names() { return {"adam", "adamw", "sgd"}; }
/// The schedule names epoch_learning_rate knows.
inline std::vector<std::string> schedule_names() { return {"constant", "linear", "cosine"}; }
/// The floor of MASE's cosine schedule (CosineAnnealingLR's eta_min).
inline constexpr double kCosineEtaMin = 1e-6;
/// The weight decay MASE's SGD hard-codes.
inline constexpr double kMaseSgdWeightDecay = 5e-4;

/// An optimizer over `params` by name (see the file comment); an unknown name is a
/// qnum::Error listing the known ones.
inline std::unique_ptr<nn::Optimizer> make_optimizer(std::string_view name, std::vector<Tensor> params, double lr,
                                                     double weight_decay) {
  qnum::detail::require(std::isfinite(weight_decay) && weight_decay >= 0.0, "optimizer: weight_decay ", weight_decay,
                        " must be finite and >= 0");
  if (name == "adam")
    return std::make_unique<nn::Adam>(std::move(params), nn::AdamOptions{.lr = lr, .weight_decay = weight_decay});
  if (name == "adamw")
    return std::make_unique<nn::AdamW>(std::move(params), nn::AdamWOptions{.lr = lr, .weight_decay = weight_decay});
  if (name == "sgd")
    return std::make_unique<nn::SGD>(
        std::move(params), nn::SGDOptions{.lr = lr,
                                          .momentum = 0.9,
                                          .weight_decay = weight_decay > 0.0 ? weight_decay : kMaseSgdWeightDecay,
                                          .nesterov = true});
  qnum::detail::fail("optimizer: unknown name '", name, "' (known: adam, adamw, sgd)");
}

/// Checks a schedule name; an unknown one is a qnum::Error listing the known ones.
inline nn::ScheduleKind parse_schedule(std::string_view name) { return nn::parse_schedule_kind(name); }

/// The learning rate of 0-based `epoch` of a `max_epochs` run (see the file comment).
inline double epoch_learning_rate(std::string_view schedule, double lr, int epoch, int max_epochs) {
  qnum::detail::require(max_epochs >= 1 && epoch >= 0, "schedule: epoch ", epoch, " of ", max_epochs,
                        " (need max_epochs >= 1, epoch >= 0)");
  switch (parse_schedule(schedule)) {
    case nn::ScheduleKind::constant:
      return lr;
    case nn::ScheduleKind::linear:
      return lr * nn::linear_schedule_with_warmup(epoch, 0, max_epochs);
    case nn::ScheduleKind::cosine:
      return kCosineEtaMin +
             (lr - kCosineEtaMin) * (1.0 + std::cos(std::numbers::pi * static_cast<double>(epoch) / max_epochs)) / 2.0;
  }
  return lr;
}

}  // namespace qnum::train
