// A Linear whose weight is held packed as mase-cuda MXINT8 (format/mx_packed.hpp: int8
// mantissas, one scale byte per group of 32 along in_features; 8.25 bits per weight) and
// dequantized on the fly by every forward: lab 4's "MXINT8 weights, dequantized on load".
//
// On a CUDA device the packed bytes live in device memory and forward is one
// DeviceBackend::mxint8_linear call (W dequantized to a transient bf16 workspace, x rounded to
// bf16, one bf16 GEMM with fp32 accumulation). On the CPU the same arithmetic runs on the
// host's bf16 GEMM (kernel/gemm/bf16.hpp: AMX-BF16 tiles, vdpbf16ps, or its emulation): W
// dequantized to a transient buffer of bf16 values, x rounded to bf16 by the GEMM; the
// products of two bf16 values are exact in fp32, so the two differ only in the order of the
// sums (and the CPU unit reads subnormal bf16 operands as zero).
//
// The bias stays float32 (a buffer: Module::to moves it with the model). Inference only:
// nothing here has a gradient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/gemm.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/nn/packed_mxint8.hpp"
#include "qnum/tensor/device.hpp"
#include "qnum/tensor/ops.hpp"

namespace qnum::nn {

class MXInt8PackedLinear : public Module {
 public:
  static constexpr int kGroup = 32;  ///< mase-cuda's group size along in_features

  /// Packs `lin`'s weight for `device` with the CPU reference quantize_mxint8_mase_cuda (the
  /// device kernel is proven bit-identical to it), so a CUDA target receives only the packed
  /// bytes, never the fp32 weight. The bias is copied (float32). qnum::Error when in_features
  /// is not a multiple of 32, or the Linear carries what packing would drop (quantizers,
  /// pruning mask, LoRA adapter, input transform).
  MXInt8PackedLinear(const Linear& lin, const Device& device)
      : in_features(lin.in_features), out_features(lin.out_features), device_(device),
        packed_(checked_weight(lin), device) {
    if (lin.bias.defined()) bias = register_buffer("bias", to_device(Tensor(lin.bias.shape(), host_values(lin.bias))));
  }

  /// From packed bytes on the host (a packed checkpoint): `q` the [out, in] weight's mantissas
  /// and scales, `bias` [out] or undefined.
  MXInt8PackedLinear(std::int64_t in, std::int64_t out, MXInt8MaseCuda q, const Tensor& bias)
      : in_features(in), out_features(out), device_(Device::cpu()), packed_(checked_bytes(in, out, std::move(q))) {
    qnum::detail::require(!bias.defined() || bias.shape() == Shape{out}, "MXInt8PackedLinear: bias shape ",
                          bias.defined() ? qnum::to_string(bias.shape()) : "", " is not [", out, "]");
    if (bias.defined()) this->bias = register_buffer("bias", Tensor(bias.shape(), host_values(bias)));
  }

  std::string type_name() const override { return "MXInt8PackedLinear"; }
  /// The packed weight (host storage only: empty on a device).
  const PackedMXInt8& packed() const { return packed_; }
  std::string op_name() const override { return "linear"; }

  /// y[..., out] = x[..., in]·Wᵀ + bias, W dequantized from the packed bytes (file comment).
  Tensor forward(const Tensor& x) override {
    qnum::detail::require(x.rank() >= 1 && x.shape().back() == in_features, "MXInt8PackedLinear: input ",
                          qnum::to_string(x.shape()), " does not end in in_features ", in_features);
    return device_.is_cpu() ? forward_cpu(x) : forward_device(x);
  }

  /// Bytes of the packed weight: out·in mantissas + out·in/32 scale bytes.
  std::size_t packed_bytes() const {
    const auto n = static_cast<std::size_t>(in_features * out_features);
    return n + n / kGroup;
  }
  /// Bytes of the float32 bias (0 without one).
  std::size_t bias_bytes() const { return bias.defined() ? static_cast<std::size_t>(bias.numel()) * 4 : 0; }
  const Device& device() const { return device_; }

  std::int64_t in_features, out_features;
  Tensor bias;  ///< float32, undefined when the Linear had none

 private:
  /// The weight's values, once the Linear is checked packable (the file comment's errors).
  static std::vector<float> checked_weight(const Linear& lin) {
    using qnum::detail::require;
    require(lin.in_features % kGroup == 0, "MXInt8PackedLinear: in_features ", lin.in_features,
            " is not a multiple of ", kGroup, " (mase-cuda groups run along in_features)");
    require(!lin.is_quantized() && !lin.weight_mask.defined() && !lin.lora_A && !lin.input_transform,
            "MXInt8PackedLinear: the Linear is quantized, pruned or has an adapter or input transform; "
            "packing keeps only its weight and bias");
    const Tensor& w = lin.weight;
    require(w.defined() && w.shape() == Shape{lin.out_features, lin.in_features}, "MXInt8PackedLinear: weight shape ",
            w.defined() ? qnum::to_string(w.shape()) : "(undefined)", " is not [", lin.out_features, ", ", lin.in_features,
            "]");
    return host_values(w);
  }
  static PackedMXInt8 checked_bytes(std::int64_t in, std::int64_t out, MXInt8MaseCuda q) {
    qnum::detail::require(in > 0 && out > 0 && in % kGroup == 0, "MXInt8PackedLinear: sizes ", out, " x ", in,
                          " must be positive with in_features a multiple of ", kGroup);
    qnum::detail::require(static_cast<std::int64_t>(q.mantissa.size()) == in * out, "MXInt8PackedLinear: ",
                          q.mantissa.size(), " mantissas for a weight of ", out, " x ", in);
    return PackedMXInt8(std::move(q), Device::cpu());
  }
  static std::vector<float> host_values(const Tensor& t) {
    if (t.is_cuda()) {
      const Tensor h = t.to(Device::cpu());
      return {h.values().begin(), h.values().end()};
    }
    return {t.values().begin(), t.values().end()};
  }
  Tensor to_device(Tensor t) const { return device_.is_cpu() ? t : t.to(device_); }

  Tensor forward_cpu(const Tensor& x) const {
    qnum::detail::require(!x.is_cuda(), "MXInt8PackedLinear: the weight is on the cpu but the input on ",
                          x.device().str(), " (copy one of them with to())");
    thread_local FloatBuffer w;  // the transient dequantized weight (the device's workspace), reused
    w.resize(packed_.size());
    packed_.dequantize_to(w.data());
    Shape shape = x.shape();
    shape.back() = out_features;
    const std::int64_t rows = x.numel() / in_features;
    FloatBuffer y(static_cast<std::size_t>(rows * out_features));
    if (rows > 0) {  // the bf16 GEMM rounds x to bf16; W's values are bf16 already (exact)
      if (bias.defined())
        gemm_bf16_nt_bias(x.data(), w.data(), bias.data(), y.data(), rows, out_features, in_features);
      else
        gemm_bf16_nt(x.data(), w.data(), y.data(), rows, out_features, in_features);
    }
    return Tensor(std::move(shape), std::move(y));
  }

  Tensor forward_device(const Tensor& x) const {
    qnum::detail::require(x.device() == device_, "MXInt8PackedLinear: the weight is on ", device_.str(),
                          " but the input on ", x.device().str(), " (copy one of them with to())");
    Shape shape = x.shape();
    shape.back() = out_features;
    Tensor y = Tensor::empty(shape, device_);
    const std::int64_t rows = x.numel() / in_features;
    if (rows > 0)
      device_backend(device_).mxint8_linear(x.device_data(), packed_.device_mantissa(), packed_.device_scale(),
                                            bias.defined() ? bias.device_data() : nullptr, rows, out_features,
                                            in_features, y.device_data());
    return y;
  }

  Device device_;
  PackedMXInt8 packed_;
};

}  // namespace qnum::nn
