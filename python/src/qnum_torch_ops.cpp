// qnum's quantizer as a PyTorch operator in C++ (libqnum_torch_ops.so, loaded by
// qnum.torch with torch.ops.load_library): `qnum::quantize(Tensor x, str spec, int role)`.
// Registered for CPU (qnum's run-time dispatched kernels on the tensor's memory), Meta (the
// shape, for torch.compile's fake tensors) and Autograd (the format's straight-through
// rule: identity, or the gradient zeroed outside ste_range with `ste=clipped`). Being a C++
// operator, a call costs the dispatcher's few microseconds, not a Python function's.
//
// Values: float32 inputs are quantized in place of their memory; bfloat16 and float16 are
// widened exactly to float32, quantized, and rounded back to their dtype (nearest even).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "qnum/format/format.hpp"
#include "qnum/kernel/dispatch.hpp"
#include "qnum/tensor/ops_quant.hpp"

namespace {

struct SpecHash {
  using is_transparent = void;  // lookups by string_view: no string built per call
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

/// Formats by canonical text, parsed once (the text carries the mode: mode=mase_compat).
/// Entries are never erased, so references stay valid.
const qnum::Format& format_of(std::string_view spec) {
  static std::shared_mutex lock;
  static std::unordered_map<std::string, qnum::Format, SpecHash, std::equal_to<>> cache;
  {
    std::shared_lock read(lock);
    if (auto it = cache.find(spec); it != cache.end()) return it->second;
  }
  qnum::Format f = qnum::Format::parse(std::string(spec));  // throws qnum::Error naming the problem
  std::unique_lock write(lock);
  return cache.try_emplace(std::string(spec), std::move(f)).first->second;
}

qnum::Role role_of(std::int64_t role) {
  TORCH_CHECK(role >= 0 && role <= 2, "qnum::quantize: role must be 0 (weight), 1 (activation) or 2 (bias), got ",
              role);
  return static_cast<qnum::Role>(role);
}

void check_dtype(const at::Tensor& x) {
  const auto t = x.scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || t == at::kBFloat16 || t == at::kHalf, "qnum.torch: x has dtype ",
                   c10::toString(t), "; qnum quantizes float32, bfloat16 and float16 tensors (convert with x.float())");
}

at::Tensor quantize_cpu(const at::Tensor& x, c10::string_view spec_view, std::int64_t role) {
  check_dtype(x);
  const qnum::Role r = role_of(role);
  const std::string_view spec(spec_view.data(), spec_view.size());
  const qnum::Format* f = nullptr;
  try {
    f = &format_of(spec);
  } catch (const qnum::Error& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  const at::Tensor src = x.to(at::kFloat).contiguous();  // no copy for contiguous float32
  qnum::Shape shape(src.sizes().begin(), src.sizes().end());
  if (shape.empty()) shape = {1};
  TORCH_CHECK_VALUE(f->output_shape(shape) == shape, "qnum.torch.fake_quantize: format '", spec,
                    "' changes the tensor's shape; only shape-preserving formats can be fake-quantized");
  at::Tensor out = at::empty(src.sizes(), src.options());
  if (src.numel() > 0) {
    const auto n = static_cast<std::size_t>(src.numel());
    try {
      qnum::kernel::dispatch::quantize(*f, std::span<const float>(src.const_data_ptr<float>(), n),
                                       std::span<float>(out.mutable_data_ptr<float>(), n), shape, r);
    } catch (const qnum::Error& e) {
      TORCH_CHECK_VALUE(false, e.what());
    }
  }
  return x.scalar_type() == at::kFloat ? out : out.to(x.scalar_type());
}

at::Tensor quantize_meta(const at::Tensor& x, c10::string_view, std::int64_t) {
  check_dtype(x);
  return at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
}

class QuantizeSTE : public torch::autograd::Function<QuantizeSTE> {
 public:
  /// The op's kernel below autograd (CPU, Meta, ...) for x's dispatch key.
  static at::Tensor redispatch(const at::Tensor& x, c10::string_view spec, std::int64_t role) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("qnum::quantize", "")
                               .typed<at::Tensor(const at::Tensor&, c10::string_view, std::int64_t)>();
    return op.call(x, spec, role);
  }

  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, c10::string_view spec,
                            std::int64_t role) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor y = redispatch(x, spec, role);
    const qnum::Format& f = format_of(std::string_view(spec.data(), spec.size()));
    const bool clipped = f.policy.ste == qnum::Ste::clipped;
    ctx->saved_data["clipped"] = clipped;
    if (clipped) {
      const qnum::SteRange range = qnum::ste_range(f);
      ctx->saved_data["lo"] = range.lo;
      ctx->saved_data["hi"] = range.hi;
      ctx->save_for_backward({x});
    }
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    if (!ctx->saved_data["clipped"].toBool()) return {grad[0], at::Tensor(), at::Tensor()};
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor keep = x.ge(ctx->saved_data["lo"].toDouble()).logical_and(x.le(ctx->saved_data["hi"].toDouble()));
    return {at::where(keep, grad[0], at::zeros_like(grad[0])), at::Tensor(), at::Tensor()};
  }
};

at::Tensor quantize_autograd(const at::Tensor& x, c10::string_view spec, std::int64_t role) {
  // No graph to record (no grad mode, or an input that needs none): skip the autograd
  // Function's set-up, half of a small call's cost.
  if (!at::GradMode::is_enabled() || !x.requires_grad()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return QuantizeSTE::redispatch(x, spec, role);
  }
  return QuantizeSTE::apply(x, spec, role);
}

}  // namespace

TORCH_LIBRARY(qnum, m) {
  m.def("quantize(Tensor x, str spec, int role) -> Tensor");
}

TORCH_LIBRARY_IMPL(qnum, CPU, m) {
  m.impl("quantize", &quantize_cpu);
}

TORCH_LIBRARY_IMPL(qnum, Meta, m) {
  m.impl("quantize", &quantize_meta);
}

TORCH_LIBRARY_IMPL(qnum, Autograd, m) {
  m.impl("quantize", &quantize_autograd);
}
