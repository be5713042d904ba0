// log kernels (qnum/cuda/quantize/log.hpp): MASE's emulation with the log2 decision looked
// up under `mase_compat`, otherwise the scalar reference per element (quantize/map.cuh).
#include "qnum/cuda/quantize/log.hpp"

#include "log2_lookup.cuh"
#include "map.cuh"

namespace qnum::cuda {

namespace {

/// MASE's log emulation with the log2 decision looked up (same floats).
struct LogMaseOp {
  int emin, emax;
  detail::Log2Lookup l2;
  __device__ float operator()(float x, std::uint64_t) const {
    return qnum::detail::log_quantize_mase(x, emin, emax, l2);
  }
};

}  // namespace

void quantize(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (p == qnum::mase_compat && n > 0)
    detail::launch_map(LogMaseOp{s.emin(), s.emax(), detail::device_log2_lookup()}, in, out, n, first, stream);
  else
    detail::launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  detail::launch_reference(s, p, in, out, n, first, stream);
}

}  // namespace qnum::cuda
