// MX integer (`mxint`): blocks of k-bit two's-complement elements sharing an E8M0 scale.
// exact = OCP MX v1.0 MXINT8 (scale floor(log2 amax), blocks along block_dim, padded);
// mase = MASE's mxint_quantizer (ceil scale, flattened unpadded blocks).
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

struct MXIntSpec {
  static constexpr std::string_view name = "mxint";
  int width = 8;  // element bits k (MASE: element_bits)
  int block_size = 32;
  int block_dim = -1;
  int scale_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXIntSpec&, const MXIntSpec&) = default;

  void validate() const {
    detail::require(width >= 2 && width <= 16, name, ": width ", width, " must be in [2, 16]");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size,
                    " must be in [1, 4096]");
    detail::require(scale_bits >= 1 && scale_bits <= 8, name, ": scale_bits ", scale_bits, " must be in [1, 8]");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"width", "8", "element bits k incl. sign (MASE: element_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_bits", "8", "bits of the shared exponent"},
            {"quantile_search", "false", "per-block clip search (MASE)"}};
  }
  static MXIntSpec from_keys(KeyValues& kv) {
    MXIntSpec s;
    s.width = kv.take_int({"width", "element_bits"}, 8);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_bits = kv.take_int({"scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("width", width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_bits != 8) w.add("scale_bits", scale_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

/// MX float (`mxfp`): E/M minifloat elements sharing an E8M0 scale.
struct MXFPSpec {
  static constexpr std::string_view name = "mxfp";
  int exponent_width = 4;  // MASE: element_exp_bits
  int frac_width = 3;      // mantissa bits; MASE: element_frac_bits
  int block_size = 32;
  int block_dim = -1;
  int scale_exp_bits = 8;
  bool quantile_search = false;

  friend bool operator==(const MXFPSpec&, const MXFPSpec&) = default;

  constexpr int element_bits() const { return 1 + exponent_width + frac_width; }

  void validate() const {
    detail::require(exponent_width >= 1 && exponent_width <= 5, name, ": exponent_width ", exponent_width,
                    " must be in [1, 5]");
    detail::require(frac_width >= 1 && frac_width <= 3 && element_bits() <= 8, name, ": frac_width ", frac_width,
                    " with exponent_width ", exponent_width, " is not an MX element (E4M3, E5M2, E3M2, E2M3, E2M1, E1M2)");
    detail::require(block_size >= 1 && block_size <= 4096, name, ": block_size ", block_size,
                    " must be in [1, 4096]");
    detail::require(scale_exp_bits == 8, name, ": scale_exp_bits ", scale_exp_bits, " must be 8");
  }
  static std::vector<KeyDoc> key_docs() {
    return {{"exponent_width", "4", "element exponent bits (MASE: element_exp_bits)"},
            {"frac_width", "3", "element mantissa bits (MASE: element_frac_bits)"},
            {"block_size", "32", "elements per shared scale"},
            {"block_dim", "-1", "axis the blocks run along"},
            {"scale_exp_bits", "8", "bits of the shared exponent (must be 8)"},
            {"quantile_search", "false", "per-block clip search (MASE)"}};
  }
  static MXFPSpec from_keys(KeyValues& kv) {
    MXFPSpec s;
    s.exponent_width = kv.take_int({"exponent_width", "element_exp_bits"}, 4);
    s.frac_width = kv.take_int({"frac_width", "element_frac_bits"}, 3);
    s.block_size = kv.take_int({"block_size"}, 32);
    s.block_dim = kv.take_int({"block_dim"}, -1);
    s.scale_exp_bits = kv.take_int({"scale_exp_bits", "scale_bits"}, 8);
    s.quantile_search = kv.take_bool({"quantile_search", "clip_search"}, false);
    return s;
  }
  void write_keys(KeyWriter& w) const {
    w.add("exponent_width", exponent_width).add("frac_width", frac_width).add("block_size", block_size);
    if (block_dim != -1) w.add("block_dim", block_dim);
    if (scale_exp_bits != 8) w.add("scale_exp_bits", scale_exp_bits);
    if (quantile_search) w.add("quantile_search", true);
  }
};

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const MXIntSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const MXIntSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

// ---- tensor quantize and info (to be implemented) ---------------------------------------

inline void quantize(const MXFPSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                     const Shape& shape, Role role = Role::weight) {
  (void)p; (void)role;
  detail::check_tensor_io(s.name, in, out, shape);
  detail::fail(s.name, ": not implemented yet");
}

inline FormatInfo info(const MXFPSpec& s, const Policy& p) {
  (void)p;
  detail::fail(s.name, ": info not implemented yet");
}

}  // namespace qnum
