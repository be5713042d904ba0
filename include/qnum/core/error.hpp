// qnum::Error — the one exception type qnum throws for bad input.
// Messages name the family/key/value and what is allowed, e.g.
// "minifloat_ieee: exponent_width 9 must be < width 8".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace qnum {

namespace detail {

/// `s` as one printable line: control bytes (C0, DEL, the C1 range and U+2028/U+2029, which
/// some terminals and log viewers break lines on) and bytes that are not UTF-8 are written
/// as \n, \t, \r or \xHH; valid UTF-8 text and backslashes stay as they are, so escaping an
/// escaped message changes nothing.
inline std::string one_line(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](unsigned char c) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      (out += "\\x") += {hex[c >> 4], hex[c & 15]};
  };
  const auto byte = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  for (std::size_t i = 0; i < s.size();) {
    const unsigned c = byte(i);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong forms, no surrogates, at most U+10FFFF).
    std::size_t n = 0;
    unsigned cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4, cp = c & 0x07;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      ok = (byte(i + k) & 0xc0) == 0x80;
      cp = (cp << 6) | (byte(i + k) & 0x3f);
    }
    ok = ok && !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
         !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    const bool control = cp < 0xa0 || cp == 0x2028 || cp == 0x2029;
    if (ok && !control) {
      out.append(s.substr(i, n));
      i += n;
    } else if (ok) {  // a C1 control or line separator: each of its bytes escaped
      for (std::size_t k = 0; k < n; ++k) escape(byte(i + k));
      i += n;
    } else {
      escape(static_cast<unsigned char>(c));
      ++i;
    }
  }
  return out;
}

}  // namespace detail

/// Thrown for invalid format parameters, wrong shapes, malformed files and unknown keys.
/// The message is escaped once here (detail::one_line), so a key, value or file excerpt
/// quoted raw at the throw site can never split the CLI's one-line error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(detail::one_line(what)) {}
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
