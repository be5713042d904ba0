// Optimizers over a list of parameter tensors: SGD (momentum, dampening, weight decay,
// Nesterov), Adam (L2 weight decay) and AdamW (decoupled weight decay), with torch.optim's
// defaults and update order so a run can be compared with PyTorch step for step.
//
// Parameters are handles shared with the model; step() rewrites their values in place under
// NoGradGuard. Per-parameter state (step count, moment buffers) is created on the first
// step that parameter has a gradient, as PyTorch does, and round-trips through
// state_dict() / load_state_dict() so an interrupted run resumes with the same next step.
// All three compute in float32, rounding where torch.optim's CPU kernels round (its bits, but for
// Adam's square root: see AdamBase::update).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "qnum/core/error.hpp"
#include "qnum/kernel/fmadd.hpp"
#include "qnum/tensor/autograd.hpp"

namespace qnum::nn {

/// The common part of every optimizer: parameters, learning rate, state and its saving.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string type_name() const = 0;

  /// One update of every parameter that has a gradient (the others are left alone).
  void step() {
    autograd::NoGradGuard no_grad;
    std::vector<std::size_t> on_device;  // updated together below (one launch per group on CUDA)
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor& p = params_[i];
      if (!p.has_grad()) continue;
      ParamState& s = state_[i];
      if (s.buffers.empty()) s.buffers.assign(buffer_names().size(), {});
      ++s.step;
      if (p.is_cuda()) {
        on_device.push_back(i);
      } else {
        if (!s.device_buffers.empty()) host_buffers(s);  // the model came back from a device
        update(p.values(), p.grad(), s);
      }
    }
    if (!on_device.empty()) update_on_device(on_device);
  }

  /// Drops the gradient of every parameter.
  void zero_grad() {
    for (Tensor& p : params_) p.zero_grad();
  }

  double lr() const { return lr_; }
  /// Sets the learning rate (schedules call this before each step).
  void set_lr(double lr) {
    qnum::detail::require(std::isfinite(lr) && lr >= 0.0, type_name(), ": learning rate ", lr,
                          " must be finite and >= 0");
    lr_ = lr;
  }
  const std::vector<Tensor>& params() const { return params_; }

  /// The state of each parameter i that has taken a step, as "<i>.step" (a scalar) and
  /// "<i>.<buffer>" (the parameter's shape), buffers named as PyTorch's ("momentum_buffer",
  /// "exp_avg", "exp_avg_sq"). Hyperparameters are not included: they come from the run's
  /// configuration. Step counts are stored as float32, so they must stay <= 2^24.
  std::map<std::string, Tensor> state_dict() const {
    std::map<std::string, Tensor> out;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const ParamState& s = state_[i];
      if (s.step == 0) continue;
      qnum::detail::require(s.step <= kMaxSavedStep, type_name(), ".state_dict: step ", s.step, " of parameter ", i,
                            " is above 2^24 and cannot be stored exactly as float32");
      const std::string prefix = std::to_string(i) + ".";
      out.emplace(prefix + "step", Tensor::scalar(static_cast<float>(s.step)));
      for (std::size_t b = 0; b < s.buffers.size(); ++b) {
        if (b < s.device_buffers.size() && !s.device_buffers[b].empty())  // host copies: device-independent
          out.emplace(prefix + buffer_names()[b],
                      Tensor::from_device(params_[i].shape(), s.device_buffers[b]).to(Device::cpu()));
        else if (!s.buffers[b].empty())
          out.emplace(prefix + buffer_names()[b], Tensor(params_[i].shape(), s.buffers[b]));
      }
    }
    return out;
  }

  /// Replaces the state with `state` (as written by state_dict for the same parameter
  /// list). Unknown keys, a buffer without its step, some but not all of a parameter's
  /// buffers, a bad step or a shape that does not match the parameter are errors naming the
  /// key; nothing changes unless all is valid.
  void load_state_dict(const std::map<std::string, Tensor>& state) {
    std::vector<ParamState> loaded(params_.size());
    std::set<std::string> used;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const std::string prefix = std::to_string(i) + ".";
      const auto step = state.find(prefix + "step");
      if (step == state.end()) continue;
      used.insert(step->first);
      const float v = step->second.defined() && step->second.numel() == 1 ? step->second.values()[0] : -1.0f;
      qnum::detail::require(v >= 1.0f && v <= static_cast<float>(kMaxSavedStep) && std::floor(v) == v, type_name(),
                            ".load_state_dict: '", step->first, "' must be a one-element whole number >= 1");
      ParamState& s = loaded[i];
      s.step = static_cast<std::int64_t>(v);
      s.buffers.assign(buffer_names().size(), {});
      std::size_t found = 0;
      for (std::size_t b = 0; b < buffer_names().size(); ++b) {
        const auto it = state.find(prefix + buffer_names()[b]);
        if (it == state.end()) continue;  // e.g. SGD without momentum, or no buffer yet
        used.insert(it->first);
        qnum::detail::require(it->second.defined() && it->second.shape() == params_[i].shape(), type_name(),
                              ".load_state_dict: '", it->first, "' has shape ",
                              it->second.defined() ? qnum::to_string(it->second.shape()) : "(undefined)", ", parameter ", i,
                              " has ", qnum::to_string(params_[i].shape()));
        s.buffers[b] = it->second.to_vector();
        ++found;
      }
      qnum::detail::require(found == 0 || found == buffer_names().size(), type_name(), ".load_state_dict: parameter ",
                            i, " has ", found, " of its ", buffer_names().size(), " buffers (all or none)");
    }
    for (const auto& [key, t] : state)
      qnum::detail::require(used.count(key) == 1, type_name(), ".load_state_dict: unexpected key '", key,
                            "' (expected <i>.step and <i>.<buffer> for the ", params_.size(), " parameters)");
    state_ = std::move(loaded);
  }

 protected:
  /// Per-parameter state: steps taken and one vector per buffer name (empty until first use).
  struct ParamState {
    std::int64_t step = 0;
    std::vector<std::vector<float>> buffers;
    std::vector<DeviceArray> device_buffers;  // a device parameter's buffers (host ones moved there on its first step)
  };

  /// The buffers of a device parameter p on its device: loaded host values uploaded, new
  /// ones zeroed.
  static void device_buffers(const Tensor& p, ParamState& s) {
    if (s.device_buffers.size() == s.buffers.size()) return;
    DeviceBackend& be = device_backend(p.device());
    const auto n = static_cast<std::size_t>(p.numel());
    s.device_buffers.clear();
    for (auto& host : s.buffers) {
      DeviceArray a(p.device(), n);
      if (host.size() == n && n > 0)
        be.copy_to_device(a.data(), host.data(), n * sizeof(float));
      else if (n > 0)
        be.fill(a.data(), 0.0f, n);
      host.clear();
      s.device_buffers.push_back(std::move(a));
    }
  }
  /// A parameter's device buffers read back into its host ones (it moved back to the cpu).
  static void host_buffers(ParamState& s) {
    for (std::size_t b = 0; b < s.device_buffers.size() && b < s.buffers.size(); ++b) {
      const DeviceArray& a = s.device_buffers[b];
      s.buffers[b].resize(a.size());
      if (!a.empty()) a.backend().copy_to_host(s.buffers[b].data(), a.data(), a.size() * sizeof(float));
    }
    s.device_buffers.clear();
  }
  /// update() for the parameters `indices` (each on a device, its step counted); optimizers
  /// without a device kernel say so.
  virtual void update_on_device(const std::vector<std::size_t>& indices) {
    qnum::detail::fail(type_name(), ": parameters on ", params_[indices.front()].device().str(),
                       " are not supported (Adam and AdamW are); move the model to the cpu");
  }
  Tensor& param(std::size_t i) { return params_[i]; }
  ParamState& param_state(std::size_t i) { return state_[i]; }

  Optimizer(std::vector<Tensor> params, double lr, const char* name) : params_(std::move(params)) {
    std::set<const void*> seen;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      qnum::detail::require(params_[i].defined(), name, ": parameter ", i, " is an undefined tensor");
      qnum::detail::require(seen.insert(params_[i].id()).second, name, ": parameter ", i,
                            " appears twice (it would be updated twice per step)");
    }
    qnum::detail::require(std::isfinite(lr) && lr >= 0.0, name, ": learning rate ", lr, " must be finite and >= 0");
    lr_ = lr;
    state_.resize(params_.size());
  }

  /// The names of the per-parameter buffers, in the order of ParamState::buffers.
  virtual std::vector<std::string> buffer_names() const = 0;
  /// Updates one parameter in place from its gradient; s.step already counts this step.
  virtual void update(std::span<float> p, std::span<const float> g, ParamState& s) = 0;

  static constexpr std::int64_t kMaxSavedStep = std::int64_t{1} << 24;

 private:
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_ = 0.0;
};

/// Options of SGD, torch.optim.SGD's defaults.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// Stochastic gradient descent in torch.optim.SGD's order: d = g + wd·p; with momentum,
/// buf = d on the first step, else momentum·buf + (1 - dampening)·d, then d = d + momentum·buf
/// (Nesterov) or d = buf; finally p -= lr·d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& opt) : Optimizer(std::move(params), opt.lr, "SGD"), opt_(opt) {
    qnum::detail::require(opt.momentum >= 0.0, "SGD: momentum ", opt.momentum, " must be >= 0");
    qnum::detail::require(opt.weight_decay >= 0.0, "SGD: weight_decay ", opt.weight_decay, " must be >= 0");
    qnum::detail::require(!opt.nesterov || (opt.momentum > 0.0 && opt.dampening == 0.0),
                          "SGD: nesterov needs momentum > 0 and dampening 0");
  }
  std::string type_name() const override { return "SGD"; }
  const SGDOptions& options() const { return opt_; }

 protected:
  std::vector<std::string> buffer_names() const override {
    return opt_.momentum != 0.0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }
  /// torch.optim's single-tensor SGD in float32, operation for operation as its CPU kernels
  /// round them (add with alpha is one FMA in its vector kernel; scalars rounded to float):
  ///   g = fma(p, wd, g) (weight decay);   buf = g on the first step, then
  ///   buf = fma(g, 1-dampening, buf·μ) (mul_, add_);   g = fma(buf, μ, g) (Nesterov) or buf;
  ///   p = fma(g, -lr, p) (add_). tests/nn/test_optim.cpp checks torch 2.15's bits.
  void update(std::span<float> p, std::span<const float> g, ParamState& s) override {
    const float neg_lr = static_cast<float>(-this->lr()), mu = static_cast<float>(opt_.momentum),
                wd = static_cast<float>(opt_.weight_decay), keep = static_cast<float>(1.0 - opt_.dampening);
    std::vector<float>* buf = opt_.momentum != 0.0 ? &s.buffers[0] : nullptr;
    const bool first = buf && buf->empty();
    if (first) buf->resize(p.size());
    float* b = buf ? buf->data() : nullptr;
    // In chunks that stay in L1; buf·μ, which torch rounds on its own, is stored first so that
    // FP contraction cannot fuse it into the FMA that adds the gradient.
    constexpr std::size_t kChunk = 256;
    for (std::size_t j0 = 0; j0 < p.size(); j0 += kChunk) {
      const std::size_t n = std::min(kChunk, p.size() - j0);
      if (b && !first)
        for (std::size_t j = j0; j < j0 + n; ++j) b[j] = b[j] * mu;
      for (std::size_t j = j0; j < j0 + n; ++j) {
        float d = wd != 0.0f ? std::fma(p[j], wd, g[j]) : g[j];
        if (b) {
          b[j] = first ? d : std::fma(d, keep, b[j]);
          d = opt_.nesterov ? std::fma(b[j], mu, d) : b[j];
        }
        p[j] = std::fma(d, neg_lr, p[j]);
      }
    }
  }

 private:
  SGDOptions opt_;
};

/// Options of Adam, torch.optim.Adam's defaults (weight decay is L2, added to the gradient).
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

/// Options of AdamW, torch.optim.AdamW's defaults (weight decay decoupled, 0.01).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

namespace detail {

/// Adam and AdamW share the moment updates; they differ only in where weight decay enters.
class AdamBase : public Optimizer {
 public:
  const AdamOptions& options() const { return opt_; }

 protected:
  AdamBase(std::vector<Tensor> params, const AdamOptions& opt, bool decoupled, const char* name)
      : Optimizer(std::move(params), opt.lr, name), opt_(opt), decoupled_(decoupled) {
    qnum::detail::require(opt.beta1 >= 0.0 && opt.beta1 < 1.0 && opt.beta2 >= 0.0 && opt.beta2 < 1.0, name, ": betas (",
                          opt.beta1, ", ", opt.beta2, ") must be in [0, 1)");
    qnum::detail::require(opt.eps >= 0.0, name, ": eps ", opt.eps, " must be >= 0");
    qnum::detail::require(opt.weight_decay >= 0.0, name, ": weight_decay ", opt.weight_decay, " must be >= 0");
  }
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

  /// torch.optim's single-tensor Adam in float32, operation for operation as its CPU kernels
  /// round them (fused multiply-adds where its vector kernels fuse; scalars rounded to float):
  ///   AdamW: p = p·(1-lr·wd) (mul_);   Adam: g = fma(p, wd, g) (add with alpha);
  ///   m = fma(1-β1, g - m, m) (lerp_);   v = fma((1-β2)·g, g, v·β2) (mul_, addcmul_);
  ///   p = p + (-lr/(1-β1^t))·m / (sqrt(v)/sqrt(1-β2^t) + eps) (sqrt, div, add_, addcdiv_).
  /// The only difference from PyTorch's bits: its CPU sqrt is MKL's (up to 0.75 ulp; 16-20%
  /// of values differ), this one is correctly rounded. (Checked against torch 2.15's
  /// kernels on 100k values per operation; tests/nn/test_optim.cpp pins the formula.)
  /// The parameters grouped by step count (all of them, unless some missed a gradient), each
  /// group in one adam_step_multi call: the same per-element arithmetic as update().
  void update_on_device(const std::vector<std::size_t>& indices) override {
    std::map<std::int64_t, std::vector<std::size_t>> by_step;
    for (std::size_t i : indices) {
      device_buffers(param(i), param_state(i));
      by_step[param_state(i).step].push_back(i);
    }
    const double lr = this->lr(), b1 = opt_.beta1, b2 = opt_.beta2, wd = opt_.weight_decay;
    for (const auto& [step, group] : by_step) {
      const double t = static_cast<double>(step);
      const DeviceBackend::AdamStep c{static_cast<float>(1.0 - b1),
                                      static_cast<float>(b2),
                                      static_cast<float>(1.0 - b2),
                                      static_cast<float>(decoupled_ ? 0.0 : wd),
                                      static_cast<float>(std::sqrt(1.0 - std::pow(b2, t))),
                                      static_cast<float>(opt_.eps),
                                      static_cast<float>(-(lr / (1.0 - std::pow(b1, t)))),
                                      decoupled_ && wd != 0.0 ? static_cast<float>(1.0 - lr * wd) : 1.0f};
      std::vector<float*> p, m, v;
      std::vector<const float*> g;
      std::vector<std::size_t> n;
      for (std::size_t i : group) {
        p.push_back(param(i).device_data());
        g.push_back(param(i).device_grad().data());
        m.push_back(param_state(i).device_buffers[0].data());
        v.push_back(param_state(i).device_buffers[1].data());
        n.push_back(static_cast<std::size_t>(param(i).numel()));
      }
      device_backend(param(group.front()).device())
          .adam_step_multi(c, p.data(), g.data(), m.data(), v.data(), n.data(), group.size());
    }
  }

  void update(std::span<float> p, std::span<const float> g, ParamState& s) override {
    const double lr = this->lr(), b1 = opt_.beta1, b2 = opt_.beta2, wd = opt_.weight_decay;
    auto& m = s.buffers[0];
    auto& v = s.buffers[1];
    if (m.empty()) m.assign(p.size(), 0.0f), v.assign(p.size(), 0.0f);
    const double t = static_cast<double>(s.step);
    const AdamScalars c{static_cast<float>(1.0 - b1),
                        static_cast<float>(b2),
                        static_cast<float>(1.0 - b2),
                        static_cast<float>(decoupled_ ? 0.0 : wd),
                        static_cast<float>(std::sqrt(1.0 - std::pow(b2, t))),
                        static_cast<float>(opt_.eps),
                        static_cast<float>(-(lr / (1.0 - std::pow(b1, t))))};
    const bool decay = decoupled_ && wd != 0.0;
    const float keep = static_cast<float>(1.0 - lr * wd);
    // In chunks that stay in L1. The products torch rounds on their own, p·(1-lr·wd) and
    // v·β2, are stored first: GCC's FP contraction would otherwise fuse them into the next
    // addition (v·β2 even into the addcmul's explicit FMA, leaving (1-β2)·g·g rounded).
    constexpr std::size_t kChunk = 256;
    float *pp = p.data(), *pv = v.data();
    const float b2f = c.b2;
    for (std::size_t j0 = 0; j0 < p.size(); j0 += kChunk) {
      const std::size_t n = std::min(kChunk, p.size() - j0);
      if (decay)
        for (std::size_t k = 0; k < n; ++k) pp[j0 + k] = pp[j0 + k] * keep;
      for (std::size_t k = 0; k < n; ++k) pv[j0 + k] = pv[j0 + k] * b2f;
      adam_moments_and_step(c, wd != 0.0 && !decoupled_, pp + j0, g.data() + j0, m.data() + j0, pv + j0, n);
    }
  }

 private:
  /// The per-step constants, rounded to float as torch rounds Python scalars.
  struct AdamScalars {
    float w1, b2, w2, wd, bc2_sqrt, eps, neg_step;
  };

  /// The moments and the parameter step over n elements (see update(); v already holds v·β2,
  /// and p the decayed p). The same operations on SIMD lanes and on the scalar tail; without
  /// hardware FMA (FP_FAST_FMAF undefined), scalar std::fma throughout.
  static void adam_moments_and_step(const AdamScalars& c, bool l2, float* p, const float* g, float* m, float* v,
                                    std::size_t n) {
    std::size_t j = 0;
#if defined(FP_FAST_FMAF)
    using B = qnum::detail::FloatBatch;
    using qnum::detail::fmadd;
    for (; j + B::size <= n; j += B::size) {
      B gj = B::load_unaligned(g + j);
      const B pj = B::load_unaligned(p + j);
      if (l2) gj = fmadd(pj, B(c.wd), gj);
      const B mj = fmadd(B(c.w1), gj - B::load_unaligned(m + j), B::load_unaligned(m + j));
      const B vj = fmadd(B(c.w2) * gj, gj, B::load_unaligned(v + j));  // v holds v·β2
      const B denom = xsimd::sqrt(vj) / B(c.bc2_sqrt) + B(c.eps);
      mj.store_unaligned(m + j);
      vj.store_unaligned(v + j);
      (pj + (B(c.neg_step) * mj) / denom).store_unaligned(p + j);
    }
#endif
    for (; j < n; ++j) {
      float gj = g[j];
      if (l2) gj = std::fma(p[j], c.wd, gj);
      m[j] = std::fma(c.w1, gj - m[j], m[j]);
      v[j] = std::fma(c.w2 * gj, gj, v[j]);
      const float denom = std::sqrt(v[j]) / c.bc2_sqrt + c.eps;
      p[j] = p[j] + (c.neg_step * m[j]) / denom;
    }
  }

  AdamOptions opt_;
  bool decoupled_;
};

}  // namespace detail

/// Adam with L2 weight decay and bias correction (torch.optim.Adam, amsgrad off).
class Adam : public detail::AdamBase {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& opt) : AdamBase(std::move(params), opt, false, "Adam") {}
  std::string type_name() const override { return "Adam"; }
};

/// Adam with decoupled weight decay (torch.optim.AdamW): p *= 1 - lr·wd before the Adam step.
class AdamW : public detail::AdamBase {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& opt)
      : AdamBase(std::move(params), AdamOptions{opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay}, true,
                 "AdamW") {}
  std::string type_name() const override { return "AdamW"; }
};

}  // namespace qnum::nn
