// The nn layer in one include: Module, the standard layers, optimizers and LR schedules.
#pragma once

#include "qnum/nn/layers.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/nn/schedule.hpp"
