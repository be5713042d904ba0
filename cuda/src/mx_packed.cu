// mase-cuda's packed MXINT8 (qnum/cuda/kernels.hpp; formats.md §2.14) on the device: the
// CPU's QNUM_HD group quantize and bf16 dequantize (format/mx_packed.hpp), the GEMMs' weights.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "launch.cuh"
#include "qnum/cuda/kernels.hpp"
#include "qnum/format/mx_packed.hpp"

namespace qnum::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

__global__ void mase_quantize_kernel(const float* in, std::size_t groups, int G, std::int8_t* m, std::uint8_t* s) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride)
    s[g] = qnum::quantize_mxint8_mase_cuda_group(in + g * static_cast<std::size_t>(G), G,
                                                 m + g * static_cast<std::size_t>(G));
}

/// V (8 or 16) elements per thread: one V-byte load of mantissas, V/8 16-byte stores of bf16
/// (needs n % V == 0, G % V == 0 and aligned pointers; checked by the launcher). 16 per
/// thread keeps more bytes in flight per load (8 per thread reached 0.68 of peak on an H100).
template <int V>
__global__ void mase_dequantize_vec_kernel(const std::int8_t* m, const std::uint8_t* s, std::size_t nv, int G,
                                           std::uint16_t* out) {
  using Load = std::conditional_t<V == 16, uint4, uint2>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nv; v += stride) {
    const Load raw = reinterpret_cast<const Load*>(m)[v];
    const std::uint8_t S = s[(v * V) / static_cast<std::size_t>(G)];  // G % V == 0: one group
    std::uint32_t in_words[V / 4];
    std::memcpy(in_words, &raw, sizeof raw);
    std::uint32_t w[V / 2];
    for (int j = 0; j < V / 2; ++j) {
      const std::uint32_t word = in_words[j / 2];
      const int sh = (j % 2) * 16;
      const auto lo = static_cast<std::int8_t>((word >> sh) & 0xFFu);
      const auto hi = static_cast<std::int8_t>((word >> (sh + 8)) & 0xFFu);
      w[j] = static_cast<std::uint32_t>(qnum::dequantize_mxint8_to_bf16_bits(lo, S)) |
             (static_cast<std::uint32_t>(qnum::dequantize_mxint8_to_bf16_bits(hi, S)) << 16);
    }
    for (int q = 0; q < V / 8; ++q)
      reinterpret_cast<uint4*>(out)[v * (V / 8) + q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
  }
}

__global__ void mase_dequantize_kernel(const std::int8_t* m, const std::uint8_t* s, std::size_t n, int G,
                                       std::uint16_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = qnum::dequantize_mxint8_to_bf16_bits(m[i], s[i / static_cast<std::size_t>(G)]);
}

}  // namespace

namespace {
void check_mase_args(const char* what, std::size_t n, int G) {
  qnum::detail::require(G > 0, what, ": group_size ", G, " must be positive");
  qnum::detail::require(n % static_cast<std::size_t>(G) == 0, what, ": ", n,
                        " elements are not divisible by group_size ", G);
}
}  // namespace

void mxint8_mase_cuda_quantize(const float* in, std::size_t n, int group_size, std::int8_t* mantissa,
                               std::uint8_t* scale, cudaStream_t stream) {
  check_mase_args("qnum::cuda::mxint8_mase_cuda_quantize", n, group_size);
  if (n == 0) return;
  const std::size_t groups = n / static_cast<std::size_t>(group_size);
  mase_quantize_kernel<<<grid_for(groups), kThreads, 0, stream>>>(in, groups, group_size, mantissa, scale);
  check_launch("mase_quantize_kernel");
}

void mxint8_mase_cuda_dequantize_bf16(const std::int8_t* mantissa, const std::uint8_t* scale, std::size_t n,
                                      int group_size, std::uint16_t* out, cudaStream_t stream) {
  check_mase_args("qnum::cuda::mxint8_mase_cuda_dequantize_bf16", n, group_size);
  if (n == 0) return;
  const auto vec = [&](std::size_t v) {
    return n % v == 0 && group_size % v == 0 && reinterpret_cast<std::uintptr_t>(mantissa) % v == 0 &&
           reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  };
  if (vec(16)) {
    mase_dequantize_vec_kernel<16><<<grid_for(n / 16), kThreads, 0, stream>>>(mantissa, scale, n / 16, group_size, out);
    check_launch("mase_dequantize_vec_kernel<16>");
  } else if (vec(8)) {
    mase_dequantize_vec_kernel<8><<<grid_for(n / 8), kThreads, 0, stream>>>(mantissa, scale, n / 8, group_size, out);
    check_launch("mase_dequantize_vec_kernel<8>");
  } else {
    mase_dequantize_kernel<<<grid_for(n), kThreads, 0, stream>>>(mantissa, scale, n, group_size, out);
    check_launch("mase_dequantize_kernel");
  }
}

}  // namespace qnum::cuda
