// The tensor layer in one include: Tensor, autograd and every differentiable op.
#pragma once

#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/ops_attention.hpp"
#include "qnum/tensor/ops_elementwise.hpp"
#include "qnum/tensor/ops_linalg.hpp"
#include "qnum/tensor/ops_nn.hpp"
#include "qnum/tensor/ops_quant.hpp"
#include "qnum/tensor/ops_reduce.hpp"
#include "qnum/tensor/ops_shape.hpp"
#include "qnum/tensor/tensor.hpp"
