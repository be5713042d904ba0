// Quantization-aware layers: the QuantConfig a layer carries and the mixin that applies it.
//
// A layer that can be quantized (Linear, ReLU, GELU, Tanh, LayerNorm, ...) derives from
// Quantizable. Its QuantConfig names a Format per operand — data_in (the input), weight, bias,
// data_out (the result) — or nothing (float). The layer fake-quantizes each configured operand
// in every forward with the format's straight-through gradient, and the optimizer keeps
// float32 master weights (MASE's QAT, spec/formats.md §4.3). An empty config is the plain
// float layer, so one class serves PTQ, QAT and float training, and a quantize pass only
// sets configs: parameter names and module handles never change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qnum/format/format.hpp"
#include "qnum/tensor/ops_quant.hpp"

namespace qnum::nn {

/// The formats of a quantized op's operands; std::nullopt leaves an operand in float32.
struct QuantConfig {
  std::optional<Format> data_in, weight, bias, data_out;
  /// How data_in is blocked: activation (MASE's skip_first_dim = true, the default) or weight.
  Role data_in_role = Role::activation;

  bool any() const { return data_in || weight || bias || data_out; }
  friend bool operator==(const QuantConfig&, const QuantConfig&) = default;

  /// "data_in=integer:width=8,frac_width=4 weight=..." (operands in this order; "float" if none).
  std::string to_string() const {
    std::string s;
    auto add = [&](const char* name, const std::optional<Format>& f) {
      if (f) s += (s.empty() ? "" : " ") + std::string(name) + "=" + f->to_string();
    };
    add("data_in", data_in);
    add("weight", weight);
    add("bias", bias);
    add("data_out", data_out);
    return s.empty() ? "float" : s;
  }
};

/// The storage bits of one value of `f` (block and MX formats include their shared scale),
/// or 32 for float32 operands.
inline double operand_bits(const std::optional<Format>& f) { return f ? f->bits_per_value() : 32.0; }

/// Mixin of layers whose operands can be fake-quantized.
class Quantizable {
 public:
  virtual ~Quantizable() = default;

  /// The operands this layer has, among "data_in", "weight", "bias", "data_out"; a config
  /// naming another operand is rejected by set_quant.
  virtual std::vector<std::string> quant_operands() const { return {"data_in", "data_out"}; }

  /// Installs `config` (validated: each format, and only operands this layer has).
  void set_quant(QuantConfig config) {
    const auto ops = quant_operands();
    auto check = [&](const char* name, const std::optional<Format>& f) {
      if (!f) return;
      bool known = false;
      for (const auto& o : ops) known |= o == name;
      qnum::detail::require(known, "quantize: this layer has no '", name, "' operand (it has: ", join(ops), ")");
      f->validate();
    };
    check("data_in", config.data_in);
    check("weight", config.weight);
    check("bias", config.bias);
    check("data_out", config.data_out);
    quant_ = std::move(config);
  }
  const QuantConfig& quant() const { return quant_; }
  bool is_quantized() const { return quant_.any(); }

 protected:
  /// x fake-quantized with `f` (the identity when f is empty); a format that stacks levels
  /// (residual_sign) gives the sum of its levels, as MASE's residual-sign layers use it.
  static Tensor maybe_quantize(const Tensor& x, const std::optional<Format>& f, Role role) {
    if (!f || !x.defined()) return x;
    if (f->grouping() == Grouping::stacked) return fake_quantize_levels_summed(x, *f, role);
    return fake_quantize(x, *f, role);
  }
  Tensor quantize_in(const Tensor& x) const { return maybe_quantize(x, quant_.data_in, quant_.data_in_role); }
  Tensor quantize_out(const Tensor& y) const { return maybe_quantize(y, quant_.data_out, Role::activation); }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  QuantConfig quant_;
};

/// A transformation of a layer's input applied before its own input quantizer (activation
/// pruning installs one on Linear layers). `training` is the layer's mode.
class InputTransform {
 public:
  virtual ~InputTransform() = default;
  virtual Tensor apply(const Tensor& x, bool training) = 0;
  /// A short description for reports ("l1-norm local 0.5").
  virtual std::string describe() const = 0;
};

}  // namespace qnum::nn
