// Tensor: a handle to float32, contiguous, C-order storage with a shape (rank 0 to 4), an
// optional gradient and the autograd node that produced it (autograd.hpp). Its values live on
// the CPU or on a device (tensor/device.hpp): ops run where their inputs are, and moving
// values between devices is always explicit (to(), Module::to).
//
// Copies of a Tensor share everything (like torch.Tensor); `clone()` copies the values.
// `reshape`-style views share the storage, so an optimizer step that updates a parameter
// in place is seen by every view. Kept small on purpose: float32 only, always contiguous;
// it exists to train the models of the MASE labs, not to be a general framework.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/tensor/device.hpp"

namespace qnum {

inline constexpr std::size_t kMaxTensorRank = 4;

namespace detail {
/// std::allocator whose value-less construct default-initialises: a vector of n floats is
/// allocated without writing zeros. Tensor ops fill every value they allocate, and zero
/// filling the results and gradients (hundreds of MB per BERT training step) cost ~10% of
/// the step.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT: rebinding copy
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace detail

/// The values of a tensor or gradient: `FloatBuffer v(n)` holds n *unset* floats (write
/// them all); `FloatBuffer v(n, 0.0f)` zeros, as std::vector.
using FloatBuffer = std::vector<float, detail::DefaultInitAllocator<float>>;

namespace autograd {
struct Node;
}

namespace detail {

/// The shared state behind a Tensor handle.
struct TensorImpl {
  Shape shape;
  std::shared_ptr<FloatBuffer> storage;  // numel(shape) values (views share it); null on a device
  FloatBuffer grad;                      // empty until a gradient arrives
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves and for results without grad
  Device device{};                          // where the values are
  DeviceArray dstorage;                     // the values on a device (views share it)
  DeviceArray dgrad;                        // the gradient on a device (empty until one arrives)

  std::span<float> values() { return {storage->data(), storage->size()}; }
  std::span<const float> values() const { return {storage->data(), storage->size()}; }
};

inline void check_tensor_shape(const Shape& shape) {
  // `if (!...) fail` rather than require(): the message (to_string) is built only on failure;
  // tensors are made several times per op, so eager formatting cost real time in training.
  if (shape.size() > kMaxTensorRank)
    fail("Tensor: rank ", shape.size(), " of shape ", to_string(shape), " is above the supported ", kMaxTensorRank);
  for (auto d : shape)
    if (d < 0) fail("Tensor: negative dimension in shape ", to_string(shape));
}

[[noreturn]] inline void fail_on_device(const char* what, const Device& d) {
  fail("Tensor::", what, ": the tensor is on ", d.str(), "; copy it to the host first with to(Device::cpu())");
}

}  // namespace detail

class Tensor {
 public:
  /// An undefined tensor (`defined()` is false); most operations reject it.
  Tensor() = default;

  /// A tensor of `shape` holding `values` (numel(shape) of them, C order).
  Tensor(Shape shape, FloatBuffer values, bool requires_grad = false) {
    detail::check_tensor_shape(shape);
    if (static_cast<std::int64_t>(values.size()) != qnum::numel(shape))
      detail::fail("Tensor: ", values.size(), " values for shape ", to_string(shape), " (", qnum::numel(shape),
                   " elements)");
    impl_ = std::make_shared<detail::TensorImpl>();
    impl_->shape = std::move(shape);
    impl_->storage = std::make_shared<FloatBuffer>(std::move(values));
    impl_->requires_grad = requires_grad;
  }
  /// The same from a std::vector (copied into the tensor's buffer).
  Tensor(Shape shape, const std::vector<float>& values, bool requires_grad = false)
      : Tensor(std::move(shape), FloatBuffer(values.begin(), values.end()), requires_grad) {}
  /// The same from a braced list of values.
  Tensor(Shape shape, std::initializer_list<float> values, bool requires_grad = false)
      : Tensor(std::move(shape), FloatBuffer(values), requires_grad) {}

  static Tensor full(Shape shape, float value, bool requires_grad = false) {
    detail::check_tensor_shape(shape);
    const auto n = static_cast<std::size_t>(qnum::numel(shape));
    return Tensor(std::move(shape), FloatBuffer(n, value), requires_grad);
  }
  static Tensor zeros(Shape shape, bool requires_grad = false) { return full(std::move(shape), 0.0f, requires_grad); }
  static Tensor ones(Shape shape, bool requires_grad = false) { return full(std::move(shape), 1.0f, requires_grad); }
  /// A rank-0 tensor.
  static Tensor scalar(float value, bool requires_grad = false) { return Tensor({}, {value}, requires_grad); }
  /// Normal(mean, std) values from a counter-based generator keyed by (seed, index): the same
  /// seed gives the same tensor on every machine and thread count.
  static Tensor randn(Shape shape, std::uint64_t seed, float mean = 0.0f, float std = 1.0f,
                      bool requires_grad = false) {
    detail::check_tensor_shape(shape);
    FloatBuffer v(static_cast<std::size_t>(qnum::numel(shape)));
    const CounterRng rng(seed);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = mean + std * rng.normal(i);
    return Tensor(std::move(shape), std::move(v), requires_grad);
  }
  /// Uniform [lo, hi) values keyed by (seed, index).
  static Tensor uniform(Shape shape, std::uint64_t seed, float lo, float hi, bool requires_grad = false) {
    detail::check_tensor_shape(shape);
    FloatBuffer v(static_cast<std::size_t>(qnum::numel(shape)));
    const CounterRng rng(seed);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = lo + (hi - lo) * rng.uniform(i);
    return Tensor(std::move(shape), std::move(v), requires_grad);
  }

  /// A tensor of `shape` with unset values on `device` (write them all).
  static Tensor empty(Shape shape, const Device& device) {
    detail::check_tensor_shape(shape);
    const auto n = static_cast<std::size_t>(qnum::numel(shape));
    if (device.is_cpu()) return Tensor(std::move(shape), FloatBuffer(n));
    return from_device(std::move(shape), DeviceArray(device, n));
  }
  /// A tensor of `shape` whose values are `values` on their device (numel(shape) of them).
  static Tensor from_device(Shape shape, DeviceArray values, bool requires_grad = false) {
    detail::check_tensor_shape(shape);
    if (static_cast<std::int64_t>(values.size()) != qnum::numel(shape))
      detail::fail("Tensor: ", values.size(), " device values for shape ", to_string(shape));
    Tensor t;
    t.impl_ = std::make_shared<detail::TensorImpl>();
    t.impl_->shape = std::move(shape);
    t.impl_->device = values.device();
    t.impl_->dstorage = std::move(values);
    t.impl_->requires_grad = requires_grad;
    return t;
  }

  bool defined() const { return impl_ != nullptr; }
  const Device& device() const { return impl().device; }
  bool is_cuda() const { return impl().device.is_cuda(); }
  /// The values on `device`: this tensor when already there, else a copy (a new leaf; no
  /// gradient flows back through the copy).
  Tensor to(const Device& device) const {
    if (device == this->device()) return *this;
    const auto n = static_cast<std::size_t>(numel());
    if (device.is_cpu()) {
      FloatBuffer v(n);
      if (n > 0) impl().dstorage.backend().copy_to_host(v.data(), impl().dstorage.data(), n * sizeof(float));
      return Tensor(shape(), std::move(v));
    }
    DeviceArray d(device, n);
    if (this->device().is_cpu()) {
      if (n > 0) d.backend().copy_to_device(d.data(), impl().storage->data(), n * sizeof(float));
    } else {
      detail::fail("Tensor::to: copies between two devices (", this->device().str(), " -> ", device.str(),
                   ") are not supported; go through the host");
    }
    return from_device(shape(), std::move(d));
  }
  /// Moves this tensor's values to `device` in place (Module::to): every handle to it sees
  /// the move; views made earlier keep the old storage. Drops the gradient.
  void move_to_(const Device& device) {
    if (device == this->device()) return;
    Tensor moved = to(device);
    detail::TensorImpl& t = impl();
    t.storage = moved.impl().storage;
    t.dstorage = moved.impl().dstorage;
    t.device = device;
    t.grad.clear();
    t.dgrad = DeviceArray();
  }
  /// The device pointer to the values (an error on a CPU tensor).
  float* device_data() const {
    if (!is_cuda()) detail::fail("Tensor::device_data: the tensor is on the cpu");
    return impl().dstorage.data();
  }
  const DeviceArray& device_array() const {
    if (!is_cuda()) detail::fail("Tensor::device_array: the tensor is on the cpu");
    return impl().dstorage;
  }
  const Shape& shape() const { return impl().shape; }
  std::size_t rank() const { return shape().size(); }
  /// Size of dimension d; negative d counts from the end.
  std::int64_t size(int d) const {
    const int r = static_cast<int>(rank());
    if (d < -r || d >= r) detail::fail("Tensor::size: dimension ", d, " out of range for shape ", to_string(shape()));
    return shape()[static_cast<std::size_t>(d < 0 ? d + r : d)];
  }
  std::int64_t numel() const { return qnum::numel(shape()); }

  std::span<float> values() { return host().values(); }
  std::span<const float> values() const { return host().values(); }
  float* data() { return host().storage->data(); }
  const float* data() const { return host().storage->data(); }
  /// The values as a host vector (copied from the device for a device tensor).
  std::vector<float> to_vector() const {
    if (is_cuda()) return to(Device::cpu()).to_vector();
    return {values().begin(), values().end()};
  }
  /// The single value of a one-element tensor (read back from the device for a device tensor).
  float item() const {
    if (numel() != 1)
      detail::fail("Tensor::item: tensor of shape ", to_string(shape()), " has ", numel(), " elements, not 1");
    if (is_cuda()) {
      float v = 0.0f;
      impl().dstorage.backend().copy_to_host(&v, impl().dstorage.data(), sizeof(float));
      return v;
    }
    return values()[0];
  }

  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as a parameter to differentiate (or not).
  Tensor& set_requires_grad(bool on) {
    detail::require(!impl().grad_fn || on, "Tensor::set_requires_grad(false) on a non-leaf; use detach()");
    impl().requires_grad = on;
    return *this;
  }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  /// The accumulated gradient (empty span until backward reached this tensor); host tensors.
  std::span<const float> grad() const { return host().grad; }
  std::span<float> grad_mut() { return host().grad; }
  bool has_grad() const { return !impl().grad.empty() || !impl().dgrad.empty(); }
  /// The gradient as a tensor on this tensor's device (zeros when none has arrived), detached.
  Tensor grad_tensor() const {
    if (is_cuda()) {
      if (!impl().dgrad.empty()) return from_device(shape(), impl().dgrad);
      Tensor z = empty(shape(), device());
      if (numel() > 0) impl().dstorage.backend().fill(z.device_data(), 0.0f, static_cast<std::size_t>(numel()));
      return z;
    }
    return has_grad() ? Tensor(shape(), impl().grad) : Tensor::zeros(shape());
  }
  /// The device gradient (empty until one arrived); device tensors.
  const DeviceArray& device_grad() const { return impl().dgrad; }
  void zero_grad() {
    impl().grad.clear();
    impl().dgrad = DeviceArray();
  }

  /// A new leaf sharing the values, cut from the tape.
  Tensor detach() const {
    Tensor t;
    t.impl_ = std::make_shared<detail::TensorImpl>();
    t.impl_->shape = shape();
    t.impl_->storage = impl().storage;
    t.impl_->device = impl().device;
    t.impl_->dstorage = impl().dstorage;
    return t;
  }
  /// A new leaf with its own copy of the values, on the same device.
  Tensor clone() const {
    if (is_cuda()) {
      Tensor c = empty(shape(), device());
      if (numel() > 0)
        impl().dstorage.backend().copy_on_device(c.device_data(), device_data(),
                                                 static_cast<std::size_t>(numel()) * sizeof(float));
      return c;
    }
    return Tensor(shape(), FloatBuffer(values().begin(), values().end()));
  }

  /// Backpropagates from this tensor: a one-element tensor gets d(self)/d(self) = 1; any
  /// other shape needs `grad_output` of the same shape. Gradients accumulate into every leaf
  /// that requires them (zero them between steps); the tape behind this tensor is released.
  void backward(const Tensor& grad_output = Tensor()) const;

  /// Identity of the underlying state (two handles to one tensor compare equal).
  const detail::TensorImpl* id() const { return impl_.get(); }
  std::shared_ptr<detail::TensorImpl> impl_ptr() const { return impl_; }
  static Tensor from_impl(std::shared_ptr<detail::TensorImpl> p) {
    Tensor t;
    t.impl_ = std::move(p);
    return t;
  }

 private:
  detail::TensorImpl& impl() const {
    detail::require(impl_ != nullptr, "Tensor: operation on an undefined tensor");
    return *impl_;
  }
  /// impl() of a host tensor: host values of a device tensor are a clear error, not a null read.
  detail::TensorImpl& host() const {
    detail::TensorImpl& t = impl();
    if (t.device.is_cuda()) detail::fail_on_device("values", t.device);
    return t;
  }
  std::shared_ptr<detail::TensorImpl> impl_;
};

}  // namespace qnum
