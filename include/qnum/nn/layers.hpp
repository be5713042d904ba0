// The standard layers as nn::Modules over the tensor ops: Linear, Embedding, LayerNorm,
// BatchNorm1d, ReLU, GELU, Tanh, Softmax, Matmul, Dropout, Identity and Sequential; QuantLinear
// (a Linear built with a QuantConfig, nn/quant.hpp).
//
// Parameter and buffer names, shapes and initialisations are PyTorch's, so state_dicts map
// onto torch.nn checkpoints key for key. Every random initialisation and every dropout mask
// comes from a seed (CounterRng), so a model built and trained with the same seeds gives
// the same bits on every machine.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "qnum/nn/module.hpp"
#include "qnum/nn/quant.hpp"
#include "qnum/tensor/ops.hpp"

namespace qnum::nn {

namespace detail {

/// An independent seed for sub-stream `stream` of `seed` (splitmix64 finaliser), so the
/// weight and bias of a layer, or successive dropout calls, never share random draws.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline void require_positive(std::int64_t v, const char* layer, const char* what) {
  qnum::detail::require(v > 0, layer, ": ", what, " must be > 0, got ", v);
}

}  // namespace detail

/// y = x·Wᵀ + b with weight [out, in] and bias [out] (torch.nn.Linear). Initialisation as
/// PyTorch's: kaiming_uniform(a = sqrt 5) for the weight, which is U(-1/sqrt(in), 1/sqrt(in)),
/// and the same range for the bias; the weight uses `seed`, the bias a seed derived from it.
///
/// The passes extend a Linear in place (names and handles stay valid):
/// - quantization (Quantizable): operands data_in, weight, bias, data_out — MASE's
///   LinearInteger, LinearMinifloatIEEE, ... are a Linear with that config (QuantLinear);
/// - pruning: a `weight_mask` buffer (the weight used is weight ⊙ mask, so pruned entries
///   get no gradient) and an `input_transform` (activation pruning, before data_in);
/// - LoRA: children lora_A [r, in] and lora_B [out, r] adding scaling·B·A·dropout(x).
class Linear : public Module, public Quantizable {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, std::uint64_t seed = 0)
      : in_features(in_features), out_features(out_features) {
    detail::require_positive(in_features, "Linear", "in_features");
    detail::require_positive(out_features, "Linear", "out_features");
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_features)));
    weight = register_parameter("weight", Tensor::uniform({out_features, in_features}, seed, -bound, bound));
    if (bias)
      this->bias =
          register_parameter("bias", Tensor::uniform({out_features}, detail::derive_seed(seed, 0), -bound, bound));
  }
  std::string type_name() const override { return is_quantized() ? "QuantLinear" : "Linear"; }
  std::string op_name() const override { return "linear"; }
  std::vector<std::string> quant_operands() const override { return {"data_in", "weight", "bias", "data_out"}; }

  Tensor forward(const Tensor& x) override {
    const Tensor xin = input_transform ? input_transform->apply(x, is_training()) : x;
    const auto& q = quant();
    const Tensor xq = quantize_in(xin), wq = forward_weight(), bq = forward_bias();
    const int xf = fixed8_frac(q.data_in), wf = fixed8_frac(q.weight);
    // Input and weight on 8-bit fixed-point grids: the product on the int8 GEMM, same bits.
    // (The int8 GEMM is a CPU kernel: on a device the fake-quantized operands go through linear.)
    Tensor y = xf != kNotFixed8 && wf != kNotFixed8 && !xq.is_cuda() ? linear_fixed8(xq, xf, wq, wf, bq)
                                                                      : linear(xq, wq, bq);
    if (lora_A) {
      Tensor a = lora_dropout ? (*lora_dropout)(xin) : xin;
      y = add(y, mul_scalar((*lora_B)((*lora_A)(a)), lora_scaling));
    }
    return quantize_out(y);
  }

  /// frac_width of a signed fixed-point format of at most 8 bits, else kNotFixed8.
  static constexpr int kNotFixed8 = std::numeric_limits<int>::min();
  static int fixed8_frac(const std::optional<Format>& f) {
    const auto* fx = f ? std::get_if<FixedSpec>(&f->spec) : nullptr;
    return fx && fx->is_signed && fx->width <= 8 ? fx->frac_width : kNotFixed8;
  }

  /// weight ⊙ weight_mask when pruned, else weight (differentiable in weight).
  Tensor effective_weight() const { return weight_mask.defined() ? mul(weight, weight_mask) : weight; }

  /// The weight and bias the forward multiplies by: weight ⊙ mask, then each fake-quantized
  /// by its format (what an export writes as the layer's values).
  Tensor forward_weight() const { return maybe_quantize(effective_weight(), quant().weight, Role::weight); }
  Tensor forward_bias() const { return maybe_quantize(bias, quant().bias, Role::bias); }

  /// Registers (first call) or replaces the values of the weight mask: 1 keeps, 0 prunes.
  void set_weight_mask(const std::vector<float>& mask) {
    qnum::detail::require(static_cast<std::int64_t>(mask.size()) == weight.numel(), "Linear: weight mask of ",
                          mask.size(), " values for a weight of ", weight.numel());
    if (!weight_mask.defined()) weight_mask = register_buffer("weight_mask", Tensor::ones(weight.shape()));
    std::copy(mask.begin(), mask.end(), weight_mask.values().begin());
  }

  std::int64_t in_features, out_features;
  Tensor weight;
  Tensor bias;         ///< undefined when built without bias
  Tensor weight_mask;  ///< undefined unless pruned
  std::shared_ptr<InputTransform> input_transform;
  std::shared_ptr<Linear> lora_A, lora_B;  ///< null unless a LoRA adapter is attached
  std::shared_ptr<Module> lora_dropout;    ///< Dropout on the adapter's input (null: none)
  float lora_scaling = 0.0f;               ///< alpha / rank
};

/// A Linear built quantized: MASE's LinearInteger(in, out, config=...) and its siblings.
class QuantLinear : public Linear {
 public:
  QuantLinear(std::int64_t in_features, std::int64_t out_features, QuantConfig config, bool bias = true,
              std::uint64_t seed = 0)
      : Linear(in_features, out_features, bias, seed) {
    set_quant(std::move(config));
  }
};

/// A lookup table weight [num_embeddings, embedding_dim], initialised N(0, 1) (torch.nn.Embedding).
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, std::uint64_t seed = 0)
      : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
    detail::require_positive(num_embeddings, "Embedding", "num_embeddings");
    detail::require_positive(embedding_dim, "Embedding", "embedding_dim");
    weight = register_parameter("weight", Tensor::randn({num_embeddings, embedding_dim}, seed));
  }
  std::string type_name() const override { return "Embedding"; }
  std::string op_name() const override { return "embedding"; }

  /// Rows for `indices` laid out as `index_shape`: result index_shape + [embedding_dim].
  virtual Tensor forward_indices(std::span<const std::int64_t> indices, const Shape& index_shape) {
    return embedding(indices, index_shape, weight);
  }
  /// Whether `weight` holds the table as float32 (false: a packed subclass, weight undefined).
  virtual bool dense() const { return true; }
  /// The same with the indices held as a float tensor of whole numbers (so an Embedding can
  /// sit in a Sequential); a fractional value is an error. No gradient flows to x.
  Tensor forward(const Tensor& x) override {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const float v = x.values()[i];
      qnum::detail::require(std::nearbyint(v) == v, "Embedding: index ", v, " at position ", i,
                            " is not a whole number");
      idx[i] = static_cast<std::int64_t>(v);
    }
    return forward_indices(idx, x.shape());
  }

  std::int64_t num_embeddings, embedding_dim;
  Tensor weight;

 protected:
  /// For subclasses that hold the table otherwise (no float32 weight is made).
  struct NoWeight {};
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, NoWeight)
      : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {}
};

/// Layer normalisation over the last dimension with weight (ones) and bias (zeros) of
/// [normalized_shape] (torch.nn.LayerNorm with a single normalised dimension).
/// Quantizable: data_in (the input, as MASE's LayerNormInteger) and data_out; unlike MASE
/// the affine weight and bias are kept (spec/formats.md §6 #18).
class LayerNorm : public Module, public Quantizable {
 public:
  explicit LayerNorm(std::int64_t normalized_shape, float eps = 1e-5f) : eps(eps) {
    detail::require_positive(normalized_shape, "LayerNorm", "normalized_shape");
    weight = register_parameter("weight", Tensor::ones({normalized_shape}));
    bias = register_parameter("bias", Tensor::zeros({normalized_shape}));
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string op_name() const override { return "layer_norm"; }
  Tensor forward(const Tensor& x) override { return quantize_out(layer_norm(quantize_in(x), weight, bias, eps)); }

  float eps;
  Tensor weight, bias;
};

/// Batch normalisation of [N, C] or [N, C, L] inputs (torch.nn.BatchNorm1d, affine, tracking
/// running statistics). Training uses batch statistics and updates running_mean /
/// running_var with `momentum` and counts num_batches_tracked; eval uses the running ones.
/// num_batches_tracked is a float32 scalar here (PyTorch: int64), exact up to 2^24 batches.
class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(std::int64_t num_features, float eps = 1e-5f, float momentum = 0.1f)
      : num_features(num_features), eps(eps), momentum(momentum) {
    detail::require_positive(num_features, "BatchNorm1d", "num_features");
    qnum::detail::require(momentum >= 0.0f && momentum <= 1.0f, "BatchNorm1d: momentum ", momentum,
                          " must be in [0, 1]");
    weight = register_parameter("weight", Tensor::ones({num_features}));
    bias = register_parameter("bias", Tensor::zeros({num_features}));
    running_mean = register_buffer("running_mean", Tensor::zeros({num_features}));
    running_var = register_buffer("running_var", Tensor::ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::scalar(0.0f));
  }
  std::string type_name() const override { return "BatchNorm1d"; }
  std::string op_name() const override { return "batch_norm1d"; }
  Tensor forward(const Tensor& x) override {
    Tensor y = batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
    if (is_training()) num_batches_tracked.values()[0] += 1.0f;
    return y;
  }

  std::int64_t num_features;
  float eps, momentum;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

/// max(x, 0). Quantizable: data_in (quantized, then ReLU, as MASE's ReLUInteger) and data_out.
class ReLU : public Module, public Quantizable {
 public:
  std::string type_name() const override { return "ReLU"; }
  std::string op_name() const override { return "relu"; }
  Tensor forward(const Tensor& x) override { return quantize_out(relu(quantize_in(x))); }
};

/// GELU, exact erf form (torch.nn.GELU's default). Quantizable like ReLU; the input format
/// is used as given (signed integer keeps GELU's negative lobe, unlike MASE's unsigned one).
class GELU : public Module, public Quantizable {
 public:
  std::string type_name() const override { return "GELU"; }
  std::string op_name() const override { return "gelu"; }
  Tensor forward(const Tensor& x) override { return quantize_out(gelu(quantize_in(x))); }
};

/// tanh. Quantizable like ReLU.
class Tanh : public Module, public Quantizable {
 public:
  std::string type_name() const override { return "Tanh"; }
  std::string op_name() const override { return "tanh"; }
  Tensor forward(const Tensor& x) override { return quantize_out(qnum::tanh(quantize_in(x))); }
};

/// softmax along `dim`. Quantizable: data_in (quantized, then a float softmax, as MASE's
/// softmax_<format>) and data_out.
class Softmax : public Module, public Quantizable {
 public:
  explicit Softmax(int dim = -1) : dim(dim) {}
  std::string type_name() const override { return "Softmax"; }
  std::string op_name() const override { return "softmax"; }
  Tensor forward(const Tensor& x) override { return quantize_out(softmax(quantize_in(x), dim)); }
  int dim;
};

/// a @ b (torch.matmul) as a layer, so that products inside a model (attention's Q·Kᵀ and
/// P·V) can be quantized and traced. Quantizable as MASE's matmul_<format>: data_in is the
/// left operand, weight the right one, data_out the product. Block and MX formats group
/// the right operand along the reduction axis K (its second-to-last) in exact mode, as OCP
/// MX requires; mase_compat groups it along its last axis N, as MASE does (spec/formats.md
/// §6 #19).
class Matmul : public Module, public Quantizable {
 public:
  std::string type_name() const override { return "Matmul"; }
  std::string op_name() const override { return "matmul"; }
  std::vector<std::string> quant_operands() const override { return {"data_in", "weight", "data_out"}; }
  Tensor operator()(const Tensor& a, const Tensor& b) {
    return observed({a, b}, [&] { return forward(a, b); });
  }
  using Module::forward;
  Tensor forward(const Tensor& a, const Tensor& b) { return quantize_out(matmul(quantize_in(a), quantize_right(b))); }

  /// Whether right operands of rank `rank` on format `f` are grouped along K (quantized
  /// transposed): block and MX formats in exact mode; the rule qnum.torch's matmuls follow too.
  static bool right_groups_along_k(const Format& f, std::int64_t rank) {
    const std::string_view fam = f.family();
    const bool blocked = fam.starts_with("block") || fam.starts_with("mx");
    return blocked && f.policy.semantics != mase_compat.semantics && rank >= 2;
  }

 private:
  Tensor quantize_right(const Tensor& b) const {
    const auto& f = quant().weight;
    if (!f) return b;
    if (!right_groups_along_k(*f, b.rank())) return fake_quantize(b, *f, Role::activation);
    const int r = static_cast<int>(b.rank());
    return transpose(fake_quantize(transpose(b, r - 2, r - 1), *f, Role::activation), r - 2, r - 1);
  }
};

/// Inverted dropout with probability p in training mode, the identity in eval mode. Each
/// training call draws a new mask from derive_seed(seed, calls) and advances `calls`, so a
/// run is reproducible from the seed; a trainer that resumes restores calls with set_calls.
class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f, std::uint64_t seed = 0) : p(p), seed_(seed) {
    qnum::detail::require(p >= 0.0f && p < 1.0f, "Dropout: probability ", p, " must be in [0, 1)");
  }
  std::string type_name() const override { return "Dropout"; }
  std::string op_name() const override { return "dropout"; }
  Tensor forward(const Tensor& x) override {
    if (!is_training() || p == 0.0f) return x;
    return dropout(x, p, true, next_seed());
  }
  /// The seed of the next mask, counted as drawn: what forward() would use. For an op that
  /// applies this dropout inside a fused computation (scaled_dot_product_attention).
  std::uint64_t next_seed() { return detail::derive_seed(seed_, calls_++); }
  /// How many masks have been drawn so far.
  std::uint64_t calls() const { return calls_; }
  void set_calls(std::uint64_t n) { calls_ = n; }

  float p;

 private:
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
};

/// Returns its input.
class Identity : public Module {
 public:
  std::string type_name() const override { return "Identity"; }
  std::string op_name() const override { return "identity"; }
  Tensor forward(const Tensor& x) override { return x; }
};

/// Applies its children in order; they are named "0", "1", ... (torch.nn.Sequential).
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers) {
    for (auto& m : layers) push_back(std::move(m));
  }
  std::string type_name() const override { return "Sequential"; }

  /// Appends a layer under the next index name.
  void push_back(std::shared_ptr<Module> m) { register_module(std::to_string(children().size()), std::move(m)); }
  std::size_t size() const { return children().size(); }
  /// The i-th layer.
  std::shared_ptr<Module> operator[](std::size_t i) const {
    qnum::detail::require(i < size(), "Sequential: index ", i, " out of range for ", size(), " layers");
    return children()[i].second;
  }

  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (auto& [name, m] : children()) y = (*m)(y);
    return y;
  }
};

}  // namespace qnum::nn
