// Run-time instruction-set dispatch for tensor quantize.
//
// `kernel::quantize` (quantize.hpp) runs the widest instruction set its translation unit is
// compiled for: a portable build gets SSE2 on x86-64. The functions here pick the widest set
// the CPU supports at run time instead, among copies of the same kernels compiled once per
// instruction set into the compiled library `qnum::kernels` (link it to use this header):
//   baseline  the library's default flags (SSE2 on x86-64; whatever the target has elsewhere)
//   avx2      x86-64-v3: AVX2, FMA, BMI2, F16C   (x86-64 only)
//   avx512    x86-64-v4: AVX-512 F/CD/DQ/BW/VL   (x86-64 only)
// Every copy is bit-identical to the scalar reference (the kernel tests run each one the CPU
// supports). The environment variable QNUM_MAX_ISA (baseline, avx2, avx512, amx) caps the choice,
// as oneDNN's ONEDNN_MAX_CPU_ISA does: for reproducing a narrower machine's speed. `amx` leaves
// quantize at its widest level and lets the GEMMs use AMX tiles (kernel/amx.hpp), which every
// lower level turns off.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "qnum/core/shape.hpp"
#include "qnum/format/format.hpp"
#include "qnum/kernel/quantize_path.hpp"

namespace qnum::kernel::dispatch {

/// An instruction-set level of the dispatch table, narrowest first.
enum class Isa : std::uint8_t { baseline, avx2, avx512 };

/// "baseline", "avx2", "avx512".
std::string_view to_string(Isa isa);

/// The inverse of to_string ("sse2" is accepted for baseline); qnum::Error on anything else.
Isa parse_isa(std::string_view name);

/// The levels compiled into this build of the library, narrowest first (baseline always).
std::vector<Isa> compiled_isas();

/// Whether this CPU and OS can run `isa` (false when it is not compiled in).
bool isa_supported(Isa isa);

/// The level `quantize` uses: the widest compiled and supported one, capped by QNUM_MAX_ISA.
/// qnum::Error when QNUM_MAX_ISA holds an unknown name.
Isa selected_isa();

/// The xsimd architecture name of a level's kernels ("sse2", "fma3+avx2", "avx512bw"...);
/// qnum::Error when the CPU cannot run `isa`.
std::string_view simd_arch_name(Isa isa);

/// As kernel::quantize, with the kernels of selected_isa().
void quantize(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
              Role role = Role::weight);

/// As kernel::quantize, with the kernels of `isa`; qnum::Error when the CPU cannot run it.
void quantize_isa(Isa isa, const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                  Role role = Role::weight);

/// Which implementation quantize runs for `f` on a tensor of `shape` (the same on every level).
QuantizePath quantize_path(const Format& f, const Shape& shape = {1}, Role role = Role::weight);

}  // namespace qnum::kernel::dispatch
