// Former home of both MX families, kept so code written against it still builds: mxint and
// mxfp now have a header each (mxint.hpp, mxfp.hpp; shared machinery in mx_block.hpp) and
// the packed blocks live in mx_packed.hpp. Include those instead.
#pragma once

#include "qnum/format/mx_packed.hpp"
#include "qnum/format/mxfp.hpp"
#include "qnum/format/mxint.hpp"
