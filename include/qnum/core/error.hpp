// qnum::Error — the one exception type qnum throws for bad input.
// Messages name the family/key/value and what is allowed, e.g.
// "minifloat_ieee: exponent_width 9 must be < width 8".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qnum {

/// Thrown for invalid format parameters, wrong shapes, malformed files and unknown keys.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {

/// Concatenates its arguments with operator<< (no <format> in GCC 12).
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// Throws qnum::Error with the concatenated message.
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(concat(std::forward<Args>(args)...));
}

/// Throws unless `cond` holds.
template <class... Args>
void require(bool cond, Args&&... args) {
  if (!cond) fail(std::forward<Args>(args)...);
}

}  // namespace detail
}  // namespace qnum
