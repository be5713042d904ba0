// Learning-rate schedules as pure functions of the step: constant, linear warm-up then
// linear decay to 0, and cosine with warm-up, with Hugging Face transformers' formulas
// (get_constant_schedule_with_warmup, get_linear_schedule_with_warmup,
// get_cosine_schedule_with_warmup). Being stateless, a resumed run needs only the step
// number to continue its schedule; the trainer calls opt.set_lr(schedule.lr(step)).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum::nn {

namespace detail {

inline void check_schedule(const char* name, std::int64_t step, std::int64_t warmup, std::int64_t total,
                           bool needs_total) {
  qnum::detail::require(step >= 0, name, ": step ", step, " must be >= 0");
  qnum::detail::require(warmup >= 0, name, ": warmup_steps ", warmup, " must be >= 0");
  if (needs_total)
    qnum::detail::require(total >= 1 && warmup <= total, name, ": total_steps ", total,
                          " must be >= 1 and >= warmup_steps ", warmup);
}

/// step / warmup during the warm-up (HF divides by max(1, warmup)).
inline double warmup_factor(std::int64_t step, std::int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup));
}

}  // namespace detail

/// Multiplier of the base rate: step / warmup_steps during warm-up, then 1.
inline double constant_schedule(std::int64_t step, std::int64_t warmup_steps = 0) {
  detail::check_schedule("constant schedule", step, warmup_steps, 0, false);
  return step < warmup_steps ? detail::warmup_factor(step, warmup_steps) : 1.0;
}

/// Multiplier: linear from 0 to 1 over warmup_steps, then linear down to 0 at total_steps
/// (and 0 after it).
inline double linear_schedule_with_warmup(std::int64_t step, std::int64_t warmup_steps, std::int64_t total_steps) {
  detail::check_schedule("linear schedule", step, warmup_steps, total_steps, true);
  if (step < warmup_steps) return detail::warmup_factor(step, warmup_steps);
  return std::max(0.0, static_cast<double>(total_steps - step) /
                           static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps)));
}

/// Multiplier: linear warm-up, then 0.5·(1 + cos(π·2·num_cycles·progress)) with progress
/// going 0 → 1 from warmup_steps to total_steps; the default half cycle ends at 0. As HF,
/// progress is not clamped past total_steps (the factor stays >= 0).
inline double cosine_schedule_with_warmup(std::int64_t step, std::int64_t warmup_steps, std::int64_t total_steps,
                                          double num_cycles = 0.5) {
  detail::check_schedule("cosine schedule", step, warmup_steps, total_steps, true);
  qnum::detail::require(std::isfinite(num_cycles) && num_cycles >= 0.0, "cosine schedule: num_cycles ", num_cycles,
                        " must be finite and >= 0");
  if (step < warmup_steps) return detail::warmup_factor(step, warmup_steps);
  const double progress = static_cast<double>(step - warmup_steps) /
                          static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * num_cycles * 2.0 * progress)));
}

/// Which schedule a run uses (the trainer's --schedule / TOML key).
enum class ScheduleKind { constant, linear, cosine };

inline std::string_view to_string(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::constant:
      return "constant";
    case ScheduleKind::linear:
      return "linear";
    case ScheduleKind::cosine:
      return "cosine";
  }
  return "?";
}

/// "constant", "linear" or "cosine"; anything else is an error listing those.
inline ScheduleKind parse_schedule_kind(std::string_view name) {
  for (auto k : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::cosine})
    if (name == to_string(k)) return k;
  qnum::detail::fail("schedule: unknown name '", name, "' (known: constant, linear, cosine)");
}

/// A schedule with its settings: lr(step) = base_lr · factor(step).
struct LRSchedule {
  ScheduleKind kind = ScheduleKind::constant;
  double base_lr = 1e-3;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;  ///< needed (>= 1) by linear and cosine
  double num_cycles = 0.5;       ///< cosine only

  double factor(std::int64_t step) const {
    switch (kind) {
      case ScheduleKind::constant:
        return constant_schedule(step, warmup_steps);
      case ScheduleKind::linear:
        return linear_schedule_with_warmup(step, warmup_steps, total_steps);
      case ScheduleKind::cosine:
        return cosine_schedule_with_warmup(step, warmup_steps, total_steps, num_cycles);
    }
    return 1.0;
  }
  double lr(std::int64_t step) const {
    qnum::detail::require(std::isfinite(base_lr) && base_lr >= 0.0, "schedule: base_lr ", base_lr,
                          " must be finite and >= 0");
    return base_lr * factor(step);
  }
};

}  // namespace qnum::nn
