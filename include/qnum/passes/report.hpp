// Reports over a forward trace: MASE's graph report (report_graph_analysis_pass,
// spec/system.md §2.1) in qnum's terms, and the op graph in Graphviz DOT.
#pragma once

#include <cstdio>
#include <string>

#include "qnum/nn/layers.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/trace.hpp"

namespace qnum::passes {

/// A layer as PyTorch prints it: "Linear(in_features=16, out_features=5, bias=True)".
inline std::string layer_repr(nn::Module& m) {
  auto b = [](bool v) { return v ? "True" : "False"; };
  std::string s;
  if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
    s = m.type_name() + "(in_features=" + std::to_string(l->in_features) +
        ", out_features=" + std::to_string(l->out_features) + ", bias=" + b(l->bias.defined());
    if (l->is_quantized()) s += ", " + l->quant().to_string();
    if (l->weight_mask.defined()) s += ", pruned";
    if (l->input_transform) s += ", input: " + l->input_transform->describe();
    if (l->lora_A) s += ", lora rank " + std::to_string(l->lora_A->out_features);
    return s + ")";
  }
  if (auto* bn = dynamic_cast<nn::BatchNorm1d*>(&m)) return "BatchNorm1d(" + std::to_string(bn->num_features) + ")";
  if (auto* ln = dynamic_cast<nn::LayerNorm*>(&m))
    s = "LayerNorm((" + std::to_string(ln->weight.numel()) + ",), eps=" + qnum::detail::format_double(ln->eps);
  else if (auto* d = dynamic_cast<nn::Dropout*>(&m))
    return "Dropout(p=" + qnum::detail::format_double(d->p) + ")";
  else if (auto* e = dynamic_cast<nn::Embedding*>(&m))
    return "Embedding(" + std::to_string(e->weight.size(0)) + ", " + std::to_string(e->weight.size(1)) + ")";
  else
    s = m.type_name() + "(";
  if (auto* q = dynamic_cast<nn::Quantizable*>(&m); q && q->is_quantized())
    s += (s.back() == '(' ? "" : ", ") + q->quant().to_string();
  return s + ")";
}

/// The graph report: the node table (kind, name, target, args, output shape), the count of
/// each node kind, and the list of layers — MASE's report for jsc-tiny lists
/// [BatchNorm1d(16), ReLU, Linear(16→5), ReLU] with 1 placeholder, 4 call_module, 1 output.
inline std::string graph_report(const Trace& t) {
  std::string s = "Graph of " + std::to_string(t.nodes.size()) + " nodes\n\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-4s %-14s %-36s %-28s %-16s %s\n", "id", "kind", "name", "target", "args",
                "output shape");
  s += buf;
  for (const auto& n : t.nodes) {
    std::string args;
    for (int a : n.args) args += (args.empty() ? "" : ",") + t.nodes[static_cast<std::size_t>(a)].name;
    std::snprintf(buf, sizeof buf, "%-4d %-14s %-36s %-28s %-16s %s\n", n.id, n.kind.c_str(), n.name.c_str(),
                  n.target.c_str(), args.c_str(), to_string(n.out_shape).c_str());
    s += buf;
  }
  s += "\nNode kinds:";
  for (const auto& [kind, count] : t.counts()) s += " " + kind + "=" + std::to_string(count);
  s += "\n\nLayers:\n";
  for (const auto& n : t.nodes)
    if (n.module) s += "  " + (n.target.empty() ? "(root)" : n.target) + ": " + layer_repr(*n.module) + "\n";
  return s;
}

/// The op graph in Graphviz DOT: one box per node (name, op, output shape; quantized layers
/// show their formats), one edge per data-flow dependency.
inline std::string to_dot(const Trace& t, const std::string& title = "qnum") {
  auto esc = [](std::string v) {
    std::string o;
    for (char c : v) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  };
  std::string s = "digraph \"" + esc(title) + "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const auto& n : t.nodes) {
    std::string label = n.name + "\\n" + n.kind +
                        (n.kind == "call_module" || n.kind == "call_function" ? ": " + n.op : "") + "\\n" +
                        to_string(n.out_shape);
    if (auto* q = dynamic_cast<nn::Quantizable*>(n.module); q && q->is_quantized())
      label += "\\n" + esc(q->quant().to_string());
    const char* style = n.kind == "placeholder" || n.kind == "output" ? ", shape=ellipse"
                        : n.kind == "call_function"                   ? ", style=rounded"
                                                                      : "";
    s +=
        "  n" + std::to_string(n.id) + " [label=\"" + esc(n.name) + label.substr(n.name.size()) + "\"" + style + "];\n";
  }
  for (const auto& n : t.nodes)
    for (int a : n.args) s += "  n" + std::to_string(a) + " -> n" + std::to_string(n.id) + ";\n";
  return s + "}\n";
}

}  // namespace qnum::passes
