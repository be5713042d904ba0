// Arithmetic shared by the compile-time value types (Fixed, Minifloat, Log): values convert
// through the format's reference; + - * / compute in double and round the result back under
// the type's own policy (Derived(float) does that); comparisons compare the values.
#pragma once

#include <compare>

namespace qnum::detail {

/// CRTP base: Derived provides `float value() const` and an implicit `Derived(float)`.
template <class Derived>
class NumberOps {
 public:
  explicit operator float() const { return self().value(); }
  explicit operator double() const { return self().value(); }

  friend Derived operator+(Derived a, Derived b) { return Derived(static_cast<float>(double(a) + double(b))); }
  friend Derived operator-(Derived a, Derived b) { return Derived(static_cast<float>(double(a) - double(b))); }
  friend Derived operator*(Derived a, Derived b) { return Derived(static_cast<float>(double(a) * double(b))); }
  friend Derived operator/(Derived a, Derived b) { return Derived(static_cast<float>(double(a) / double(b))); }
  friend bool operator==(Derived a, Derived b) { return a.value() == b.value(); }
  friend std::partial_ordering operator<=>(Derived a, Derived b) { return a.value() <=> b.value(); }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace qnum::detail
