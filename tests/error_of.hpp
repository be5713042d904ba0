// error_of: the message of the qnum::Error a callable throws ("" when it throws none), for
// tests that check what a bad input is told. Shared by every test suite.
#pragma once

#include <string>

#include "qnum/core/error.hpp"

namespace qnum_test {

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

}  // namespace qnum_test
