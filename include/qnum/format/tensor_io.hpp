// Former name of tensor_quantize.hpp (it does no I/O), kept so code written against it still
// builds. Include qnum/format/tensor_quantize.hpp instead.
#pragma once

#include "qnum/format/tensor_quantize.hpp"
