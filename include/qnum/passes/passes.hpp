// The passes layer: transforms (quantize, prune, LoRA) and analyses (forward trace, graph
// report and DOT, statistics profile, FLOPs/BitOPs and model size, structure records).
#pragma once

#include "qnum/passes/cost.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/pipeline.hpp"
#include "qnum/passes/profile.hpp"
#include "qnum/passes/prune.hpp"
#include "qnum/passes/quant_config.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/report.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/passes/trace.hpp"
