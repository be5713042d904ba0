// An Embedding whose table is held packed as mase-cuda MXINT8 (format/mx_packed.hpp: int8
// mantissas, one scale byte per group of 32 along embedding_dim; 8.25 bits per value), with
// only the rows a lookup reads dequantized — so a packed BERT's word table (a fifth of
// BERT-base's weight bytes) shrinks as its Linears do. Values: the bf16 the packed bytes
// decode to, exact in float32, the same on the CPU and a device. Inference only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/nn/packed_mxint8.hpp"
#include "qnum/tensor/device.hpp"
#include "qnum/tensor/device_ops.hpp"

namespace qnum::nn {

class MXInt8PackedEmbedding : public Embedding {
 public:
  static constexpr int kGroup = 32;

  /// Packs `e`'s table for `device` on the host (quantize_mxint8_mase_cuda), so a GPU receives
  /// only the packed bytes. qnum::Error when embedding_dim is not a multiple of 32.
  MXInt8PackedEmbedding(const Embedding& e, const Device& device)
      : Embedding(e.num_embeddings, e.embedding_dim, NoWeight{}), device_(device), packed_(checked_table(e), device) {}
  /// From packed bytes on the host (a packed checkpoint): `q` the [num, dim] table's mantissas
  /// and scales.
  MXInt8PackedEmbedding(std::int64_t num, std::int64_t dim, MXInt8MaseCuda q)
      : Embedding(num, dim, NoWeight{}), device_(Device::cpu()), packed_(checked_bytes(num, dim, std::move(q))) {}
  std::string type_name() const override { return "MXInt8PackedEmbedding"; }
  /// The packed table (host storage only: empty on a device).
  const PackedMXInt8& packed() const { return packed_; }
  bool dense() const override { return false; }

  Tensor forward_indices(std::span<const std::int64_t> indices, const Shape& index_shape) override {
    qnum::detail::check_embedding_indices(indices, index_shape, num_embeddings);
    Shape shape = index_shape;
    shape.push_back(embedding_dim);
    const auto n = static_cast<std::int64_t>(indices.size());
    if (device_.is_cpu()) {
      FloatBuffer y(static_cast<std::size_t>(n * embedding_dim));
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t k = 0; k < embedding_dim; ++k) {
          const auto j = static_cast<std::size_t>(indices[static_cast<std::size_t>(i)] * embedding_dim + k);
          y[static_cast<std::size_t>(i * embedding_dim + k)] = packed_.value(j);
        }
      return Tensor(std::move(shape), std::move(y));
    }
    Tensor y = Tensor::empty(shape, device_);
    const auto idx = device_ops::detail::upload(device_, indices);
    if (n > 0)
      device_backend(device_).mxint8_embedding(idx.data(), n, packed_.device_mantissa(), packed_.device_scale(),
                                               embedding_dim, y.device_data());
    return y;
  }

  /// Bytes of the packed table: V·C mantissas + V·C/32 scale bytes.
  std::size_t packed_bytes() const {
    const auto n = static_cast<std::size_t>(num_embeddings * embedding_dim);
    return n + n / kGroup;
  }
  const Device& device() const { return device_; }

 private:
  static PackedMXInt8 checked_bytes(std::int64_t num, std::int64_t dim, MXInt8MaseCuda q) {
    qnum::detail::require(dim % kGroup == 0, "MXInt8PackedEmbedding: embedding_dim ", dim, " is not a multiple of ",
                          kGroup);
    qnum::detail::require(static_cast<std::int64_t>(q.mantissa.size()) == num * dim, "MXInt8PackedEmbedding: ",
                          q.mantissa.size(), " mantissas for a table of ", num, " x ", dim);
    return PackedMXInt8(std::move(q), Device::cpu());
  }
  static std::vector<float> checked_table(const Embedding& e) {
    qnum::detail::require(e.embedding_dim % kGroup == 0, "MXInt8PackedEmbedding: embedding_dim ", e.embedding_dim,
                          " is not a multiple of ", kGroup);
    qnum::detail::require(e.dense() && e.weight.defined(), "MXInt8PackedEmbedding: the embedding is already packed");
    return e.weight.to_vector();
  }

  Device device_;
  PackedMXInt8 packed_;
};

}  // namespace qnum::nn
