// Quoting bytes from a file inside an error message: control bytes escaped and the length
// capped, so that a qnum::Error stays one readable line whatever the file holds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qnum::detail {

/// `s` with bytes below 0x20 and 0x7f written as \n, \t, \r or \xHH, cut after `max` bytes
/// (then ending in "...").
inline std::string printable(std::string_view s, std::size_t max = 40) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f)
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else
      out += static_cast<char>(c);
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace qnum::detail
