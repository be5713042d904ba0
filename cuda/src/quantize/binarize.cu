// binarize kernel (qnum/cuda/quantize/binarize.hpp): one thread per element calling the CPU's
// QNUM_HD scalar reference (format/binarize.hpp).
#include "qnum/cuda/quantize/binarize.hpp"

#include "io.cuh"
#include "map.cuh"

namespace qnum::cuda {

namespace {

struct BinarizeOp {
  Policy p;
  __device__ float operator()(float x, std::size_t i) const {
    return qnum::quantize(BinarizeSpec{}, p, x, static_cast<std::uint64_t>(i));
  }
};

}  // namespace

void quantize(const BinarizeSpec& s, const Policy& p, const float* in, float* out, const Shape& shape,
              cudaStream_t stream) {
  const std::size_t n = detail::checked_numel(s.name, shape);
  detail::require_pointers(s.name, n, in, out);
  detail::launch_indexed("binarize", BinarizeOp{p}, in, out, n, stream);
}

}  // namespace qnum::cuda
