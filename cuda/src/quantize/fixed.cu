// fixed point kernels (qnum/cuda/quantize/fixed.hpp): the float32 fast path under `exact`,
// otherwise the scalar reference per element (quantize/map.cuh).
#include "qnum/cuda/quantize/fixed.hpp"

#include "decode.cuh"
#include "map.cuh"
#include "qnum/kernel/exact_float32.hpp"

namespace qnum::cuda {

void quantize(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (const auto f = qnum::detail::FixedExactF32::make(s, p))
    detail::launch_map(detail::PlainOp<qnum::detail::FixedExactF32>{*f}, in, out, n, first, stream);
  else
    detail::launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  detail::launch_reference(s, p, in, out, n, first, stream);
}
void decode_codes(const FixedSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  detail::launch_decode(s, out, n, stream);
}

}  // namespace qnum::cuda
