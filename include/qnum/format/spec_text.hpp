// The text form of a format, `name:key=value,...` (MASE's key names): a small key/value
// reader that every family's Spec uses to parse itself, rejecting unknown keys and bad
// values with a message naming the family and key, and a writer for `to_string`.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/family_traits.hpp"

namespace qnum {

/// One key of a family, for `qnum formats` and error messages.
struct KeyDoc {
  std::string key;
  std::string default_value;  // as written in the text form
  std::string help;
};

/// Facts about a format's value set (per element; block formats: for one fixed shared scale).
struct FormatInfo {
  double bits_per_value = 0;   // storage per element, shared scales amortised
  double min_positive = 0;     // smallest positive representable magnitude (global)
  double max = 0;              // largest finite magnitude (global)
  double distinct_values = 0;  // distinct real values of one element (0 = not meaningful)
  std::string value_set;       // one-line description of the grid
};

namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Shortest text that reads back to the same double.
inline std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace detail

/// Parsed `key=value` pairs of one spec. Families `take` the keys they know (with aliases);
/// `finish` rejects whatever is left. Keys left out fall back to `use_defaults` (MASE's
/// function defaults in mase mode), then to the family's own default.
class KeyValues {
 public:
  KeyValues() = default;
  explicit KeyValues(std::string family) : family_(std::move(family)) {}

  /// Splits "name:k=v,k=v" (or just "name") into the name and its keys.
  static std::pair<std::string, KeyValues> parse(std::string_view text) {
    text = detail::trim(text);
    const auto colon = text.find(':');
    std::string name(detail::trim(text.substr(0, colon)));
    detail::require(!name.empty(), "format spec '", text, "': missing format name before ':'");
    for (char c : name)
      detail::require((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_', "format spec '", text,
                      "': malformed name '", name, "'");
    KeyValues kv(name);
    if (colon == std::string_view::npos) return {name, kv};
    std::string_view rest = text.substr(colon + 1);
    detail::require(!detail::trim(rest).empty(), "format spec '", text, "': nothing after ':'");
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = detail::trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const auto eq = item.find('=');
      detail::require(eq != std::string_view::npos && eq > 0, name, ": malformed item '", item,
                      "' (expected key=value)");
      std::string key(detail::trim(item.substr(0, eq)));
      std::string value(detail::trim(item.substr(eq + 1)));
      detail::require(!value.empty(), name, ": key '", key, "' has no value");
      for (const auto& [k, v] : kv.items_) detail::require(k != key, name, ": key '", key, "' given twice");
      kv.items_.emplace_back(std::move(key), std::move(value));
    }
    return {name, kv};
  }

  const std::string& family() const { return family_; }
  void set_family(std::string f) { family_ = std::move(f); }
  void add(std::string key, std::string value) { items_.emplace_back(std::move(key), std::move(value)); }
  /// Values for keys left out, looked up under every alias the family takes the key by.
  void use_defaults(std::span<const KeyDefault> defaults) { defaults_ = defaults; }

  /// Removes and returns the raw value of the first of `names` present.
  std::optional<std::string> take(std::initializer_list<std::string_view> names) {
    for (auto name : names)
      for (auto it = items_.begin(); it != items_.end(); ++it)
        if (it->first == name) {
          std::string v = std::move(it->second);
          items_.erase(it);
          return v;
        }
    for (auto name : names)
      for (const auto& d : defaults_)
        if (d.key == name) return std::string(d.value);
    return std::nullopt;
  }

  static bool is_none(std::string_view v) { return v == "none" || v == "None" || v == "null"; }

  std::optional<long long> take_opt_int(std::initializer_list<std::string_view> names) {
    auto v = take(names);
    if (!v || is_none(*v)) return std::nullopt;
    return to_int(*names.begin(), *v);
  }
  int take_int(std::initializer_list<std::string_view> names, int fallback) {
    auto v = take_opt_int(names);
    if (!v) return fallback;
    detail::require(*v >= -(1LL << 30) && *v <= (1LL << 30), family_, ": ", *names.begin(), " ", *v,
                    " is out of range");
    return static_cast<int>(*v);
  }
  std::optional<int> take_opt_int32(std::initializer_list<std::string_view> names) {
    auto v = take_opt_int(names);
    if (!v) return std::nullopt;
    detail::require(*v >= -(1LL << 30) && *v <= (1LL << 30), family_, ": ", *names.begin(), " ", *v,
                    " is out of range");
    return static_cast<int>(*v);
  }
  bool take_bool(std::initializer_list<std::string_view> names, bool fallback) {
    auto v = take(names);
    if (!v) return fallback;
    if (*v == "true" || *v == "True" || *v == "1") return true;
    if (*v == "false" || *v == "False" || *v == "0") return false;
    detail::fail(family_, ": ", *names.begin(), " must be true or false, got '", *v, "'");
  }
  std::optional<double> take_opt_double(std::initializer_list<std::string_view> names) {
    auto v = take(names);
    if (!v || is_none(*v)) return std::nullopt;
    return to_double(*names.begin(), *v);
  }
  /// A list written `1x16` (or a single value `16`).
  std::optional<std::vector<int>> take_int_list(std::initializer_list<std::string_view> names) {
    auto v = take(names);
    if (!v || is_none(*v)) return std::nullopt;
    std::vector<int> out;
    std::string_view s = *v;
    while (true) {
      const auto x = s.find('x');
      const long long n = to_int(*names.begin(), s.substr(0, x));
      detail::require(n >= -(1LL << 30) && n <= (1LL << 30), family_, ": ", *names.begin(), " value ", n,
                      " is out of range");
      out.push_back(static_cast<int>(n));
      if (x == std::string_view::npos) break;
      s = s.substr(x + 1);
    }
    return out;
  }
  std::optional<std::vector<double>> take_double_list(std::initializer_list<std::string_view> names) {
    auto v = take(names);
    if (!v || is_none(*v)) return std::nullopt;
    std::vector<double> out;
    std::string_view s = *v;
    while (true) {
      const auto x = s.find('x');
      out.push_back(to_double(*names.begin(), s.substr(0, x)));
      if (x == std::string_view::npos) break;
      s = s.substr(x + 1);
    }
    return out;
  }

  /// Throws if any key was not taken, listing the family's allowed keys.
  void finish(const std::vector<KeyDoc>& allowed) const {
    if (items_.empty()) return;
    std::string list;
    for (const auto& d : allowed) list += (list.empty() ? "" : ", ") + d.key;
    detail::fail(family_, ": unknown key '", items_.front().first, "' (allowed: ", list.empty() ? "none" : list, ")");
  }

 private:
  long long to_int(std::string_view key, std::string_view v) const {
    long long n = 0;
    const char* end = v.data() + v.size();
    auto r = std::from_chars(v.data(), end, n);
    detail::require(!v.empty() && r.ec == std::errc{} && r.ptr == end, family_, ": ", key, " must be an integer, got '",
                    v, "'");
    return n;
  }
  double to_double(std::string_view key, std::string_view v) const {
    double d = 0;
    const char* end = v.data() + v.size();
    auto r = std::from_chars(v.data(), end, d);
    detail::require(!v.empty() && r.ec == std::errc{} && r.ptr == end && std::isfinite(d), family_, ": ", key,
                    " must be a finite number, got '", v, "'");
    return d;
  }

  std::string family_;
  std::vector<std::pair<std::string, std::string>> items_;
  std::span<const KeyDefault> defaults_;
};

/// Builds the canonical text form `name:key=value,...`.
class KeyWriter {
 public:
  explicit KeyWriter(std::string_view name) : text_(name) {}
  KeyWriter& add(std::string_view key, std::string_view value) {
    text_ += (first_ ? ":" : ",");
    first_ = false;
    text_.append(key).append("=").append(value);
    return *this;
  }
  KeyWriter& add(std::string_view key, int v) { return add(key, std::to_string(v)); }
  KeyWriter& add(std::string_view key, bool v) { return add(key, std::string_view(v ? "true" : "false")); }
  KeyWriter& add(std::string_view key, double v) { return add(key, detail::format_double(v)); }
  KeyWriter& add(std::string_view key, const std::optional<int>& v) {
    return v ? add(key, *v) : add(key, std::string_view("none"));
  }
  KeyWriter& add(std::string_view key, const std::optional<double>& v) {
    return v ? add(key, *v) : add(key, std::string_view("none"));
  }
  KeyWriter& add(std::string_view key, const std::vector<int>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s.append(i ? "x" : "").append(std::to_string(v[i]));
    return add(key, std::string_view(s));
  }
  KeyWriter& add(std::string_view key, const std::vector<double>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s.append(i ? "x" : "").append(detail::format_double(v[i]));
    return add(key, std::string_view(s));
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
  bool first_ = true;
};

}  // namespace qnum
