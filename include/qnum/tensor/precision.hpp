// The precision of the tensor layer's matrix products (linear, matmul, attention's per-head
// products, forward and backward): fp32 (the default: fp32 operands, the fp32 GEMM) or bf16
// (operands rounded to bfloat16, nearest even, fp32 accumulation: kernel/gemm/bf16.hpp) —
// what PyTorch's CPU autocast to bfloat16 does to those ops. Everything else (weights and
// optimizer states, LayerNorm, softmax, GELU, losses, gradient clipping, int8 fixed-point
// products) stays fp32. A product whose operands are already bf16 values (8-bit fixed point
// with a power-of-two scale, FP8, MXINT8 elements) is rounded by nothing.
//
// The setting is process-wide, as torch.set_float32_matmul_precision is: the products of one
// op may run on worker threads, and backward runs after the forward's scope. Set it with a
// PrecisionScope around a whole training run or evaluation (train::Trainer does).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

#include "qnum/core/error.hpp"

namespace qnum {

enum class Precision : std::uint8_t { fp32, bf16 };

/// "fp32", "bf16".
inline std::string_view to_string(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

/// The inverse of to_string; also "float32" / "bfloat16" and Lightning's Trainer(precision=)
/// spellings "32", "32-true" and "bf16-mixed". qnum::Error naming the known ones.
inline std::optional<Precision> find_precision(std::string_view name) {
  if (name == "fp32" || name == "float32" || name == "32" || name == "32-true") return Precision::fp32;
  if (name == "bf16" || name == "bfloat16" || name == "bf16-mixed") return Precision::bf16;
  return std::nullopt;
}
inline constexpr std::string_view kKnownPrecisions = "fp32, bf16; Lightning's 32-true, bf16-mixed";
inline Precision parse_precision(std::string_view name) {
  const auto p = find_precision(name);
  if (!p) detail::fail("precision '", name, "' is unknown (known: ", kKnownPrecisions, ")");
  return *p;
}

namespace detail {
inline std::atomic<Precision>& matmul_precision_slot() {
  static std::atomic<Precision> p{Precision::fp32};
  return p;
}
}  // namespace detail

/// The precision the tensor layer's products use now.
inline Precision matmul_precision() { return detail::matmul_precision_slot().load(std::memory_order_relaxed); }

/// Sets matmul_precision() for its lifetime and restores the previous value after.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : saved_(detail::matmul_precision_slot().exchange(p)) {}
  ~PrecisionScope() { detail::matmul_precision_slot().store(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

}  // namespace qnum
