// Rounding, overflow and subnormal policies, and the two policy bundles.
// The same names work at compile time (Policy is a structural type usable as a template
// argument: Fixed<8, 4, true, qnum::mase_compat>) and at run time (configs, search, CLI).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum {

/// How a value between two representable neighbours is resolved.
/// ac_types aliases: AC_RND_CONV = nearest_even, AC_RND_INF = nearest_away,
/// AC_TRN_ZERO = toward_zero, AC_TRN = floor.
enum class Rounding : std::uint8_t {
  nearest_even,  // round half to even (IEEE default, torch.round)
  nearest_away,  // round half away from zero
  toward_zero,   // truncate magnitude
  floor,         // toward -inf
  ceil,          // toward +inf
  stochastic,    // round up with probability = fractional distance (counter-based, seeded)
};

/// What happens to values beyond the largest representable magnitude.
/// ac_types aliases: AC_SAT = saturate, AC_WRAP = wrap.
enum class Overflow : std::uint8_t {
  saturate,  // clamp to the largest finite value of that sign
  wrap,      // two's-complement wrap-around (fixed point only)
  infinity,  // overflow to +-Inf (only for formats that have an Inf code)
};

/// Whether results below the smallest normal magnitude are kept or flushed to zero.
enum class Subnormals : std::uint8_t { keep, flush };

/// Which semantics a quantizer follows: qnum's correct definition, or MASE's float32
/// arithmetic reproduced bit for bit (quirks included; see docs/formats.md).
enum class Semantics : std::uint8_t { exact, mase };

/// Straight-through estimator used by fake-quantize in training.
enum class Ste : std::uint8_t {
  identity,  // gradient passes unchanged (MASE)
  clipped,   // gradient zeroed where the input was saturated
};

/// A complete policy. Structural, so it can be a template argument.
struct Policy {
  Semantics semantics = Semantics::exact;
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::saturate;
  Subnormals subnormals = Subnormals::keep;
  Ste ste = Ste::identity;
  std::uint64_t seed = 0;  // stochastic rounding stream

  friend constexpr bool operator==(const Policy&, const Policy&) = default;

  constexpr Policy with(Rounding r) const {
    Policy p = *this;
    p.rounding = r;
    return p;
  }
  constexpr Policy with(Overflow o) const {
    Policy p = *this;
    p.overflow = o;
    return p;
  }
  constexpr Policy with_seed(std::uint64_t s) const {
    Policy p = *this;
    p.seed = s;
    return p;
  }
  constexpr bool is_mase() const { return semantics == Semantics::mase; }
};

/// Default bundle: correctly rounded (RNE), saturating, exponents from bits, OCP for MX.
inline constexpr Policy exact{};
/// Reproduces MASE's float32 outputs bit for bit, quirks included.
inline constexpr Policy mase_compat{Semantics::mase};

// ---- names ---------------------------------------------------------------------------

namespace detail {
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

inline constexpr std::array<EnumName<Rounding>, 11> rounding_names{{
    {Rounding::nearest_even, "nearest_even"},
    {Rounding::nearest_away, "nearest_away"},
    {Rounding::toward_zero, "toward_zero"},
    {Rounding::floor, "floor"},
    {Rounding::ceil, "ceil"},
    {Rounding::stochastic, "stochastic"},
    // aliases (ac_types, IEEE)
    {Rounding::nearest_even, "AC_RND_CONV"},
    {Rounding::nearest_away, "AC_RND_INF"},
    {Rounding::toward_zero, "AC_TRN_ZERO"},
    {Rounding::floor, "AC_TRN"},
    {Rounding::nearest_even, "rne"},
}};
inline constexpr std::array<EnumName<Overflow>, 5> overflow_names{{
    {Overflow::saturate, "saturate"},
    {Overflow::wrap, "wrap"},
    {Overflow::infinity, "infinity"},
    {Overflow::saturate, "AC_SAT"},
    {Overflow::wrap, "AC_WRAP"},
}};
inline constexpr std::array<EnumName<Subnormals>, 2> subnormal_names{{
    {Subnormals::keep, "keep"},
    {Subnormals::flush, "flush"},
}};
inline constexpr std::array<EnumName<Semantics>, 4> semantics_names{{
    {Semantics::exact, "exact"},
    {Semantics::mase, "mase_compat"},
    {Semantics::mase, "mase"},
    {Semantics::mase, "mase-compat"},
}};
inline constexpr std::array<EnumName<Ste>, 2> ste_names{{
    {Ste::identity, "identity"},
    {Ste::clipped, "clipped"},
}};

template <class E, std::size_t N>
constexpr std::string_view enum_to_string(const std::array<EnumName<E>, N>& table, E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}

template <class E, std::size_t N>
E enum_from_string(const std::array<EnumName<E>, N>& table, std::string_view s, std::string_view what) {
  for (const auto& e : table)
    if (e.name == s) return e.value;
  std::string allowed;
  for (std::size_t i = 0; i < N; ++i) {
    bool dup = false;
    for (std::size_t j = 0; j < i; ++j) dup |= table[j].value == table[i].value;
    if (dup) continue;
    if (!allowed.empty()) allowed += ", ";
    allowed += table[i].name;
  }
  fail("unknown ", what, " '", s, "' (allowed: ", allowed, ")");
}
}  // namespace detail

constexpr std::string_view to_string(Rounding r) { return detail::enum_to_string(detail::rounding_names, r); }
constexpr std::string_view to_string(Overflow o) { return detail::enum_to_string(detail::overflow_names, o); }
constexpr std::string_view to_string(Subnormals s) { return detail::enum_to_string(detail::subnormal_names, s); }
constexpr std::string_view to_string(Semantics s) { return detail::enum_to_string(detail::semantics_names, s); }
constexpr std::string_view to_string(Ste s) { return detail::enum_to_string(detail::ste_names, s); }

inline Rounding parse_rounding(std::string_view s) {
  return detail::enum_from_string(detail::rounding_names, s, "rounding");
}
inline Overflow parse_overflow(std::string_view s) {
  return detail::enum_from_string(detail::overflow_names, s, "overflow");
}
inline Subnormals parse_subnormals(std::string_view s) {
  return detail::enum_from_string(detail::subnormal_names, s, "subnormals");
}
inline Semantics parse_semantics(std::string_view s) {
  return detail::enum_from_string(detail::semantics_names, s, "mode");
}
inline Ste parse_ste(std::string_view s) { return detail::enum_from_string(detail::ste_names, s, "ste"); }

}  // namespace qnum
