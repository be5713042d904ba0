// Shared helpers of the search tests.
#pragma once

#include <string>

#include "qnum/core/error.hpp"

namespace qnum_search_test {

/// The message of the qnum::Error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const qnum::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace qnum_search_test
