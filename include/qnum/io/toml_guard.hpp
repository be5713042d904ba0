// A lexical check of TOML text before toml++ parses it. toml++ 3.3.0 (Debian 12's package)
// reaches __builtin_unreachable() — undefined behaviour — when it tests a non-ASCII code
// point for whitespace (marzer/tomlplusplus#295, fixed upstream after 3.3.0): wherever a
// key, value or separator may stand (bare keys and values are scanned byte by byte), and
// after a backslash in a multi-line basic string. TOML allows non-ASCII only inside strings
// and comments, so refusing it elsewhere rejects no valid document; the backslash cases
// (valid TOML, but rare) are refused too. The config fuzz harnesses (fuzz/) run both.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum::io {

namespace detail {

/// 1-based line and column of byte `at` in `text`.
inline std::string toml_position(std::string_view text, std::size_t at) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

inline bool is_non_ascii(char c) { return static_cast<unsigned char>(c) >= 0x80; }

/// The length of the run of `quote` starting at `i`.
inline std::size_t quote_run(std::string_view t, std::size_t i, char quote) {
  std::size_t n = 0;
  while (i + n < t.size() && t[i + n] == quote) ++n;
  return n;
}

}  // namespace detail

/// qnum::Error ("<name>:<line>:<column>: ...") when `text` has a non-ASCII byte outside a
/// string or comment, or as the first character after a line-ending backslash in a
/// multi-line basic string. A UTF-8 byte order mark at the start is allowed.
inline void check_toml_text(std::string_view text, const std::string& name) {
  enum class State { normal, comment, basic, literal, ml_basic, ml_literal };
  State s = State::normal;
  // Where a quote starts a string: after a key's '=', an array's '[' or ',', a header's '[',
  // an inline table's '{' or ',', a dotted key's '.', or at a line start (spaces aside).
  bool string_may_start = true;
  bool line_start = true;
  bool value_here = false;  // after a key's '=' on this line (or inside an array)
  bool bare = false;        // inside a bare value (number, boolean, date)
  std::string open;         // the arrays and inline tables open around the value
  std::size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  auto refuse = [&](std::size_t at, const char* where) {
    qnum::detail::fail(name, ":", detail::toml_position(text, at), ": TOML: a non-ASCII character ", where,
                       " (TOML allows it only inside strings and comments)");
  };
  while (i < text.size()) {
    const char c = text[i];
    switch (s) {
      case State::normal: {
        if (detail::is_non_ascii(c)) refuse(i, "outside a string");
        const bool terminator = c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' || c == ']' ||
                                c == '}' || c == '#';
        if (bare && !terminator) {  // inside a bare value: toml++ scans it up to a terminator
          ++i;
          break;
        }
        bare = false;
        const bool in_value = !open.empty() ? open.back() == '[' || value_here : value_here;
        if (c == '#') {
          s = State::comment;
        } else if ((c == '"' || c == '\'') && string_may_start) {
          const std::size_t n = detail::quote_run(text, i, c);
          string_may_start = false;
          if (n >= 3) {
            s = c == '"' ? State::ml_basic : State::ml_literal;
            i += 3;
            break;
          }
          if (n == 2) {  // an empty string
            i += 2;
            break;
          }
          s = c == '"' ? State::basic : State::literal;
        } else if (c == '=') {
          string_may_start = !in_value;  // a key's '='; anywhere else it is junk
          value_here = true;
        } else if (c == '[') {
          // An array where a value starts, a table header at a line start; nothing elsewhere.
          const bool opens = in_value ? string_may_start : line_start || (i > 0 && text[i - 1] == '[');
          if (opens && in_value) open.push_back('[');
          string_may_start = opens;
        } else if (c == '{') {
          const bool opens = in_value && string_may_start;
          if (opens) {
            open.push_back('{');
            value_here = false;
          }
          string_may_start = opens;
        } else if (c == ']' || c == '}') {
          if (!open.empty() && open.back() == (c == ']' ? '[' : '{')) {
            open.pop_back();
            value_here = true;
          }
          string_may_start = false;
        } else if (c == ',') {
          string_may_start = !open.empty();
          if (!open.empty() && open.back() == '{') value_here = false;  // the next key of an inline table
        } else if (c == '.') {
          string_may_start = !in_value;  // dotted keys
        } else if (c == '\n') {
          string_may_start = true;
          if (open.empty()) value_here = false;
        } else if (c != ' ' && c != '\t' && c != '\r') {
          string_may_start = false;  // a bare key or value
          bare = in_value;
        }
        line_start = c == '\n' || ((c == ' ' || c == '\t') && line_start);
        ++i;
        break;
      }
      case State::comment:
        if (c == '\n') {
          s = State::normal;  // which takes the line end
          break;
        }
        ++i;
        break;
      case State::basic:
      case State::literal:
        if (c == '\n') {
          s = State::normal;  // an unclosed string, an error for toml++; the line end is normal's
          break;
        }
        if ((s == State::basic && c == '"') || (s == State::literal && c == '\'')) {
          s = State::normal;
          line_start = false;
        } else if (s == State::basic && c == '\\') {
          ++i;  // the escaped byte
        }
        ++i;
        break;
      case State::ml_literal:
      case State::ml_basic: {
        const char quote = s == State::ml_basic ? '"' : '\'';
        if (c == quote) {
          const std::size_t n = detail::quote_run(text, i, quote);
          if (n >= 3) {  // up to two quotes of content, then the closing three
            s = State::normal;
            line_start = false;
          }
          i += n;
          break;
        }
        if (s == State::ml_basic && c == '\\') {
          std::size_t j = i + 1;
          while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
          // toml++ tests what follows a backslash for whitespace (is it line-ending?)
          if (j < text.size() && detail::is_non_ascii(text[j]))
            refuse(j, "right after a backslash in a multi-line string");
          if (j < text.size() && (text[j] == '\n' || text[j] == '\r')) {  // a line-ending backslash
            while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r')) ++j;
            if (j < text.size() && detail::is_non_ascii(text[j]))
              refuse(j, "right after a line-ending backslash in a multi-line string");
            i = j;
          } else {
            i += 2;  // an escape: the backslash and the escaped byte
          }
          break;
        }
        ++i;
        break;
      }
    }
  }
}

}  // namespace qnum::io
