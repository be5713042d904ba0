// Parameter distributions of a search, as Optuna defines them (optuna/distributions.py):
// FloatDistribution, IntDistribution, CategoricalDistribution with Optuna's validation rules,
// its "high" adjustment to a multiple of step, its internal representation (float and int
// values as double, a categorical value as the index of its choice) and the JSON text Optuna
// stores in `trial_params.distribution_json`.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/search/json_text.hpp"

namespace qnum::search {

/// A parameter value in its external form (Optuna's CategoricalChoiceType): None, bool, int,
/// float or str. Float parameters hold double, int parameters int64.
using ParamValue = std::variant<std::monostate, bool, std::int64_t, double, std::string>;
using CategoricalChoice = ParamValue;

/// Python's repr of a value: None, True, 3, 0.5, 'text'.
inline std::string to_string(const ParamValue& v) {
  struct V {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      return python_float_repr(d);
    }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
  };
  return std::visit(V{}, v);
}

/// The value as JSON (null, true, 3, 0.5, "text").
inline nlohmann::json to_json(const ParamValue& v) {
  struct V {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(bool b) const { return b; }
    nlohmann::json operator()(std::int64_t i) const { return i; }
    nlohmann::json operator()(double d) const { return d; }
    nlohmann::json operator()(const std::string& s) const { return s; }
  };
  return std::visit(V{}, v);
}

/// A JSON scalar as a value; arrays and objects are rejected.
inline ParamValue param_value_from_json(const nlohmann::json& j) {
  if (j.is_null()) return std::monostate{};
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  qnum::detail::fail("search: a parameter value must be null, bool, int, float or string, got ", j.dump());
}

/// Python's `a == b` for choices (True == 1 == 1.0), with nan equal to nan as Optuna's
/// _categorical_choice_equal.
inline bool choice_equal(const ParamValue& a, const ParamValue& b) {
  auto numeric = [](const ParamValue& v) -> std::optional<double> {
    if (const auto* x = std::get_if<bool>(&v)) return *x ? 1.0 : 0.0;
    if (const auto* x = std::get_if<std::int64_t>(&v)) return static_cast<double>(*x);
    if (const auto* x = std::get_if<double>(&v)) return *x;
    return std::nullopt;
  };
  const auto na = numeric(a), nb = numeric(b);
  if (na && nb) {
    if (std::holds_alternative<std::int64_t>(a) && std::holds_alternative<std::int64_t>(b))
      return std::get<std::int64_t>(a) == std::get<std::int64_t>(b);
    return *na == *nb || (std::isnan(*na) && std::isnan(*nb));
  }
  if (na || nb) return false;
  return a == b;
}

namespace detail {

__extension__ typedef __int128 Int128;  // exact decimal arithmetic on doubles' digits

// A decimal number as Python's Decimal(str(x)) sees it: mantissa * 10^exponent.
struct Decimal {
  Int128 mantissa = 0;
  int exponent = 0;
};

inline std::optional<Decimal> to_decimal(double x) {
  const std::string s = python_float_repr(x);
  Decimal d;
  bool neg = false, frac = false;
  std::size_t i = 0;
  if (s[i] == '-') neg = true, ++i;
  int digits = 0;
  for (; i < s.size() && s[i] != 'e'; ++i) {
    if (s[i] == '.') {
      frac = true;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (++digits > 30) return std::nullopt;
    d.mantissa = d.mantissa * 10 + (s[i] - '0');
    if (frac) --d.exponent;
  }
  if (i < s.size()) d.exponent += std::stoi(s.substr(i + 1));
  if (neg) d.mantissa = -d.mantissa;
  return d;
}

// low, high and step as integers at one decimal scale (Python's Decimal(str(x)) of each).
inline std::optional<std::array<Int128, 4>> decimal_scaled(double low, double high, double step) {
  const auto dl = to_decimal(low), dh = to_decimal(high), ds = to_decimal(step);
  if (!dl || !dh || !ds) return std::nullopt;
  const int e = std::min({dl->exponent, dh->exponent, ds->exponent});
  std::array<Int128, 4> out{0, 0, 0, e};
  const Decimal* in[3] = {&*dl, &*dh, &*ds};
  for (int n = 0; n < 3; ++n) {
    Int128 m = in[n]->mantissa;
    for (int k = in[n]->exponent; k > e; --k) {
      if (m > (Int128(1) << 100) || m < -(Int128(1) << 100)) return std::nullopt;
      m *= 10;
    }
    out[static_cast<std::size_t>(n)] = m;
  }
  return out;
}

// Optuna's _adjust_discrete_uniform_high: high becomes the largest low + k*step <= high,
// computed in decimal arithmetic on the shortest representations.
inline double adjust_discrete_high(double low, double high, double step) {
  if (const auto v3 = decimal_scaled(low, high, step); v3 && (*v3)[2] > 0) {
    const auto [l, h, s, e] = *v3;
    const Int128 r = h - l;
    if (r % s == 0) return high;
    Int128 v = r / s * s + l;
    // Back to text, then to the nearest double (as float(Decimal) does).
    const bool neg = v < 0;
    if (neg) v = -v;
    std::string digits;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
      v /= 10;
    } while (v > 0);
    const std::string text = (neg ? "-" : "") + digits + "e" + std::to_string(static_cast<int>(e));
    return std::strtod(text.c_str(), nullptr);
  }
  return std::floor((high - low) / step) * step + low;  // beyond decimal range: double arithmetic
}

// Optuna's FloatDistribution.single with a step: (high - low) < step in decimal arithmetic.
inline bool decimal_range_below_step(double low, double high, double step) {
  if (const auto v3 = decimal_scaled(low, high, step)) return (*v3)[1] - (*v3)[0] < (*v3)[2];
  return high - low < step;
}

}  // namespace detail

/// A float parameter in [low, high]; log-scaled, or discretised by `step` (not both).
struct FloatDistribution {
  double low = 0, high = 0;
  bool log = false;
  std::optional<double> step;

  FloatDistribution(double low_, double high_, bool log_ = false, std::optional<double> step_ = std::nullopt)
      : low(low_), high(high_), log(log_), step(step_) {
    qnum::detail::require(!(log && step),
                          "FloatDistribution: the parameter `step` is not supported when `log` is true");
    qnum::detail::require(!std::isnan(low) && !std::isnan(high),
                          "FloatDistribution: low and high must not be nan, got (low=", python_float_repr(low),
                          ", high=", python_float_repr(high), ")");
    qnum::detail::require(low <= high,
                          "FloatDistribution: `low <= high` must hold, but got (low=", python_float_repr(low),
                          ", high=", python_float_repr(high), ")");
    qnum::detail::require(!log || low > 0.0, "FloatDistribution: `low > 0` must hold for `log=True`, but got (low=",
                          python_float_repr(low), ", high=", python_float_repr(high), ")");
    if (step) {
      qnum::detail::require(*step > 0,
                            "FloatDistribution: `step > 0` must hold, but got step=", python_float_repr(*step));
      high = detail::adjust_discrete_high(low, high, *step);
    }
  }
  bool operator==(const FloatDistribution&) const = default;
};

/// An integer parameter in [low, high] with `step` (1 when `log`); high is lowered to
/// low + k*step as Optuna does.
struct IntDistribution {
  std::int64_t low = 0, high = 0;
  bool log = false;
  std::int64_t step = 1;

  IntDistribution(std::int64_t low_, std::int64_t high_, bool log_ = false, std::int64_t step_ = 1)
      : low(low_), high(high_), log(log_), step(step_) {
    qnum::detail::require(!log || step == 1, "IntDistribution: step must be 1 when `log` is true, got step=", step);
    qnum::detail::require(low <= high, "IntDistribution: `low <= high` must hold, but got (low=", low, ", high=", high,
                          ")");
    qnum::detail::require(!log || low >= 1, "IntDistribution: `low >= 1` must hold for `log=True`, but got (low=", low,
                          ", high=", high, ")");
    qnum::detail::require(step > 0, "IntDistribution: `step > 0` must hold, but got step=", step);
    high = (high - low) / step * step + low;
  }
  bool operator==(const IntDistribution&) const = default;
};

/// One of a list of choices (None, bool, int, float, str); the internal value is the index.
struct CategoricalDistribution {
  std::vector<CategoricalChoice> choices;

  explicit CategoricalDistribution(std::vector<CategoricalChoice> choices_) : choices(std::move(choices_)) {
    qnum::detail::require(!choices.empty(), "CategoricalDistribution: the `choices` must contain one or more elements");
  }
  bool operator==(const CategoricalDistribution& o) const {
    if (choices.size() != o.choices.size()) return false;
    for (std::size_t i = 0; i < choices.size(); ++i)
      if (!choice_equal(choices[i], o.choices[i])) return false;
    return true;
  }
};

using Distribution = std::variant<FloatDistribution, IntDistribution, CategoricalDistribution>;

/// Optuna's class name: "FloatDistribution", "IntDistribution" or "CategoricalDistribution".
inline std::string_view distribution_name(const Distribution& d) {
  constexpr std::string_view names[] = {"FloatDistribution", "IntDistribution", "CategoricalDistribution"};
  return names[d.index()];
}

/// True when the distribution holds one value only (no sampling needed).
inline bool single(const Distribution& d) {
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (f->low == f->high) return true;
    if (!f->step) return false;
    return detail::decimal_range_below_step(f->low, f->high, *f->step);
  }
  if (const auto* i = std::get_if<IntDistribution>(&d)) {
    if (i->low == i->high) return true;
    return !i->log && (i->high - i->low) < i->step;
  }
  return std::get<CategoricalDistribution>(d).choices.size() == 1;
}

/// Whether an internal value lies in the distribution (Optuna's _contains).
inline bool contains(const Distribution& d, double internal) {
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (!f->step) return f->low <= internal && internal <= f->high;
    const double k = (internal - f->low) / *f->step;
    return f->low <= internal && internal <= f->high && std::abs(k - std::nearbyint(k)) < 1.0e-8;
  }
  if (const auto* i = std::get_if<IntDistribution>(&d))
    return double(i->low) <= internal && internal <= double(i->high) &&
           std::fmod(internal - double(i->low), double(i->step)) == 0.0;
  const auto index = static_cast<std::int64_t>(internal);
  return 0 <= index && index < static_cast<std::int64_t>(std::get<CategoricalDistribution>(d).choices.size());
}

/// External value -> internal float (Optuna's to_internal_repr); rejects nan, non-positive
/// values of log distributions and values that are not among the choices.
inline double to_internal(const Distribution& d, const ParamValue& v) {
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
    for (std::size_t i = 0; i < c->choices.size(); ++i)
      if (choice_equal(v, c->choices[i])) return static_cast<double>(i);
    std::string list;
    for (const auto& ch : c->choices) list += (list.empty() ? "" : ", ") + to_string(ch);
    qnum::detail::fail("CategoricalDistribution: ", to_string(v), " not in (", list, ")");
  }
  double x = 0;
  if (const auto* b = std::get_if<bool>(&v))
    x = *b ? 1.0 : 0.0;
  else if (const auto* i = std::get_if<std::int64_t>(&v))
    x = static_cast<double>(*i);
  else if (const auto* f = std::get_if<double>(&v))
    x = *f;
  else
    qnum::detail::fail(distribution_name(d), ": '", to_string(v), "' is not a valid type, a number is expected");
  qnum::detail::require(!std::isnan(x), distribution_name(d), ": nan is an invalid value");
  const bool log = std::visit(
      [](const auto& dd) {
        if constexpr (requires { dd.log; })
          return dd.log;
        else
          return false;
      },
      d);
  qnum::detail::require(!log || x > 0.0, distribution_name(d), ": ", to_string(v), " is an invalid value for log=True");
  return x;
}

/// Internal float -> external value: the double itself, an int64, or the choice at the index.
inline ParamValue to_external(const Distribution& d, double internal) {
  if (std::holds_alternative<FloatDistribution>(d)) return internal;
  if (std::holds_alternative<IntDistribution>(d)) return static_cast<std::int64_t>(internal);
  const auto& c = std::get<CategoricalDistribution>(d);
  const auto index = static_cast<std::int64_t>(internal);
  qnum::detail::require(0 <= index && index < static_cast<std::int64_t>(c.choices.size()),
                        "CategoricalDistribution: index ", index, " out of range for ", c.choices.size(), " choices");
  return c.choices[static_cast<std::size_t>(index)];
}

/// Optuna's distribution_to_json, byte for byte, e.g.
/// {"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}}.
inline std::string distribution_to_json(const Distribution& d) {
  std::string attrs;
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    attrs = "\"step\": " + (f->step ? python_float_repr(*f->step) : std::string("null")) +
            ", \"low\": " + python_float_repr(f->low) + ", \"high\": " + python_float_repr(f->high) +
            ", \"log\": " + (f->log ? "true" : "false");
  } else if (const auto* i = std::get_if<IntDistribution>(&d)) {
    attrs = std::string("\"log\": ") + (i->log ? "true" : "false") + ", \"step\": " + std::to_string(i->step) +
            ", \"low\": " + std::to_string(i->low) + ", \"high\": " + std::to_string(i->high);
  } else {
    nlohmann::json choices = nlohmann::json::array();
    for (const auto& c : std::get<CategoricalDistribution>(d).choices) choices.push_back(to_json(c));
    attrs = "\"choices\": " + python_json_dumps(choices);
  }
  return "{\"name\": \"" + std::string(distribution_name(d)) + "\", \"attributes\": {" + attrs + "}}";
}

/// Optuna's json_to_distribution: the current names, the pre-3.0 ones (UniformDistribution,
/// LogUniformDistribution, DiscreteUniformDistribution, IntUniformDistribution,
/// IntLogUniformDistribution) converted as Optuna converts them, and the {"type": ...} form.
inline Distribution distribution_from_json(std::string_view text) {
  const auto j = python_json_loads(text);
  auto num = [&](const nlohmann::json& a, const char* key) -> double {
    qnum::detail::require(a.contains(key) && a[key].is_number(), "distribution JSON: missing number '", key, "' in ",
                          std::string(text));
    return a[key].get<double>();
  };
  auto integer = [&](const nlohmann::json& a, const char* key, std::int64_t fallback, bool required) -> std::int64_t {
    if (!a.contains(key) || a[key].is_null()) {
      qnum::detail::require(!required, "distribution JSON: missing integer '", key, "' in ", std::string(text));
      return fallback;
    }
    qnum::detail::require(a[key].is_number(), "distribution JSON: '", key, "' must be an integer in ",
                          std::string(text));
    return a[key].is_number_integer() ? a[key].get<std::int64_t>() : static_cast<std::int64_t>(a[key].get<double>());
  };
  auto flag = [](const nlohmann::json& a, const char* key) {
    return a.contains(key) && a[key].is_boolean() && a[key].get<bool>();
  };
  auto choices_of = [&](const nlohmann::json& list) {
    qnum::detail::require(list.is_array(), "distribution JSON: choices must be a list in ", std::string(text));
    std::vector<CategoricalChoice> out;
    for (const auto& c : list) out.push_back(param_value_from_json(c));
    return CategoricalDistribution(std::move(out));
  };
  qnum::detail::require(j.is_object(), "distribution JSON: expected an object, got ", std::string(text));
  if (j.contains("name")) {
    const std::string name = j["name"].is_string() ? j["name"].get<std::string>() : "";
    qnum::detail::require(j.contains("attributes") && j["attributes"].is_object(),
                          "distribution JSON: missing 'attributes' in ", std::string(text));
    const auto& a = j["attributes"];
    if (name == "FloatDistribution") {
      std::optional<double> step;
      if (a.contains("step") && !a["step"].is_null()) step = num(a, "step");
      return FloatDistribution(num(a, "low"), num(a, "high"), flag(a, "log"), step);
    }
    if (name == "IntDistribution")
      return IntDistribution(integer(a, "low", 0, true), integer(a, "high", 0, true), flag(a, "log"),
                             integer(a, "step", 1, false));
    if (name == "CategoricalDistribution") return choices_of(a.value("choices", nlohmann::json()));
    if (name == "UniformDistribution") return FloatDistribution(num(a, "low"), num(a, "high"));
    if (name == "LogUniformDistribution") return FloatDistribution(num(a, "low"), num(a, "high"), true);
    if (name == "DiscreteUniformDistribution")
      return FloatDistribution(num(a, "low"), num(a, "high"), false, num(a, "q"));
    if (name == "IntUniformDistribution")
      return IntDistribution(integer(a, "low", 0, true), integer(a, "high", 0, true), false,
                             integer(a, "step", 1, false));
    if (name == "IntLogUniformDistribution")
      return IntDistribution(integer(a, "low", 0, true), integer(a, "high", 0, true), true,
                             integer(a, "step", 1, false));
    qnum::detail::fail("distribution JSON: unknown distribution class '", name,
                       "' (allowed: FloatDistribution, IntDistribution, CategoricalDistribution)");
  }
  const std::string type = j.value("type", "");
  if (type == "categorical") return choices_of(j.value("choices", nlohmann::json()));
  if (type == "float" || type == "int") {
    const bool log = flag(j, "log");
    if (type == "float") {
      std::optional<double> step;
      if (j.contains("step") && !j["step"].is_null()) step = num(j, "step");
      return FloatDistribution(num(j, "low"), num(j, "high"), log, step);
    }
    return IntDistribution(integer(j, "low", 0, true), integer(j, "high", 0, true), log, integer(j, "step", 1, false));
  }
  qnum::detail::fail("distribution JSON: unknown distribution type '", type, "' (allowed: float, int, categorical)");
}

/// Optuna's check_distribution_compatibility: a parameter name keeps its kind, its log flag
/// and (categorical) its choices within a study.
inline void check_distribution_compatibility(const std::string& name, const Distribution& old_d,
                                             const Distribution& new_d) {
  qnum::detail::require(old_d.index() == new_d.index(), "parameter '", name, "': cannot set a ",
                        distribution_name(new_d), " where a ", distribution_name(old_d), " was used before");
  if (const auto* a = std::get_if<FloatDistribution>(&old_d))
    qnum::detail::require(a->log == std::get<FloatDistribution>(new_d).log, "parameter '", name,
                          "': cannot set a different log configuration to the same parameter name");
  if (const auto* a = std::get_if<IntDistribution>(&old_d))
    qnum::detail::require(a->log == std::get<IntDistribution>(new_d).log, "parameter '", name,
                          "': cannot set a different log configuration to the same parameter name");
  if (const auto* a = std::get_if<CategoricalDistribution>(&old_d))
    qnum::detail::require(*a == std::get<CategoricalDistribution>(new_d), "parameter '", name,
                          "': CategoricalDistribution does not support dynamic value space (choices changed)");
}

}  // namespace qnum::search
