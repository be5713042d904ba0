// Values packed as mase-cuda MXINT8 (format/mx_packed.hpp: int8 mantissas, one scale byte per
// group of 32), held on the host or on a device: the storage behind the packed Linear and
// Embedding of lab 4. Packing runs on the host with the CPU reference (the device kernel is
// proven bit-identical to it), so a device receives only the packed bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/tensor/device.hpp"

namespace qnum::nn {

class PackedMXInt8 {
 public:
  static constexpr int kGroup = 32;

  PackedMXInt8(std::span<const float> values, const Device& device)
      : PackedMXInt8(quantize_mxint8_mase_cuda(values, kGroup), device) {}

  /// From packed bytes (a packed checkpoint): q.scale holds one byte per group of 32 mantissas.
  PackedMXInt8(MXInt8MaseCuda q, const Device& device) : device_(device) {
    qnum::detail::require(q.group_size == kGroup && q.mantissa.size() % kGroup == 0 &&
                              q.scale.size() == q.mantissa.size() / kGroup,
                          "PackedMXInt8: ", q.mantissa.size(), " mantissas and ", q.scale.size(),
                          " scales are not groups of ", kGroup);
    if (device_.is_cpu()) {
      mantissa_ = std::move(q.mantissa);
      scale_ = std::move(q.scale);
      return;
    }
    DeviceBackend& b = device_backend(device_);
    d_mantissa_ = DeviceBytes<std::int8_t>(device_, q.mantissa.size());
    d_scale_ = DeviceBytes<std::uint8_t>(device_, q.scale.size());
    b.copy_to_device(d_mantissa_.data(), q.mantissa.data(), q.mantissa.size());
    b.copy_to_device(d_scale_.data(), q.scale.data(), q.scale.size());
  }

  const Device& device() const { return device_; }
  /// The value i decodes to (host storage): a bf16, exact in float32.
  float value(std::size_t i) const {
    return qnum::detail::mx_bf16_bits_to_float(
        dequantize_mxint8_to_bf16_bits(mantissa_[i], scale_[i / static_cast<std::size_t>(kGroup)]));
  }
  /// Every value (host storage) into out[0, size()), as value(i) gives them: through a table
  /// of all (scale, mantissa) pairs built once from dequantize_mxint8_to_bf16_bits.
  void dequantize_to(float* out) const {
    static const std::vector<float> table = [] {
      std::vector<float> t(256 * 256);
      for (int sc = 0; sc < 256; ++sc)
        for (int m = 0; m < 256; ++m)
          t[static_cast<std::size_t>(sc * 256 + m)] = qnum::detail::mx_bf16_bits_to_float(dequantize_mxint8_to_bf16_bits(
              static_cast<std::int8_t>(static_cast<std::uint8_t>(m)), static_cast<std::uint8_t>(sc)));
      return t;
    }();
    const std::int8_t* m = mantissa_.data();
    const std::uint8_t* sc = scale_.data();
    const float* tab = table.data();
    const auto groups = static_cast<std::int64_t>(mantissa_.size() / kGroup);
    parallel_for(groups, 1024, [=](std::int64_t b, std::int64_t e) {
      for (std::int64_t g = b; g < e; ++g) {
        const float* row = tab + static_cast<std::size_t>(sc[g]) * 256;
        for (std::int64_t i = g * kGroup; i < (g + 1) * kGroup; ++i) out[i] = row[static_cast<std::uint8_t>(m[i])];
      }
    });
  }
  /// The packed bytes (host storage): what a packed checkpoint stores.
  const std::vector<std::int8_t>& host_mantissa() const { return mantissa_; }
  const std::vector<std::uint8_t>& host_scale() const { return scale_; }
  /// Device pointers (device storage).
  const std::int8_t* device_mantissa() const { return d_mantissa_.data(); }
  const std::uint8_t* device_scale() const { return d_scale_.data(); }
  std::size_t size() const { return device_.is_cpu() ? mantissa_.size() : d_mantissa_.size(); }

 private:
  Device device_;
  std::vector<std::int8_t> mantissa_;  // cpu
  std::vector<std::uint8_t> scale_;
  DeviceBytes<std::int8_t> d_mantissa_;  // cuda
  DeviceBytes<std::uint8_t> d_scale_;
};

}  // namespace qnum::nn
