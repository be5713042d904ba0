// MASE's `mxint_hardware`: p1 x p0 tiles of the last two dims share an ew-bit exponent;
// mantissas are floor-rounded W-bit integers. MASE-only (inference; no gradient).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/core/policy.hpp"
#include "qnum/core/round.hpp"
#include "qnum/format/spec_text.hpp"
#include "qnum/format/tensor_io.hpp"

namespace qnum {

struct MXIntHardwareSpec {
  static constexpr std::string_view name = "mxint_hardware";
  int width = 8;
  int exponent_width = 4;
  std::vector<int> parallelism{1, 16};

  friend bool operator==(const MXIntHardwareSpec&, const MXIntHardwareSpec&) = default;
  void validate() const {
    detail::require(width >= 2 && width <= 24, name, ": width ", width, " must be in [2, 24]");
    detail::require(exponent_width >= 1 && exponent_width <= 8, name, ": exponent_width ", exponent_width,
                    " must be in [1, 8]");
    detail::require(!parallelism.empty() && parallelism.size() <= 2, name, ": parallelism must have 1 or 2 entries");
    for (int p : parallelism) detail::require(p >= 1, name, ": parallelism ", p, " must be >= 1");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "mantissa bits W"},
            {"exponent_width", "4", "shared exponent bits ew"},
            {"parallelism", "1x16", "tile [p1, p0] over the last two dims"}};
  }
  static MXIntHardwareSpec from_keys(KeyValues& kv) {
    MXIntHardwareSpec s;
    s.width = kv.take_int({"width"}, 8);
    s.exponent_width = kv.take_int({"exponent_width"}, 4);
    if (auto p = kv.take_int_list({"parallelism"})) s.parallelism = *p;
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("exponent_width", exponent_width).add("parallelism", parallelism);
  }
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const MXIntHardwareSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const MXIntHardwareSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
