// The training layer: evaluate.hpp (loss/accuracy over a dataset of either input kind),
// recipe.hpp (TrainConfig, the table and text recipes, optimizer and schedules by name),
// checkpoint.hpp (safetensors + JSON checkpoints), progress.hpp (stderr progress) and
// trainer.hpp (the one fit loop with metrics and resume).
#pragma once

#include "qnum/train/checkpoint.hpp"
#include "qnum/train/evaluate.hpp"
#include "qnum/train/progress.hpp"
#include "qnum/train/recipe.hpp"
#include "qnum/train/trainer.hpp"
