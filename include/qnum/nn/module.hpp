// nn::Module: the tree that layers and models are built from, as torch.nn.Module.
//
// A module owns named parameters (trainable leaf tensors), buffers (state that is saved but
// not trained, e.g. BatchNorm's running statistics) and child modules. Names compose with
// dots ("layers.0.weight") exactly as PyTorch's, so a state_dict maps one to one onto a
// PyTorch / safetensors checkpoint. Tensors are handles: the module and an optimizer share
// the same parameter storage, and load_state_dict copies values in place so that sharing
// survives a reload.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum::nn {

class Module;

/// Watches module calls made through Module::operator() on this thread (the forward trace
/// of the passes layer implements it). At most one observer is installed at a time.
class ModuleObserver {
 public:
  virtual ~ModuleObserver() = default;
  virtual void enter(Module& m, std::span<const Tensor> inputs) = 0;
  virtual void exit(Module& m, const Tensor& output) = 0;
};

namespace detail {
inline ModuleObserver*& module_observer() {
  thread_local ModuleObserver* observer = nullptr;
  return observer;
}
}  // namespace detail

/// Base class of every layer and model. Not copyable: copies would alias the parameters.
class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  /// The layer's name in messages and reports ("Linear", "Sequential", ...).
  virtual std::string type_name() const { return "Module"; }

  /// The module's computation on one tensor. Modules with other inputs (indices, several
  /// tensors) offer their own entry points and keep this default, which throws.
  virtual Tensor forward(const Tensor& /*x*/) { qnum::detail::fail(type_name(), " has no single-tensor forward"); }
  /// forward(x), seen by the installed ModuleObserver (containers call their children
  /// through this, so a trace sees every layer).
  Tensor operator()(const Tensor& x) {
    return observed({x}, [&] { return forward(x); });
  }

  /// Runs `fn` (the module's computation on `inputs`) seen by the installed ModuleObserver;
  /// modules with several inputs (e.g. Matmul) call it from their own operator().
  template <class F>
  Tensor observed(std::initializer_list<Tensor> inputs, F&& fn) {
    ModuleObserver* observer = detail::module_observer();
    if (!observer) return fn();
    observer->enter(*this, std::span<const Tensor>(inputs.begin(), inputs.size()));
    Tensor y = fn();
    observer->exit(*this, y);
    return y;
  }

  /// The operator this module computes in MASE's vocabulary ("linear", "relu",
  /// "batch_norm1d", ...), which quantize passes select `by = "type"`; empty for containers
  /// and models, whose work is their children's.
  virtual std::string op_name() const { return ""; }

  // ---- registration ---------------------------------------------------------------------

  /// Adds a trainable parameter (a leaf; requires_grad is switched on) and returns it.
  Tensor register_parameter(const std::string& name, Tensor t) {
    check_new_name(name, "parameter");
    qnum::detail::require(t.defined(), type_name(), ": parameter '", name, "' is an undefined tensor");
    qnum::detail::require(t.is_leaf(), type_name(), ": parameter '", name, "' must be a leaf tensor (detach it first)");
    t.set_requires_grad(true);
    params_.emplace_back(name, t);
    return t;
  }

  /// Adds a buffer: saved in state_dict, never trained (requires_grad stays off).
  Tensor register_buffer(const std::string& name, Tensor t) {
    check_new_name(name, "buffer");
    qnum::detail::require(t.defined(), type_name(), ": buffer '", name, "' is an undefined tensor");
    qnum::detail::require(!t.requires_grad(), type_name(), ": buffer '", name, "' must not require grad");
    buffers_.emplace_back(name, t);
    return t;
  }

  /// Adds a child module and returns it with its own type, so layers can keep typed handles.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_new_name(name, "module");
    qnum::detail::require(m != nullptr, type_name(), ": module '", name, "' is null");
    children_.emplace_back(name, m);
    return m;
  }

  // ---- traversal ------------------------------------------------------------------------

  /// Every parameter of the tree with its dotted name, this module's own first, then each
  /// child's in registration order (PyTorch's order). A tensor registered twice (tied
  /// weights) is listed once, under its first name, as PyTorch does.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const { return unique(collect_all(&Module::params_)); }
  /// Every buffer of the tree with its dotted name (each tensor once).
  std::vector<std::pair<std::string, Tensor>> named_buffers() const { return unique(collect_all(&Module::buffers_)); }
  /// This module (named "") and every descendant, depth first, with dotted names.
  std::vector<std::pair<std::string, Module*>> named_modules() {
    std::vector<std::pair<std::string, Module*>> out;
    collect_modules(out, "");
    return out;
  }
  /// The parameters of named_parameters(), for an optimizer.
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (auto& [name, t] : named_parameters()) out.push_back(t);
    return out;
  }
  /// Removes the child `name` (e.g. a LoRA adapter being fused away); qnum::Error if absent.
  void remove_module(const std::string& name) {
    const auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
    qnum::detail::require(it != children_.end(), type_name(), ": no child module '", name, "' to remove");
    children_.erase(it);
  }
  /// Puts `m` in place of the child `name`, at the same position (torch's setattr of a
  /// submodule), and returns the old child; qnum::Error if absent or `m` is null. Typed
  /// handles a parent keeps to the old child are the parent's to update.
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> m) {
    const auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
    qnum::detail::require(it != children_.end(), type_name(), ": no child module '", name, "' to replace");
    qnum::detail::require(m != nullptr, type_name(), ": module '", name, "' is null");
    return std::exchange(it->second, std::move(m));
  }
  /// The module at dotted `path` below this one ("" is this module); qnum::Error naming the
  /// missing part otherwise.
  Module& at(const std::string& path) {
    Module* m = this;
    std::size_t pos = 0;
    while (!path.empty() && pos <= path.size()) {
      const std::size_t end = std::min(path.find('.', pos), path.size());
      const std::string part = path.substr(pos, end - pos);
      const auto& kids = m->children_;
      const auto it = std::find_if(kids.begin(), kids.end(), [&](const auto& c) { return c.first == part; });
      qnum::detail::require(it != kids.end(), "no module '", path, "' (", m->type_name(), " has no child '", part,
                            "')");
      m = it->second.get();
      pos = end + 1;
    }
    return *m;
  }

  /// The direct children with their (undotted) names.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  /// Number of parameter values, optionally only those that currently require grad.
  std::int64_t num_parameters(bool trainable_only = false) const {
    std::int64_t n = 0;
    for (auto& [name, t] : named_parameters())
      if (!trainable_only || t.requires_grad()) n += t.numel();
    return n;
  }

  // ---- state ----------------------------------------------------------------------------

  /// Parameters and buffers by dotted name, as detached copies (later training does not
  /// change a saved state).
  /// Tied tensors appear under each of their names (PyTorch's state_dict keys).
  /// Host tensors whatever the module's device: checkpoints do not depend on it.
  std::map<std::string, Tensor> state_dict() const {
    std::map<std::string, Tensor> out;
    auto host_copy = [](const Tensor& t) { return t.is_cuda() ? t.to(Device::cpu()) : t.clone(); };
    for (auto& [name, t] : collect_all(&Module::params_)) out.emplace(name, host_copy(t));
    for (auto& [name, t] : collect_all(&Module::buffers_)) out.emplace(name, host_copy(t));
    return out;
  }

  /// Moves every parameter and buffer to `device` in place (the tensors keep their
  /// identity, so build optimizers after or before alike); gradients are dropped.
  Module& to(const Device& device) {
    for (auto& [name, t] : named_parameters()) t.move_to_(device);
    for (auto& [name, t] : named_buffers()) t.move_to_(device);
    return *this;
  }
  /// The device of the first parameter (cpu for a module without any). Called per batch
  /// (features_forward), so it walks the tree without building names.
  Device device() const {
    const Tensor* p = first_parameter();
    return p != nullptr ? p->device() : Device::cpu();
  }

  /// Copies `state` into the parameters and buffers in place (their identity, and so any
  /// optimizer holding them, is kept). Strict: every key must match; otherwise missing and
  /// unexpected keys are ignored. Shape mismatches are always errors. Nothing is changed
  /// unless the whole state is accepted; the error lists every problem found.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true) {
    Named own = collect_all(&Module::params_);
    for (auto& nb : collect_all(&Module::buffers_)) own.push_back(std::move(nb));
    std::string missing, unexpected, mismatched;
    auto append = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
    std::map<std::string, bool> known;
    for (auto& [name, t] : own) {
      known[name] = true;
      const auto it = state.find(name);
      if (it == state.end()) {
        append(missing, name);
      } else if (!it->second.defined()) {
        append(mismatched, name + " (undefined tensor)");
      } else if (it->second.shape() != t.shape()) {
        append(mismatched,
               name + " (checkpoint " + qnum::to_string(it->second.shape()) + ", model " + qnum::to_string(t.shape()) + ")");
      }
    }
    for (auto& [name, t] : state)
      if (!known.count(name)) append(unexpected, name);
    std::string why;
    if (strict && !missing.empty()) why += "; missing keys: " + missing;
    if (strict && !unexpected.empty()) why += "; unexpected keys: " + unexpected;
    if (!mismatched.empty()) why += "; shape mismatch: " + mismatched;
    if (!why.empty()) qnum::detail::fail(type_name(), ".load_state_dict: ", why.substr(2));
    for (auto& [name, t] : own) {
      const auto it = state.find(name);
      if (it == state.end()) continue;
      if (t.is_cuda()) {  // the module lives on a device: the checkpoint's values go there
        const Tensor src = it->second.to(t.device());
        if (t.numel() > 0)
          device_backend(t.device())
              .copy_on_device(t.device_data(), src.device_data(), static_cast<std::size_t>(t.numel()) * sizeof(float));
        continue;
      }
      const std::vector<float> staged = it->second.is_cuda() ? it->second.to_vector() : std::vector<float>();
      const auto src = it->second.is_cuda() ? std::span<const float>(staged) : it->second.values();
      std::copy(src.begin(), src.end(), t.values().begin());
    }
  }

  // ---- modes ----------------------------------------------------------------------------

  /// Training mode (dropout active, batch statistics) for this module and all descendants.
  Module& train(bool on = true) {
    for (auto& [name, m] : named_modules()) m->training_ = on;
    return *this;
  }
  /// Evaluation mode: train(false).
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  /// Stops (freeze) or resumes (unfreeze) training of every parameter of the tree.
  void freeze() { set_trainable(false); }
  void unfreeze() { set_trainable(true); }

  /// Drops the accumulated gradient of every parameter.
  void zero_grad() {
    for (auto& [name, t] : named_parameters()) t.zero_grad();
  }

 private:
  using Named = std::vector<std::pair<std::string, Tensor>>;

  /// The first parameter in named_parameters() order (depth first), or null.
  const Tensor* first_parameter() const {
    if (!params_.empty()) return &params_.front().second;
    for (const auto& [name, child] : children_)
      if (const Tensor* p = child->first_parameter()) return p;
    return nullptr;
  }

  void check_new_name(const std::string& name, const char* what) const {
    qnum::detail::require(!name.empty() && name.find('.') == std::string::npos, type_name(), ": ", what, " name '",
                          name, "' must be non-empty and contain no '.'");
    auto taken = [&](const auto& list) {
      for (auto& entry : list)
        if (entry.first == name) return true;
      return false;
    };
    qnum::detail::require(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(), ": name '", name,
                          "' is already registered");
  }

  /// Every entry of `list` in the tree, tied tensors under each name.
  Named collect_all(Named Module::*list) const {
    Named out;
    collect(out, "", list);
    return out;
  }
  static Named unique(Named all) {
    std::set<const qnum::detail::TensorImpl*> seen;
    std::erase_if(all, [&](const auto& entry) { return !seen.insert(entry.second.id()).second; });
    return all;
  }

  void collect(Named& out, const std::string& prefix, Named Module::*list) const {
    for (auto& [name, t] : this->*list) out.emplace_back(prefix + name, t);
    for (auto& [name, child] : children_) child->collect(out, prefix + name + ".", list);
  }

  void collect_modules(std::vector<std::pair<std::string, Module*>>& out, const std::string& name) {
    out.emplace_back(name, this);
    for (auto& [child_name, child] : children_)
      child->collect_modules(out, name.empty() ? child_name : name + "." + child_name);
  }

  void set_trainable(bool on) {
    for (auto& [name, t] : named_parameters()) t.set_requires_grad(on);
  }

  Named params_;
  Named buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace qnum::nn
