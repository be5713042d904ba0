// EnvGuard: an environment variable set (or unset) for a scope, for tests of code that reads
// QNUM_DATA_DIR, QNUM_CACHE_DIR, HOME, PATH and the like. Shared by every test suite.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace qnum_test {

/// Sets (or, with nullptr, unsets) an environment variable until the end of the scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~EnvGuard() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace qnum_test
