// qnum::cuda::quantize: every format family with a device kernel, one header per family
// (quantize/<family>.hpp, as the CPU's kernel/quantize/<family>.hpp), each kernel
// (cuda/src/quantize/<family>.cu) calling the same QNUM_HD definitions as the CPU reference
// (include/qnum/format/<family>.hpp), so results are bit-identical to it.
//
// For every overload: pointers are device pointers (out may equal in); calls are asynchronous
// on `stream` (0: the default stream); bad arguments (a negative dimension, an invalid spec, a
// shape the CPU refuses, null pointers with elements to process) throw qnum::Error with the
// CPU's message before anything is launched; a failed launch or allocation throws qnum::Error
// naming it. Elementwise families take a flat count n and the stochastic index of element 0;
// the others take the tensor's C-order shape (and a Role, used where MASE's blocking needs it).
#pragma once

#include "qnum/cuda/quantize/binarize.hpp"
#include "qnum/cuda/quantize/binary.hpp"
#include "qnum/cuda/quantize/block_fp.hpp"
#include "qnum/cuda/quantize/block_log.hpp"
#include "qnum/cuda/quantize/block_minifloat.hpp"
#include "qnum/cuda/quantize/fixed.hpp"
#include "qnum/cuda/quantize/log.hpp"
#include "qnum/cuda/quantize/minifloat.hpp"
#include "qnum/cuda/quantize/minifloat_denorm.hpp"
#include "qnum/cuda/quantize/mx_block.hpp"
#include "qnum/cuda/quantize/mxfp.hpp"
#include "qnum/cuda/quantize/mxint.hpp"
#include "qnum/cuda/quantize/mxint_hardware.hpp"
#include "qnum/cuda/quantize/nvfp4.hpp"
#include "qnum/cuda/quantize/residual_sign.hpp"
#include "qnum/cuda/quantize/scale_integer.hpp"
#include "qnum/cuda/quantize/ternary.hpp"
