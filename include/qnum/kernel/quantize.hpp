// SIMD tensor quantize: `qnum::kernel::quantize(format, in, out, shape, role)` gives the same
// bits as the scalar reference `Format::quantize` for every family and policy, faster.
//
// The generic driver. Each call computes one plan (kernel/quantize/plan.hpp) from the format's
// family row — kernel/quantize/<family>.hpp, which says what runs for which policy, shape and
// role — and runs it; quantize_path reports the same plan's path:
//  - simd: vector loops over the xsimd architecture tag `Arch`, threaded by parallel_for
//    (chunks depend only on the sizes, so results never depend on the thread count);
//  - scalar: the reference's own element or block code, threaded the same way;
//  - reference: `Format::quantize` itself, single-threaded (families without a row:
//    mxint_hardware; and the settings a row leaves out).
// The "how the float32 steps reproduce the reference" notes sit in each family's file;
// kernel/quantize/walks.hpp holds the ways kernels walk a tensor (rows, blocks, tiles).
//
// Dispatch: `quantize` uses xsimd::default_arch, the widest instruction set the translation
// unit is compiled for (QNUM_NATIVE=ON: -march=native); `quantize_arch<Arch>` runs any
// compiled-in architecture explicitly (the tests run each). Run-time selection (a portable
// binary that uses AVX2 / AVX-512 where the CPU has them) is kernel::dispatch in
// dispatch.hpp, from the compiled library qnum::kernels, which builds this header once per
// instruction set under its own QNUM_KERNEL_ISA_NS (see src/kernel/isa_kernels.inc).
#pragma once

#include <span>
#include <string_view>
#include <variant>

#include "qnum/core/shape.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/tensor_quantize.hpp"
#include "qnum/kernel/quantize/binarize.hpp"
#include "qnum/kernel/quantize/binary.hpp"
#include "qnum/kernel/quantize/block_fp.hpp"
#include "qnum/kernel/quantize/block_log.hpp"
#include "qnum/kernel/quantize/block_minifloat.hpp"
#include "qnum/kernel/quantize/fixed.hpp"
#include "qnum/kernel/quantize/log.hpp"
#include "qnum/kernel/quantize/minifloat.hpp"
#include "qnum/kernel/quantize/minifloat_denorm.hpp"
#include "qnum/kernel/quantize/mxfp.hpp"
#include "qnum/kernel/quantize/mxint.hpp"
#include "qnum/kernel/quantize/nvfp4.hpp"
#include "qnum/kernel/quantize/plan.hpp"
#include "qnum/kernel/quantize/residual_sign.hpp"
#include "qnum/kernel/quantize/scale_integer.hpp"
#include "qnum/kernel/quantize/ternary.hpp"
#include "qnum/kernel/quantize_path.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {

/// The plan for quantizing a tensor of `shape` with `f` on instruction set `Arch`: the
/// family's row decides it (kernel/quantize/<family>.hpp); a family without one runs the
/// reference. `in_place`: the output buffer is the input. The plan refers to `f` and `shape`.
template <class Arch>
QuantizePlan quantize_plan(const Format& f, const Shape& shape, Role role = Role::weight, bool in_place = false) {
  const detail::QuantizeCall call{shape, role, in_place};
  return std::visit(
      [&]<class Spec>(const Spec& s) -> QuantizePlan {
        if constexpr (requires { detail::FamilyKernel<Spec>::template plan<Arch>(s, f.policy, call); })
          return detail::FamilyKernel<Spec>::template plan<Arch>(s, f.policy, call);
        else
          return {};
      },
      f.spec);
}

/// Which path `quantize` takes for `f` on a tensor of `shape` (for reports and benchmarks).
inline QuantizePath quantize_path(const Format& f, const Shape& shape = {1}, Role role = Role::weight) {
  return quantize_plan<xsimd::default_arch>(f, shape, role).path;
}

/// Quantizes a C-order tensor of `shape` with format `f`, using instruction set `Arch`
/// (an xsimd architecture compiled into this translation unit). Bit-identical to
/// `f.quantize(in, out, shape, role)` for any thread count; `out` may alias `in` exactly;
/// mismatched sizes throw qnum::Error.
template <class Arch>
void quantize_arch(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                   Role role = Role::weight) {
  // a stacked family writes several outputs per input: its kernel checks its own sizes
  if (f.grouping() != Grouping::stacked) qnum::detail::check_tensor_io(f.family(), in, out, shape);
  const QuantizePlan plan = quantize_plan<Arch>(f, shape, role, in.data() == out.data());
  if (plan.run)
    plan.run(in, out);
  else
    f.quantize(in, out, shape, role);
}

/// As quantize_arch with the widest instruction set of this build (xsimd::default_arch).
inline void quantize(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                     Role role = Role::weight) {
  quantize_arch<xsimd::default_arch>(f, in, out, shape, role);
}

/// Name of the instruction set `quantize` uses.
inline std::string_view simd_arch_name() { return xsimd::default_arch::name(); }

}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
