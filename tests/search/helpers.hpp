// Shared helpers of the search tests.
#pragma once

#include <string>

#include "error_of.hpp"

namespace qnum_search_test {

using qnum_test::error_of;

}  // namespace qnum_search_test
