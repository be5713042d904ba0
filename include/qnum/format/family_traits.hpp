// What a format family declares about itself besides its keys: how its outputs group its
// inputs, its MASE function defaults and its named presets. Every Spec carries these as
// static members; format/families.hpp collects them, so nothing above the format layer
// re-asks "which family is this?".
#pragma once

#include <string_view>

namespace qnum {

/// Which inputs one output element depends on. Only `elementwise` families may be applied
/// to any slice of a tensor with the same bits (the layers above split rows on that fact).
enum class Grouping {
  elementwise,  // the element alone
  indexed,      // the element and its flat index (counter-based stochastic draws)
  blocked,      // the element's block (a shared scale, exponent or bias)
  per_channel,  // every element with the same index along the first axis
  per_row,      // every element of its last-axis row
  stacked,      // the element, written to several output levels (output shape differs)
  tensor,       // every element of the tensor (a scale taken from the whole tensor)
};

/// One key's default in MASE's quantizer signature (`--mode mase` takes it when the key is
/// left out), written as in the text form.
struct KeyDefault {
  std::string_view key;
  std::string_view value;
};

// Optional members a Spec declares where it is the exception to Format::validate's rules:
//   static constexpr bool overflow_wrap = true;   overflow=wrap is defined (fixed point)
//   static constexpr bool mase_floor = true;      mase_compat also rounds by floor
//   bool has_inf_code() const;                    overflow=infinity has a code to go to
//   void check_policy(const Policy&) const;       the family's own policy limits (run last)
/// A name that stands for a fixed spec of family S (e.g. fp8_e4m3, mxint8).
template <class S>
struct SpecPreset {
  std::string_view name;
  S spec;
  std::string_view help;
};

}  // namespace qnum
