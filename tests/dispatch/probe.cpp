// A portable program (compiled with the compiler's default flags whatever QNUM_NATIVE says)
// that links qnum::kernels: it runs every dispatch level the CPU supports against the scalar
// reference, and CTest kernel.isa_isolation disassembles it to prove that no AVX code leaked
// out of the per-level namespaces. Exit 0 when every level matches the reference bit for bit.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qnum/format/format.hpp"
#include "qnum/kernel/dispatch.hpp"

namespace {

int run() {
  namespace dispatch = qnum::kernel::dispatch;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> in(64 * 64);
  for (auto& v : in) v = normal(gen);
  in[5] = 0.0f;
  in[6] = -0.0f;
  int failures = 0;
  // Every family, both bundles, through the simd, scalar and reference paths.
  for (const char* spec :
       {"integer", "integer:rounding=stochastic", "fp8_e4m3", "fp8_e5m2", "minifloat_denorm", "log", "binary",
        "binary:stochastic=true", "binarize", "ternary", "block_fp", "block_minifloat", "block_log", "mxint8",
        "mxfp8_e4m3", "mxfp4_e2m1", "scale_integer", "integer:mode=mase_compat", "minifloat_ieee:mode=mase_compat",
        "minifloat_denorm:mode=mase_compat", "log:mode=mase_compat", "block_fp:mode=mase_compat",
        "mxint:width=8,mode=mase_compat"}) {
    const qnum::Format f = qnum::Format::parse(spec);
    const qnum::Shape shape{64, 64};
    const std::vector<float> ref = f.quantize(in, shape);
    for (dispatch::Isa isa : dispatch::compiled_isas()) {
      if (!dispatch::isa_supported(isa)) continue;
      std::vector<float> out(in.size());
      dispatch::quantize_isa(isa, f, in, out, shape);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < in.size(); ++i)
        if (std::memcmp(&out[i], &ref[i], 4) != 0 && !(out[i] != out[i] && ref[i] != ref[i])) ++bad;
      std::printf("%-32s %-9s %s\n", spec, std::string(dispatch::to_string(isa)).c_str(), bad == 0 ? "ok" : "MISMATCH");
      failures += bad != 0;
    }
  }
  std::printf("selected: %s (%s)\n", std::string(dispatch::to_string(dispatch::selected_isa())).c_str(),
              std::string(dispatch::simd_arch_name(dispatch::selected_isa())).c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const qnum::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
