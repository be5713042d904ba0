// FLOPs, BitOPs and model size (spec/system.md §2.5, §2.7) per traced node.
//
// Counts, with M the multiply-accumulates of a node:
//   linear      M = weight.numel() · (input.numel() / in_features)       (MASE's formula)
//               forward FLOPs = 2M (+ output.numel() with a bias)
//               backward FLOPs = 4M (grad input and grad weight, 2M each; + output.numel()
//               for the bias gradient)
//               forward BitOPs = M · b_weight · b_data_in
//               backward BitOPs = M · 32 · b_weight + M · 32 · b_data_in (gradients float32)
//   matmul      M = batch · m · n · k from the operand shapes; FLOPs as linear without bias;
//               BitOPs with b = 32 (qnum's matmul ops are unquantized)
//   relu, gelu, tanh, add, sub, mul, div and other elementwise ops: FLOPs = output.numel()
//   layer_norm  5 · numel (MASE); batch_norm1d 4 · numel (MASE's BatchNorm2d count);
//   softmax / log_softmax 5 · numel (max, subtract, exp, sum, divide)
//   embedding, dropout, identity, shape ops: 0
//   backward FLOPs of non-linear nodes = 2 × forward (MASE's convention)
// where b is a format's storage bits per value (Format::bits_per_value(), shared block
// scales included) or 32 for float32 — MASE's calculate_avg_bits sums [width, frac_width]
// and calls 8-bit fixed point 12 bits; qnum does not. Ops with no rule are listed as
// unsupported (FLOPs 0), never guessed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qnum/nn/layers.hpp"
#include "qnum/passes/trace.hpp"

namespace qnum::passes {

struct CostRow {
  std::string node, op;
  std::int64_t macs = 0;
  double flops_forward = 0, flops_backward = 0;
  double bitops_forward = 0, bitops_backward = 0;
  double bits_weight = 32, bits_data_in = 32;
  bool supported = true;
};

struct CostReport {
  std::vector<CostRow> rows;
  double total(double CostRow::*field) const {
    double s = 0;
    for (const auto& r : rows) s += r.*field;
    return s;
  }
  std::vector<std::string> unsupported() const {
    std::vector<std::string> out;
    for (const auto& r : rows)
      if (!r.supported) out.push_back(r.node + " (" + r.op + ")");
    return out;
  }
  /// A text table: one row per node with nonzero cost or no rule, then the totals.
  std::string table() const;
};

namespace detail {

inline std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

inline bool is_elementwise(const std::string& op) {
  for (const char* e : {"relu", "gelu", "tanh", "sigmoid", "add", "sub", "mul", "div", "exp", "log", "neg",
                        "add_scalar", "mul_scalar", "sqrt", "pow", "abs", "fake_quantize"})
    if (op == e) return true;
  return false;
}

inline bool is_free(const std::string& op) {
  for (const char* e : {"embedding", "dropout", "identity", "reshape", "transpose", "permute", "view", "x", "output",
                        "contiguous", "slice", "cat", "flatten"})
    if (op == e) return true;
  return false;
}

}  // namespace detail

/// The cost of a node with weights (linear, and convolutions by their MACs): `macs`
/// multiply-accumulates, `bias_adds` output elements given a bias (0 without), the weight's
/// and input's bits, and `adapter_macs` of float32 LoRA products (r·(in + out) per row).
inline CostRow weighted_op_cost(const std::string& node, const std::string& op, double macs, double bias_adds,
                                double bits_weight, double bits_data_in, double adapter_macs = 0.0) {
  CostRow r{node, op};
  r.macs = static_cast<std::int64_t>(macs);
  r.flops_forward = 2.0 * r.macs + bias_adds;
  r.flops_backward = 4.0 * r.macs + bias_adds;
  r.bits_weight = bits_weight;
  r.bits_data_in = bits_data_in;
  r.bitops_forward = r.macs * bits_weight * bits_data_in;
  r.bitops_backward = r.macs * 32.0 * bits_weight + r.macs * 32.0 * bits_data_in;
  if (adapter_macs > 0.0) {
    const double m = adapter_macs;
    r.macs += static_cast<std::int64_t>(m);
    r.flops_forward += 2.0 * m;
    r.flops_backward += 4.0 * m;
    r.bitops_forward += m * 32.0 * 32.0;
    r.bitops_backward += 2.0 * m * 32.0 * 32.0;
  }
  return r;
}

/// The cost of every node of `t` (see the header).
inline CostReport cost(const Trace& t) {
  CostReport report;
  for (const auto& n : t.nodes) {
    if (n.kind == "placeholder" || n.kind == "output") continue;
    CostRow r{n.name, n.op};
    const double out = static_cast<double>(detail::numel_of(n.out_shape));
    if (auto* lin = dynamic_cast<nn::Linear*>(n.module)) {
      const double in = n.in_shapes.empty() ? 0.0 : static_cast<double>(detail::numel_of(n.in_shapes[0]));
      const double rows = in / static_cast<double>(lin->in_features);
      const double lora = lin->lora_A ? static_cast<double>(lin->lora_A->weight.numel() + lin->lora_B->weight.numel())
                                      : 0.0;
      r = weighted_op_cost(n.name, n.op, static_cast<double>(lin->weight.numel()) * rows,
                           lin->bias.defined() ? out : 0.0, nn::operand_bits(lin->quant().weight),
                           nn::operand_bits(lin->quant().data_in), rows * lora);
    } else if (n.op == "matmul" || n.op == "bmm") {
      if (n.in_shapes.size() == 2 && !n.in_shapes[0].empty()) {
        const double k = static_cast<double>(n.in_shapes[0].back());
        r.macs = static_cast<std::int64_t>(out * k);
        r.flops_forward = 2.0 * r.macs;
        r.flops_backward = 4.0 * r.macs;
        r.bitops_forward = r.macs * 32.0 * 32.0;
        r.bitops_backward = 2.0 * r.macs * 32.0 * 32.0;
      } else {
        r.supported = false;
      }
    } else {
      double f = 0;
      if (detail::is_elementwise(n.op))
        f = out;
      else if (n.op == "layer_norm" || n.op == "softmax" || n.op == "log_softmax")
        f = 5.0 * out;
      else if (n.op == "batch_norm1d" || n.op == "batch_norm")
        f = 4.0 * out;
      else if (!detail::is_free(n.op))
        r.supported = false;
      r.flops_forward = f;
      r.flops_backward = 2.0 * f;
    }
    report.rows.push_back(r);
  }
  return report;
}

inline std::string CostReport::table() const {
  std::string s =
      "node                                     op              MACs      FLOPs fwd    FLOPs bwd   "
      "BitOPs fwd   BitOPs bwd  b_w  b_in\n";
  char buf[512];
  for (const auto& r : rows) {
    if (r.flops_forward == 0 && r.supported) continue;
    std::snprintf(buf, sizeof buf, "%-40s %-12s %10lld %12.4g %12.4g %12.4g %12.4g %4.3g %5.3g%s\n", r.node.c_str(),
                  r.op.c_str(), static_cast<long long>(r.macs), r.flops_forward, r.flops_backward, r.bitops_forward,
                  r.bitops_backward, r.bits_weight, r.bits_data_in, r.supported ? "" : "  (no rule: unsupported)");
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "%-40s %-12s %10s %12.4g %12.4g %12.4g %12.4g\n", "total", "", "",
                total(&CostRow::flops_forward), total(&CostRow::flops_backward), total(&CostRow::bitops_forward),
                total(&CostRow::bitops_backward));
  return s + buf;
}

/// The model's parameter storage under its current formats.
struct ModelSize {
  double bits = 0;          ///< every parameter at its format's bits per value (float32: 32)
  double float32_bits = 0;  ///< every parameter as float32
  std::int64_t parameters = 0;
  std::int64_t pruned = 0;  ///< weight entries masked to zero (stored, but prunable by a sparse format)
  double ratio() const { return bits > 0 ? float32_bits / bits : 0.0; }
};

/// Size of the model's parameters: quantized Linear weights and biases at their formats'
/// bits per value, everything else (and LoRA adapters) at 32 bits. Buffers (running
/// statistics, masks) are not parameters and are not counted.
inline ModelSize model_size(nn::Module& model) {
  ModelSize s;
  for (auto& [path, m] : model.named_modules()) {
    auto* lin = dynamic_cast<nn::Linear*>(m);
    for (auto& [name, t] : m->named_parameters()) {
      if (name.find('.') != std::string::npos) continue;  // a child's: counted there
      double bits = 32.0;
      if (lin && name == "weight") bits = nn::operand_bits(lin->quant().weight);
      if (lin && name == "bias") bits = nn::operand_bits(lin->quant().bias);
      s.bits += bits * static_cast<double>(t.numel());
      s.float32_bits += 32.0 * static_cast<double>(t.numel());
      s.parameters += t.numel();
    }
    if (lin && lin->weight_mask.defined())
      for (float v : lin->weight_mask.values()) s.pruned += v == 0.0f;
  }
  return s;
}

}  // namespace qnum::passes
