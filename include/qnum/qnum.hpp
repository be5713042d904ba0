// Umbrella header: everything in qnum.
#pragma once

#include "qnum/core/bits.hpp"
#include "qnum/core/error.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/core/round.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/format/format.hpp"
#include "qnum/io/npy.hpp"
