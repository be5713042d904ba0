// JSON text exactly as Python's json.dumps writes it (", " and ": " separators, float repr,
// ensure_ascii, NaN/Infinity), so values qnum stores in an Optuna database are byte-identical
// to what Optuna itself would store, and text comparisons between the two agree.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/json.hpp"

namespace qnum::search {

/// Python's repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16
/// (with ".0" when integral), otherwise "1.5e-05" / "1e+16"; nan, inf as NaN, Infinity.
inline std::string python_float_repr(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const auto epos = s.find('e');
  std::string digits = s.substr(0, epos);
  const int exp10 = std::stoi(s.substr(epos + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  if (exp10 < -4 || exp10 >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + e;
  }
  std::string out;
  if (exp10 < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp10 - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<std::size_t>(exp10 + 1);
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return sign + out;
}

namespace detail {

inline void python_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = c;
    std::size_t len = 1;
    if (c >= 0x80) {  // decode UTF-8; invalid bytes are escaped as themselves
      if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
        cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
        len = 2;
      } else if ((c & 0xF0) == 0xE0 && i + 2 < s.size()) {
        cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
             (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
        len = 3;
      } else if ((c & 0xF8) == 0xF0 && i + 3 < s.size()) {
        cp = ((c & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
             ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
        len = 4;
      }
    }
    i += len;
    char buf[16];
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (cp >= 0x7F && cp < 0x10000)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp >= 0x10000) {
      const std::uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    } else {
      out += static_cast<char>(cp);
    }
  }
  out += '"';
}

inline void python_json_dump(std::string& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      out += "null";
      break;
    case nlohmann::json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      break;
    case nlohmann::json::value_t::number_integer:
      out += std::to_string(j.get<std::int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      out += std::to_string(j.get<std::uint64_t>());
      break;
    case nlohmann::json::value_t::number_float:
      out += python_float_repr(j.get<double>());
      break;
    case nlohmann::json::value_t::string:
      python_json_string(out, j.get_ref<const std::string&>());
      break;
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ", ";
        first = false;
        python_json_dump(out, e);
      }
      out += ']';
      break;
    }
    case nlohmann::json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!first) out += ", ";
        first = false;
        python_json_string(out, k);
        out += ": ";
        python_json_dump(out, v);
      }
      out += '}';
      break;
    }
    default:
      qnum::detail::fail("search: cannot write a binary or discarded JSON value");
  }
}

}  // namespace detail

/// json.dumps(value) of Python (object keys in nlohmann's sorted order).
inline std::string python_json_dumps(const nlohmann::json& j) {
  std::string out;
  detail::python_json_dump(out, j);
  return out;
}

/// Parses JSON as Python's json.loads does (NaN, Infinity and -Infinity accepted).
inline nlohmann::json python_json_loads(std::string_view text) {
  // nlohmann rejects Python's non-standard constants: replace them outside strings first.
  std::string fixed;
  fixed.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      fixed += c;
      if (c == '\\' && i + 1 < text.size())
        fixed += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    auto starts = [&](std::string_view w) { return text.substr(i, w.size()) == w; };
    if (starts("NaN")) {
      fixed += "\"__qnum_nan__\"";
      i += 2;
    } else if (starts("-Infinity")) {
      fixed += "\"__qnum_-inf__\"";
      i += 8;
    } else if (starts("Infinity")) {
      fixed += "\"__qnum_inf__\"";
      i += 7;
    } else {
      fixed += c;
    }
  }
  nlohmann::json j;
  try {
    j = io::parse_json(fixed, "search: a stored JSON value");
  } catch (const nlohmann::json::exception& e) {
    qnum::detail::fail("search: invalid JSON '", std::string(text.substr(0, 200)), "': ", e.what());
  }
  if (fixed.size() == text.size()) return j;
  auto restore = [](auto& self, nlohmann::json& v) -> void {
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      if (s == "__qnum_nan__")
        v = std::nan("");
      else if (s == "__qnum_inf__")
        v = HUGE_VAL;
      else if (s == "__qnum_-inf__")
        v = -HUGE_VAL;
    } else if (v.is_structured()) {
      for (auto& e : v) self(self, e);
    }
  };
  restore(restore, j);
  return j;
}

}  // namespace qnum::search
