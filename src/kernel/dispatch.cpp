// The run-time dispatcher: which levels are compiled in, which the CPU runs, which is used.
#include "qnum/kernel/dispatch.hpp"

#include <cstdlib>
#include <string>

#include "isa_entry.hpp"
#include "qnum/core/error.hpp"

namespace qnum::kernel::dispatch {

namespace {

// Only for levels the CPU runs: the entry functions are compiled with their level's flags.
detail::IsaEntry entry(Isa isa) {
  qnum::detail::require(isa_supported(isa), "dispatch: this CPU cannot run the ", to_string(isa), " kernels");
  switch (isa) {
    case Isa::baseline:
      return detail::baseline_entry();
#if QNUM_DISPATCH_X86
    case Isa::avx2:
      return detail::avx2_entry();
    case Isa::avx512:
      return detail::avx512_entry();
#endif
    default:
      break;
  }
  qnum::detail::fail("dispatch: instruction set ", to_string(isa), " is not compiled into this build of qnum");
}

bool cpu_runs(Isa isa) {
#if QNUM_DISPATCH_X86
  __builtin_cpu_init();  // needed when called before constructors run
  // The levels are the x86-64 micro-architecture levels their objects are compiled for;
  // __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512 registers.
  switch (isa) {
    case Isa::baseline:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("x86-64-v3");
    case Isa::avx512:
      return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
#else
  return isa == Isa::baseline;
#endif
}

Isa select() {
  Isa best = Isa::baseline;
  for (Isa isa : compiled_isas())
    if (cpu_runs(isa)) best = isa;
  // `amx` (kernel/amx.hpp: the GEMMs' tiles) is above every quantize level: no cap here.
  if (const char* cap = std::getenv("QNUM_MAX_ISA"); cap != nullptr && *cap != '\0' && std::string_view(cap) != "amx") {
    Isa limit;
    try {
      limit = parse_isa(cap);
    } catch (const Error&) {
      qnum::detail::fail("QNUM_MAX_ISA=", cap, ": expected baseline, avx2, avx512 or amx");
    }
    if (limit < best) best = limit;
  }
  return best;
}

}  // namespace

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::baseline:
      return "baseline";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view name) {
  if (name == "baseline" || name == "sse2") return Isa::baseline;
  if (name == "avx2") return Isa::avx2;
  if (name == "avx512") return Isa::avx512;
  qnum::detail::fail("unknown instruction set '", name, "' (expected baseline, avx2 or avx512)");
}

std::vector<Isa> compiled_isas() {
#if QNUM_DISPATCH_X86
  return {Isa::baseline, Isa::avx2, Isa::avx512};
#else
  return {Isa::baseline};
#endif
}

bool isa_supported(Isa isa) {
  for (Isa c : compiled_isas())
    if (c == isa) return cpu_runs(isa);
  return false;
}

Isa selected_isa() {
  static const Isa chosen = select();  // QNUM_MAX_ISA is read once; a bad value throws every call
  return chosen;
}

std::string_view simd_arch_name(Isa isa) { return entry(isa).arch_name(); }

void quantize(const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape, Role role) {
  entry(selected_isa()).quantize(f, in, out, shape, role);
}

void quantize_isa(Isa isa, const Format& f, std::span<const float> in, std::span<float> out, const Shape& shape,
                  Role role) {
  entry(isa).quantize(f, in, out, shape, role);
}

QuantizePath quantize_path(const Format& f, const Shape& shape, Role role) {
  return entry(Isa::baseline).path(f, shape, role);
}

}  // namespace qnum::kernel::dispatch
