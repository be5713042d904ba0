// Quoting bytes from a file inside an error message: at most a fixed length, so a message
// about a 1 GB line stays short. (Control bytes need nothing here: qnum::Error escapes the
// whole message once.)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qnum::detail {

/// The first `max` bytes of `s` (backed off to the start of a UTF-8 sequence, so the cut
/// does not split a character), then "..." when something was cut.
inline std::string excerpt(std::string_view s, std::size_t max = 40) {
  if (s.size() <= max) return std::string(s);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

}  // namespace qnum::detail
