// minifloat_ieee kernels (qnum/cuda/quantize/minifloat.hpp): the float32 fast path under
// `exact`, MASE's emulation with the log2 decision looked up under `mase_compat`, otherwise
// the scalar reference per element (quantize/map.cuh).
#include "qnum/cuda/quantize/minifloat.hpp"

#include "decode.cuh"
#include "log2_lookup.cuh"
#include "map.cuh"
#include "qnum/kernel/exact_float32.hpp"

namespace qnum::cuda {

namespace {

/// MASE's minifloat emulation with the log2 decision looked up (same floats).
struct MinifloatMaseOp {
  int exponent_width, mantissa_bits, bias;
  detail::Log2Lookup l2;
  __device__ float operator()(float x, std::uint64_t) const {
    return qnum::detail::minifloat_ieee_mase(x, exponent_width, mantissa_bits, bias, l2);
  }
};

}  // namespace

void quantize(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (const auto f = qnum::detail::MinifloatExactF32::make(s, p))
    detail::launch_map(detail::PlainOp<qnum::detail::MinifloatExactF32>{*f}, in, out, n, first, stream);
  else if (p == qnum::mase_compat && n > 0)
    detail::launch_map(MinifloatMaseOp{s.exponent_width, s.mantissa_bits(), s.bias(), detail::device_log2_lookup()}, in,
                       out, n, first, stream);
  else
    detail::launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  detail::launch_reference(s, p, in, out, n, first, stream);
}
void decode_codes(const MinifloatSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  detail::launch_decode(s, out, n, stream);
}

}  // namespace qnum::cuda
