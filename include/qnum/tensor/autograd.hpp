// Reverse-mode autograd on a dynamic tape.
//
// Every differentiable op computes its value, then (when grad mode is on and an input
// requires grad) attaches a Node to the result: the inputs to propagate to and a backward
// function that, given d(loss)/d(result), returns d(loss)/d(input) for each of them.
// `Tensor::backward` orders the nodes reachable from the root topologically (by creation
// sequence, which is one) and runs them last to first, accumulating into leaves.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <unordered_set>
#include <vector>

#include "qnum/tensor/tensor.hpp"

namespace qnum {

namespace autograd {

/// Gradients for the inputs of one op, given the gradient of its output. Entry i is for
/// `inputs[i]`; an empty vector means "no gradient for this input".
using BackwardFn = std::function<std::vector<FloatBuffer>(std::span<const float> grad_output)>;
/// The same for an op on device tensors: gradients as device arrays (an empty array: none).
/// A returned array may be grad_output itself; the engine never adds into shared memory.
using DeviceBackwardFn = std::function<std::vector<DeviceArray>(const DeviceArray& grad_output)>;

struct Node {
  std::vector<std::shared_ptr<qnum::detail::TensorImpl>> inputs;  // the op's tensor inputs, in order
  BackwardFn backward;
  DeviceBackwardFn device_backward;  // set instead of `backward` by ops on device tensors
  std::uint64_t sequence = 0;  // creation order: a topological order of the tape
  const char* name = "";       // the op, for error messages
  /// The op's gradient for inputs[0] is its output's gradient unchanged (reshape, identity
  /// STE): the engine hands that buffer on instead of calling `backward` for a copy.
  bool passes_gradient = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Releases the tape behind this node iteratively: a chain of thousands of ops would
  /// otherwise be destroyed by recursion deep enough to overflow the stack.
  ~Node() {
    std::vector<std::shared_ptr<Node>> pending;
    auto release = [&pending](Node& n) {
      n.backward = nullptr;  // drops the tensors the closure saved
      n.device_backward = nullptr;
      for (auto& in : n.inputs)
        if (in && in.use_count() == 1 && in->grad_fn) pending.push_back(std::move(in->grad_fn));
      n.inputs.clear();
    };
    release(*this);
    while (!pending.empty()) {
      std::shared_ptr<Node> n = std::move(pending.back());
      pending.pop_back();
      if (n.use_count() == 1) release(*n);
    }
  }
};

namespace detail {
inline bool& grad_mode() {
  thread_local bool enabled = true;
  return enabled;
}
inline std::uint64_t next_sequence() {
  static std::atomic<std::uint64_t> n{0};
  return ++n;
}
}  // namespace detail

/// The gradient list of a one-input op, moving `g` in (a braced list would copy it).
inline std::vector<FloatBuffer> one_grad(FloatBuffer g) {
  std::vector<FloatBuffer> r(1);
  r[0] = std::move(g);
  return r;
}

/// Watches every op result made through make_result on this thread, with or without grad
/// mode (the forward trace of the passes layer implements it).
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void op(const char* name, std::initializer_list<Tensor> inputs, const Tensor& output) = 0;
};

namespace detail {
inline OpObserver*& op_observer() {
  thread_local OpObserver* observer = nullptr;
  return observer;
}
}  // namespace detail

/// Whether ops record the tape on this thread.
inline bool grad_enabled() { return detail::grad_mode(); }

/// Turns tape recording off for its lifetime (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : saved_(detail::grad_mode()) { detail::grad_mode() = false; }
  ~NoGradGuard() { detail::grad_mode() = saved_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool saved_;
};

/// The result of an op: a tensor of `shape` with `values`; when recording and some input
/// requires grad, it requires grad too and carries a Node with `backward`.
inline Tensor make_result(const char* name, Tensor out, std::initializer_list<Tensor> inputs, BackwardFn backward);

inline Tensor make_result(const char* name, Shape shape, FloatBuffer values, std::initializer_list<Tensor> inputs,
                          BackwardFn backward) {
  return make_result(name, Tensor(std::move(shape), std::move(values)), inputs, std::move(backward));
}

namespace detail {
/// Shows `out` to the observer and, when recording and some input requires grad, attaches a
/// Node whose backward `set_backward(node)` installs (a host or a device one).
template <class SetBackward>
Tensor record(const char* name, Tensor out, std::initializer_list<Tensor> inputs, SetBackward&& set_backward) {
  if (OpObserver* observer = op_observer()) observer->op(name, inputs, out);
  if (!grad_enabled()) return out;
  bool any = false;
  for (const Tensor& t : inputs) any |= t.defined() && t.requires_grad();
  if (!any) return out;
  auto node = std::make_shared<Node>();
  for (const Tensor& t : inputs) node->inputs.push_back(t.defined() ? t.impl_ptr() : nullptr);
  set_backward(*node);
  node->sequence = next_sequence();
  node->name = name;
  auto impl = out.impl_ptr();
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
  return out;
}
}  // namespace detail

/// The same for a result tensor made by the op itself (a view sharing an input's storage).
inline Tensor make_result(const char* name, Tensor out, std::initializer_list<Tensor> inputs, BackwardFn backward) {
  return detail::record(name, std::move(out), inputs, [&](Node& n) { n.backward = std::move(backward); });
}

/// The same for an op on device tensors.
inline Tensor make_device_result(const char* name, Tensor out, std::initializer_list<Tensor> inputs,
                                 DeviceBackwardFn backward) {
  return detail::record(name, std::move(out), inputs, [&](Node& n) { n.device_backward = std::move(backward); });
}

/// Adds the device gradient `g` into t's: the first one is taken as it is, later ones add in
/// place when t holds its gradient alone, else into a fresh array (never into memory that
/// another tensor's gradient shares).
inline void accumulate_device_grad(qnum::detail::TensorImpl& t, DeviceArray g) {
  qnum::detail::require(g.size() == t.dstorage.size(), "autograd: device gradient of ", g.size(),
                        " values for a tensor of ", t.dstorage.size());
  if (t.dgrad.empty()) {
    t.dgrad = std::move(g);
    return;
  }
  DeviceBackend& b = t.dgrad.backend();
  if (t.dgrad.use_count() == 1) {
    b.binary(DeviceBackend::Binary::add, t.dgrad.data(), g.data(), g.size(), g.size(), t.dgrad.data());
    return;
  }
  DeviceArray sum(t.device, g.size());
  b.binary(DeviceBackend::Binary::add, t.dgrad.data(), g.data(), g.size(), g.size(), sum.data());
  t.dgrad = std::move(sum);
}

/// Adds `g` into t's gradient (allocated as zeros on first use).
inline void accumulate_grad(qnum::detail::TensorImpl& t, std::span<const float> g) {
  if (t.grad.empty()) t.grad.assign(t.storage->size(), 0.0f);
  qnum::detail::require(g.size() == t.grad.size(), "autograd: gradient of ", g.size(), " values for a tensor of ",
                        t.grad.size());
  for (std::size_t i = 0; i < g.size(); ++i) t.grad[i] += g[i];
}

/// The same for a gradient the caller gives away: the first one becomes t's gradient as it is
/// (no zero fill and add; 0 + g is g for every g but -0, which stays -0 here: no later step
/// tells the two apart), later ones add in as above.
inline void accumulate_grad(qnum::detail::TensorImpl& t, FloatBuffer&& g) {
  if (t.grad.empty() && g.size() == t.storage->size()) {
    t.grad = std::move(g);
    return;
  }
  accumulate_grad(t, std::span<const float>(g));
}

/// Marks `out`'s op (when it recorded one) as passing its gradient to its first input
/// unchanged; `backward` must compute exactly that (it still serves any direct caller).
inline Tensor passes_gradient(Tensor out) {
  if (const auto& fn = out.impl_ptr()->grad_fn) fn->passes_gradient = true;
  return out;
}

}  // namespace autograd

inline void Tensor::backward(const Tensor& grad_output) const {
  auto root = impl_ptr();
  qnum::detail::require(root != nullptr, "backward: undefined tensor");
  qnum::detail::require(root->requires_grad, "backward: the tensor does not require grad (no parameter reaches it)");
  FloatBuffer seed;
  DeviceArray device_seed;
  if (root->device.is_cuda()) {
    if (grad_output.defined()) {
      qnum::detail::require(grad_output.shape() == shape() && grad_output.device() == device(),
                            "backward: grad_output must have the tensor's shape ", to_string(shape()), " and device ",
                            device().str());
      device_seed = grad_output.clone().device_array();
    } else {
      qnum::detail::require(numel() == 1, "backward: a tensor of shape ", to_string(shape()),
                            " needs grad_output (only one-element tensors get an implicit 1)");
      device_seed = DeviceArray(device(), 1);
      device_seed.backend().fill(device_seed.data(), 1.0f, 1);
    }
  } else if (grad_output.defined()) {
    qnum::detail::require(grad_output.shape() == shape(), "backward: grad_output shape ",
                          to_string(grad_output.shape()), " differs from the tensor's ", to_string(shape()));
    seed.assign(grad_output.values().begin(), grad_output.values().end());
  } else {
    qnum::detail::require(numel() == 1, "backward: a tensor of shape ", to_string(shape()),
                          " needs grad_output (only one-element tensors get an implicit 1)");
    seed = {1.0f};
  }
  // Collect the tape reachable from the root (iteratively: deep models make long chains).
  // Owning handles: releasing a node below may drop the last other reference to its inputs.
  std::vector<std::shared_ptr<detail::TensorImpl>> nodes;
  std::unordered_set<const detail::TensorImpl*> seen;
  std::vector<std::shared_ptr<detail::TensorImpl>> stack{root};
  while (!stack.empty()) {
    std::shared_ptr<detail::TensorImpl> t = std::move(stack.back());
    stack.pop_back();
    if (!t->grad_fn || !seen.insert(t.get()).second) continue;
    for (const auto& in : t->grad_fn->inputs)
      if (in && in->requires_grad) stack.push_back(in);
    nodes.push_back(std::move(t));
  }
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a->grad_fn->sequence > b->grad_fn->sequence;  // outputs before the ops that made their inputs
  });
  if (root->device.is_cuda())
    autograd::accumulate_device_grad(*root, std::move(device_seed));
  else
    autograd::accumulate_grad(*root, std::move(seed));
  for (const auto& t : nodes) {
    if (t->grad_fn->device_backward) {  // an op on device tensors
      if (t->dgrad.empty()) continue;
      const std::shared_ptr<autograd::Node> node = t->grad_fn;
      if (node->passes_gradient && t != root) {
        const auto& in = node->inputs[0];
        if (in && in->requires_grad) autograd::accumulate_device_grad(*in, std::move(t->dgrad));
      } else {
        auto grads = node->device_backward(t->dgrad);
        qnum::detail::require(grads.size() == node->inputs.size(), "autograd: ", node->name, " returned ",
                              grads.size(), " gradients for ", node->inputs.size(), " inputs");
        for (std::size_t i = 0; i < grads.size(); ++i) {
          const auto& in = node->inputs[i];
          if (in && in->requires_grad && !grads[i].empty()) autograd::accumulate_device_grad(*in, std::move(grads[i]));
        }
      }
      if (t != root) t->dgrad = DeviceArray();
      t->grad_fn.reset();
      continue;
    }
    if (t->grad.empty()) continue;  // nothing flowed into this branch
    const std::shared_ptr<autograd::Node> node = t->grad_fn;
    if (node->passes_gradient && t != root) {  // identity backward: move the buffer on
      const auto& in = node->inputs[0];
      if (in && in->requires_grad) autograd::accumulate_grad(*in, std::move(t->grad));
      t->grad.clear();
      t->grad_fn.reset();
      continue;
    }
    auto grads = node->backward(t->grad);
    qnum::detail::require(grads.size() == node->inputs.size(), "autograd: ", node->name, " returned ", grads.size(),
                          " gradients for ", node->inputs.size(), " inputs");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const auto& in = node->inputs[i];
      if (in && in->requires_grad && !grads[i].empty()) autograd::accumulate_grad(*in, std::move(grads[i]));
    }
    // Release the tape: intermediate gradients and the node (saved activations) go now.
    if (t != root) t->grad.clear();
    t->grad_fn.reset();
  }
}

}  // namespace qnum
