// A W8A8 Linear for inference: a quantized Linear whose input and weight formats are signed
// fixed point of at most 8 bits (MASE's integer, e.g. data_in 8/4 and weight 8/7), with the
// weight held only as its int8 codes, packed once in the int8 GEMM's layout (Int8Weights:
// the AMX and VNNI panels), never as float32. Each forward quantizes the input with its format
// straight to codes (the fixed-point reference's mantissas), runs the int8 GEMM with int32 sums
// and one scale per output (gemm_fixed8_nt), adds the quantized bias and applies data_out.
//
// Bits: for in_features <= kGemmFixed8ExactK (1024) equal to the fake-quantized Linear's
// (every partial sum is exact both ways). Above it the int32 sum is exact and rounded once,
// where the float reference rounds its partial sums: the two differ by at most the
// reference's own summation error (docs/export.md, "A packed checkpoint"; tested in
// tests/bert/test_bert_packed.cpp). Inference only: no gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/gemm/int8.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/tensor/ops.hpp"

namespace qnum::nn {

class Int8PackedLinear : public Module, public Quantizable {
 public:
  /// Packs `lin` (on the CPU): its forward weight (mask applied, fake-quantized) as codes, its
  /// forward bias as float32 values. qnum::Error naming what is missing when data_in or the
  /// weight is not signed fixed point of <= 8 bits, or the Linear carries a LoRA adapter or an
  /// input transform (fuse or drop them first).
  explicit Int8PackedLinear(const Linear& lin)
      : in_features(lin.in_features), out_features(lin.out_features),
        x_frac_(Linear::fixed8_frac(lin.quant().data_in)), w_frac_(Linear::fixed8_frac(lin.quant().weight)) {
    using qnum::detail::require;
    check_formats(lin.quant());
    require(!lin.lora_A && !lin.input_transform,
            "Int8PackedLinear: the Linear has a LoRA adapter or an input transform (fuse_lora or drop it first)");
    require(!lin.weight.is_cuda(), "Int8PackedLinear: the weight is on ", lin.weight.device().str(),
            "; the int8 GEMM is a CPU kernel");
    const Tensor w = lin.forward_weight();
    std::vector<std::int8_t> codes(static_cast<std::size_t>(w.numel()));
    require(qnum::detail::fixed8_codes(w.data(), codes.size(), w_frac_, codes.data()),
            "Int8PackedLinear: the quantized weight holds NaN");
    init(lin.quant(), codes, lin.bias.defined() ? lin.forward_bias() : Tensor());
  }

  /// From stored codes (a packed checkpoint): `quant` as the Linear's (data_in, weight and
  /// data_out formats), `codes` the weight's [out, in] codes row-major, `bias` [out] or undefined.
  Int8PackedLinear(std::int64_t in, std::int64_t out, const QuantConfig& quant, std::span<const std::int8_t> codes,
                   const Tensor& bias)
      : in_features(in), out_features(out), x_frac_(Linear::fixed8_frac(quant.data_in)),
        w_frac_(Linear::fixed8_frac(quant.weight)) {
    using qnum::detail::require;
    require(in > 0 && out > 0, "Int8PackedLinear: sizes ", out, " x ", in, " must be positive");
    check_formats(quant);
    require(static_cast<std::int64_t>(codes.size()) == in * out, "Int8PackedLinear: ", codes.size(),
            " codes for a weight of ", out, " x ", in);
    require(!bias.defined() || bias.shape() == Shape{out}, "Int8PackedLinear: bias shape ",
            bias.defined() ? qnum::to_string(bias.shape()) : "", " is not [", out, "]");
    init(quant, codes, bias);
  }

  std::string type_name() const override { return "Int8PackedLinear"; }
  std::string op_name() const override { return "linear"; }
  std::vector<std::string> quant_operands() const override { return {"data_in", "data_out"}; }

  /// y[..., out] = q_out(codes(q_in(x)) · Wcodesᵀ · 2^-(Fx+Fw) + bias).
  Tensor forward(const Tensor& x) override {
    using qnum::detail::require;
    require(x.rank() >= 1 && x.shape().back() == in_features, "Int8PackedLinear: input ", qnum::to_string(x.shape()),
            " does not end in in_features ", in_features);
    require(!x.is_cuda(), "Int8PackedLinear: the input is on ", x.device().str(), "; the packed weight is on the cpu");
    const std::int64_t rows = x.numel() / in_features;
    Shape shape = x.shape();
    shape.back() = out_features;
    FloatBuffer y(static_cast<std::size_t>(rows * out_features));
    if (rows > 0) {
      thread_local std::vector<std::int8_t> xk;  // reused: the codes are rebuilt every call
      xk.resize(static_cast<std::size_t>(x.numel()));
      require(input_codes(x, xk.data()), "Int8PackedLinear: the input holds NaN, which has no fixed-point code");
      gemm_fixed8_nt(xk.data(), x_frac_, weights_, w_frac_, y.data(), rows, bias.defined() ? bias.data() : nullptr);
    }
    return quantize_out(Tensor(std::move(shape), std::move(y)));
  }

  /// The weight's codes [out, in] row-major (what a packed checkpoint stores).
  std::vector<std::int8_t> codes() const { return unpack_int8_weights(weights_); }
  /// The weight's format (signed fixed point of <= 8 bits): value = code·2^-frac_width.
  const Format& weight_format() const { return weight_format_; }

  /// Bytes of the packed weight (codes, padding and the kernel's per-column offsets).
  std::size_t packed_bytes() const { return weights_.bytes(); }
  /// Bytes of the float32 bias (0 without one).
  std::size_t bias_bytes() const { return bias.defined() ? static_cast<std::size_t>(bias.numel()) * 4 : 0; }

  std::int64_t in_features, out_features;
  Tensor bias;  ///< float32 (the quantized bias values), undefined when the Linear had none

 private:
  void check_formats(const QuantConfig& q) const {
    qnum::detail::require(
        x_frac_ != Linear::kNotFixed8 && w_frac_ != Linear::kNotFixed8,
        "Int8PackedLinear: needs data_in and weight on signed fixed point of <= 8 bits (integer width<=8), got ",
        q.to_string());
    qnum::detail::require(in_features <= kGemmInt8MaxK, "Int8PackedLinear: in_features ", in_features, " exceeds ",
                          kGemmInt8MaxK);
  }
  void init(const QuantConfig& quant, std::span<const std::int8_t> codes, const Tensor& b) {
    weight_format_ = *quant.weight;
    QuantConfig q = quant;
    q.weight.reset();  // applied once, at packing: the codes are the quantized weight
    q.bias.reset();    // likewise for the bias values below
    set_quant(q);
    weights_ = pack_int8_weights(codes.data(), out_features, in_features);
    if (b.defined()) bias = register_buffer("bias", Tensor(b.shape(), std::vector<float>(b.values().begin(), b.values().end())));
  }

  /// The codes of data_in's quantization of x: in one pass where the format rounds to nearest
  /// even and saturates (the reference's mantissa), else its fake-quantize, then the codes.
  bool input_codes(const Tensor& x, std::int8_t* codes) const {
    const Format& f = *quant().data_in;
    const auto& spec = std::get<FixedSpec>(f.spec);
    const bool one_pass = f.policy.rounding == Rounding::nearest_even &&
                          (f.policy.is_mase() || f.policy.overflow == Overflow::saturate) && x_frac_ >= -100 &&
                          x_frac_ <= 100;
    if (one_pass)
      return qnum::detail::quantize_fixed8_codes(x.data(), static_cast<std::size_t>(x.numel()), x_frac_,
                                                 static_cast<int>(spec.kmin()), static_cast<int>(spec.kmax()), codes);
    const Tensor xq = quantize_in(x);
    return qnum::detail::fixed8_codes(xq.data(), static_cast<std::size_t>(xq.numel()), x_frac_, codes);
  }

  int x_frac_, w_frac_;
  Format weight_format_;
  Int8Weights weights_;
};

}  // namespace qnum::nn
