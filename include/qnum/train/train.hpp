// The training layer: evaluate.hpp (loss/accuracy over a dataset), recipe.hpp (optimizer
// and per-epoch schedule by name), checkpoint.hpp (safetensors + JSON checkpoints),
// progress.hpp (stderr progress) and trainer.hpp (the fit loop with metrics and resume).
#pragma once

#include "qnum/train/checkpoint.hpp"
#include "qnum/train/evaluate.hpp"
#include "qnum/train/progress.hpp"
#include "qnum/train/recipe.hpp"
#include "qnum/train/trainer.hpp"
