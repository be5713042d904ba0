// The forward trace: runs a model once on an example input and records its op graph, as
// MASE's FX tracing does (spec/system.md §1), in qnum's own terms:
//   placeholder    the model's input
//   call_module    a leaf layer (a module with an op name, or without children), called
//                  through Module::operator(); what happens inside it is not recorded
//   call_function  a tensor op outside any leaf layer (a residual add, a matmul, softmax)
//   output         the model's result
// Each node has its producers (data-flow edges), its input and output shapes, and for
// modules the module itself, so reports (graph, FLOPs/BitOPs, statistics) and the DOT
// export read one structure. Ops whose inputs were not produced inside the trace
// (parameters, constants) get no edge for them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qnum/nn/module.hpp"
#include "qnum/tensor/autograd.hpp"

namespace qnum::passes {

struct TraceNode {
  int id = 0;
  std::string kind;              ///< placeholder | call_module | call_function | output
  std::string name;              ///< unique node name (MASE style: module path with '_', op name + counter)
  std::string target;            ///< module path (call_module) or op name (call_function)
  std::string op;                ///< the op: a module's op_name(), a function's name
  std::string type;              ///< a module's type_name(), or the function's name
  std::vector<int> args;         ///< ids of the nodes producing its inputs
  std::vector<Shape> in_shapes;  ///< shapes of its tensor inputs
  Shape out_shape;
  nn::Module* module = nullptr;  ///< call_module only
};

struct Trace {
  std::vector<TraceNode> nodes;

  /// How many nodes of each kind (placeholder, call_module, call_function, output).
  std::map<std::string, int> counts() const {
    std::map<std::string, int> c{{"placeholder", 0}, {"call_module", 0}, {"call_function", 0}, {"output", 0}};
    for (const auto& n : nodes) ++c[n.kind];
    return c;
  }
};

namespace detail {

/// Whether `m` is traced as one call_module node.
inline bool is_leaf_layer(nn::Module& m) { return !m.op_name().empty() || m.children().empty(); }

class Tracer : public nn::ModuleObserver, public autograd::OpObserver {
 public:
  explicit Tracer(nn::Module& root) {
    for (auto& [path, m] : root.named_modules()) paths_[m] = path;
  }

  int add(TraceNode n, const Tensor& out) {
    n.id = static_cast<int>(trace.nodes.size());
    n.out_shape = out.shape();
    producer_[out.id()] = n.id;
    keep_.push_back(out);  // keeps the address unique while tracing
    trace.nodes.push_back(std::move(n));
    return trace.nodes.back().id;
  }

  /// The node that produced `t`, or -1.
  int producer(const Tensor& t) const {
    const auto it = producer_.find(t.id());
    return it == producer_.end() ? -1 : it->second;
  }

  void enter(nn::Module& m, std::span<const Tensor> inputs) override {
    if (inside_leaf_ > 0 || !is_leaf_layer(m)) {
      if (inside_leaf_ > 0) ++inside_leaf_;
      return;
    }
    ++inside_leaf_;
    pending_inputs_.assign(inputs.begin(), inputs.end());
  }

  void exit(nn::Module& m, const Tensor& output) override {
    if (inside_leaf_ == 0) return;
    if (--inside_leaf_ > 0) return;
    TraceNode n;
    n.kind = "call_module";
    const auto it = paths_.find(&m);
    n.target = it != paths_.end() ? it->second : "?";
    n.name = unique(node_name(n.target.empty() ? m.type_name() : n.target));
    n.op = m.op_name().empty() ? m.type_name() : m.op_name();
    n.type = m.type_name();
    n.module = &m;
    for (const Tensor& t : pending_inputs_) link(n, t);
    add(std::move(n), output);
    pending_inputs_.clear();
  }

  void op(const char* name, std::initializer_list<Tensor> inputs, const Tensor& output) override {
    if (inside_leaf_ > 0) return;
    TraceNode n;
    n.kind = "call_function";
    n.target = n.op = n.type = name;
    n.name = unique(name);
    for (const Tensor& t : inputs)
      if (t.defined()) link(n, t);
    add(std::move(n), output);
  }

  Trace trace;

 private:
  static std::string node_name(const std::string& path) {
    std::string s = path;
    for (auto& c : s)
      if (c == '.') c = '_';
    return s;
  }
  std::string unique(const std::string& base) {
    const int k = used_[base]++;
    return k == 0 ? base : base + "_" + std::to_string(k);
  }
  void link(TraceNode& n, const Tensor& t) {
    n.in_shapes.push_back(t.shape());
    if (const auto it = producer_.find(t.id()); it != producer_.end()) n.args.push_back(it->second);
  }

  std::map<const nn::Module*, std::string> paths_;
  std::map<const void*, int> producer_;
  std::map<std::string, int> used_;
  std::vector<Tensor> keep_;
  std::vector<Tensor> pending_inputs_;
  int inside_leaf_ = 0;
};

/// Installs an observer for its lifetime (one trace per thread at a time).
template <class T>
class ObserverSlot {
 public:
  ObserverSlot(T*& slot, T* value, const char* what) : slot_(slot) {
    qnum::detail::require(slot_ == nullptr, what, ": another trace is already running on this thread");
    slot_ = value;
  }
  ~ObserverSlot() { slot_ = nullptr; }
  ObserverSlot(const ObserverSlot&) = delete;
  ObserverSlot& operator=(const ObserverSlot&) = delete;

 private:
  T*& slot_;
};

}  // namespace detail

/// A named input of a traced call: one placeholder node ("input_ids", "attention_mask", ...).
struct TraceInput {
  std::string name;
  Tensor value;
};

/// Runs `run` — the model's forward on `inputs`, and whatever the caller adds after it (a
/// loss) — in eval mode without gradients (the mode is restored) and returns its op graph:
/// one placeholder per input in order, then the recorded nodes, then the output (what `run`
/// returns). How MASE traces a Hugging Face model with `hf_input_names`: each name given is
/// a graph input, and passing labels puts the loss into the graph.
inline Trace trace(nn::Module& model, const std::vector<TraceInput>& inputs, const std::function<Tensor()>& run) {
  qnum::detail::require(!inputs.empty(), "trace: at least one input is needed");
  detail::Tracer tracer(model);
  const bool was_training = model.is_training();
  model.eval();
  {
    autograd::NoGradGuard no_grad;
    detail::ObserverSlot<nn::ModuleObserver> m(nn::detail::module_observer(), &tracer, "trace");
    detail::ObserverSlot<autograd::OpObserver> o(autograd::detail::op_observer(), &tracer, "trace");
    for (const auto& input : inputs) {
      qnum::detail::require(input.value.defined(), "trace: input '", input.name, "' is an undefined tensor");
      TraceNode in;
      in.kind = "placeholder";
      in.name = in.target = in.op = in.type = input.name;
      tracer.add(in, input.value);
    }
    Tensor y;
    try {
      y = run();
    } catch (...) {
      model.train(was_training);
      throw;
    }
    TraceNode out;
    out.kind = "output";
    out.name = out.target = out.op = out.type = "output";
    out.in_shapes.push_back(y.shape());
    if (const int p = tracer.producer(y); p >= 0) out.args = {p};
    tracer.add(out, y);
  }
  model.train(was_training);
  return std::move(tracer.trace);
}

/// Runs `model` on `example` (one placeholder "x") and returns its op graph (see above).
inline Trace trace(nn::Module& model, const Tensor& example) {
  return trace(model, {{"x", example}}, [&] { return model(example); });
}

/// How many nodes of `t` compute `op` (a module's op name or a function's name).
inline int count_op(const Trace& t, const std::string& op) {
  int n = 0;
  for (const auto& node : t.nodes) n += (node.kind == "call_module" || node.kind == "call_function") && node.op == op;
  return n;
}

/// Removes the nodes `pred` selects from the graph, as MASE's tutorial-1 pass removes dropout:
/// every use of a removed node is replaced by its first input (replace_all_uses_with(args[0])),
/// then the node is erased; ids are renumbered in order. A selected node without an input
/// cannot be bypassed: qnum::Error naming it. Returns how many nodes were removed.
inline int remove_nodes(Trace& t, const std::function<bool(const TraceNode&)>& pred) {
  std::vector<int> replacement(t.nodes.size());
  std::vector<bool> removed(t.nodes.size(), false);
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    replacement[i] = static_cast<int>(i);
    const TraceNode& n = t.nodes[i];
    if (n.kind == "placeholder" || n.kind == "output" || !pred(n)) continue;
    qnum::detail::require(!n.args.empty(), "trace: node '", n.name, "' has no input to replace its uses with");
    replacement[i] = replacement[static_cast<std::size_t>(n.args[0])];  // producers come first
    removed[i] = true;
  }
  std::vector<int> new_id(t.nodes.size(), -1);
  std::vector<TraceNode> kept;
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (!removed[i]) {
      new_id[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(t.nodes[i]));
    }
  for (auto& n : kept) {
    n.id = new_id[static_cast<std::size_t>(n.id)];
    for (int& a : n.args) a = new_id[static_cast<std::size_t>(replacement[static_cast<std::size_t>(a)])];
  }
  const int count = static_cast<int>(t.nodes.size() - kept.size());
  t.nodes = std::move(kept);
  return count;
}

}  // namespace qnum::passes
