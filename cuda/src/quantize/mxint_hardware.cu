// mxint_hardware kernel (qnum/cuda/quantize/mxint_hardware.hpp): one warp per p1 x p0 tile,
// the tile's max |x| by warp reduction, then the CPU's QNUM_HD element (format/mxint_hardware.hpp).
#include "qnum/cuda/quantize/mxint_hardware.hpp"

#include <cstdint>

#include "../launch.cuh"
#include "io.cuh"
#include "qnum/format/scale_integer.hpp"  // detail::abs_max_key: a max of keys is the CPU's amax
#include "warp.cuh"

namespace qnum::cuda {

namespace {

using detail::lane_id;
using detail::warp_count;
using detail::warp_id;

struct TileGeometry {
  std::int64_t t1, t0, p1, p0;  // last two dims and the tile
  __device__ std::int64_t tiles_r() const { return t1 / p1; }
  __device__ std::int64_t tiles_c() const { return t0 / p0; }
  /// Flat index of element e (row-major in the tile) of tile g.
  __device__ std::size_t flat(std::size_t g, std::int64_t e) const {
    const auto gi = static_cast<std::int64_t>(g);
    const std::int64_t c = gi % tiles_c(), r = gi / tiles_c() % tiles_r(), b = gi / (tiles_c() * tiles_r());
    return static_cast<std::size_t>((b * t1 + r * p1 + e / p0) * t0 + c * p0 + e % p0);
  }
};

__global__ void mxint_hardware_kernel(int width, int exponent_width, TileGeometry t, const float* in, float* out,
                                      std::size_t tiles) {
  const int lane = lane_id();
  const std::int64_t len = t.p1 * t.p0;
  for (std::size_t g = warp_id(); g < tiles; g += warp_count()) {
    std::uint32_t key = 0;
    for (std::int64_t e = lane; e < len; e += 32) key = max(key, qnum::detail::abs_max_key(in[t.flat(g, e)]));
    // the largest key is the CPU's amax: max |x|, or NaN when the tile holds one
    const float p2 = qnum::detail::mxint_hardware_step(exponent_width, qnum::detail::bits_float(detail::warp_max(key)));
    for (std::int64_t e = lane; e < len; e += 32) {
      const std::size_t k = t.flat(g, e);
      out[k] = qnum::detail::mxint_hardware_element(width, p2, in[k]);
    }
  }
}

}  // namespace

void quantize(const MXIntHardwareSpec& s, const Policy&, const float* in, float* out, const Shape& shape, Role,
              cudaStream_t stream) {
  const std::size_t n = detail::check_io(s.name, in, out, shape);
  s.validate();
  qnum::detail::require(!shape.empty(), s.name, ": needs a tensor of rank >= 1, got a scalar");
  const std::int64_t t0 = shape.back(), t1 = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const std::int64_t p1 = s.parallelism.size() == 2 ? s.parallelism[0] : 1, p0 = s.parallelism.back();
  qnum::detail::require(t1 % p1 == 0 && t0 % p0 == 0, s.name, ": parallelism [", p1, ", ", p0,
                        "] does not tile the last two dims [", t1, ", ", t0, "]");
  if (n == 0) return;
  const std::size_t tiles = n / static_cast<std::size_t>(p1 * p0);
  mxint_hardware_kernel<<<detail::grid_for(tiles * 32), detail::kThreads, 0, stream>>>(
      s.width, s.exponent_width, TileGeometry{t1, t0, p1, p0}, in, out, tiles);
  detail::check_launch("mxint_hardware_kernel");
}

}  // namespace qnum::cuda
