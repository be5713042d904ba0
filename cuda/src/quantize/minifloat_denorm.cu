// minifloat_denorm kernels (qnum/cuda/quantize/minifloat_denorm.hpp): the scalar reference
// per element (quantize/map.cuh).
#include "qnum/cuda/quantize/minifloat_denorm.hpp"

#include "decode.cuh"
#include "map.cuh"

namespace qnum::cuda {

void quantize(const MinifloatDenormSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first, cudaStream_t stream) {
  s.validate(p);
  detail::launch_reference(s, p, in, out, n, first, stream);
}
void decode_codes(const MinifloatDenormSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  detail::launch_decode(s, out, n, stream);
}

}  // namespace qnum::cuda
