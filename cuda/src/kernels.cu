// Format kernels: each thread calls the QNUM_HD scalar reference, so the device computes the
// CPU's definition (compiled with --fmad=false: no contraction the CPU reference lacks).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>

#include "launch.cuh"
#include "qnum/cuda/check.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/kernel/exact_float32.hpp"
#include "qnum/kernel/log2_thresholds.hpp"

namespace qnum::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

// The policy reaches the kernel as a type: the two bundles as compile-time constants, so the
// reference's branches on rounding / overflow / semantics fold away after inlining (the
// elementwise kernels were instruction-bound at 0.36-0.47 of peak bandwidth on an H100 with a
// runtime policy); any other policy as a runtime value. Same function either way.
struct ExactPolicy {
  __device__ static constexpr Policy get() { return Policy{}; }
};
struct MasePolicy {
  __device__ static constexpr Policy get() { return Policy{Semantics::mase}; }
};
struct RuntimePolicy {
  Policy p;
  __device__ Policy get() const { return p; }
};

/// The reference itself as the element operation.
template <class Spec, class Pol>
struct ReferenceOp {
  Spec s;
  Pol pol;
  __device__ float operator()(float x, std::uint64_t i) const { return qnum::quantize(s, pol.get(), x, i); }
};

/// A float -> float operation (the float32 fast paths) as an element operation.
template <class F>
struct PlainOp {
  F f;
  __device__ float operator()(float x, std::uint64_t) const { return f(x); }
};

/// floor/round of MASE's float32 log2 from the bits and a threshold table in device memory
/// (kernel/log2_thresholds.hpp, built on the host with the CPU's log2): positive normal
/// floats only, anything else (0, subnormals, Inf, NaN) takes torchf's log2 itself.
struct Log2Lookup {
  const std::int32_t* floor_t = nullptr;    // 256 entries, Log2Op::floor
  const std::int32_t* nearest_t = nullptr;  // Log2Op::nearest
  __device__ float floor_log2(float v) const {
    const std::uint32_t b = __float_as_uint(v);
    return qnum::detail::log2_positive_normal(b) ? qnum::detail::log2_op_from_table(floor_t, b)
                                                 : qnum::detail::torchf::Log2Direct{}.floor_log2(v);
  }
  __device__ float round_log2(float v) const {
    const std::uint32_t b = __float_as_uint(v);
    return qnum::detail::log2_positive_normal(b) ? qnum::detail::log2_op_from_table(nearest_t, b)
                                                 : qnum::detail::torchf::Log2Direct{}.round_log2(v);
  }
};

/// The device copy of a threshold table, uploaded once per device and op.
const std::int32_t* device_log2_table(qnum::detail::Log2Op op) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static const std::int32_t* tables[kMaxDevices][3] = {};
  int dev = 0;
  QNUM_CUDA_CHECK(cudaGetDevice(&dev));
  qnum::detail::require(dev >= 0 && dev < kMaxDevices, "qnum::cuda: device ", dev, " out of range");
  const std::lock_guard<std::mutex> lock(mutex);
  const std::int32_t*& slot = tables[dev][static_cast<int>(op)];
  if (!slot) {
    const auto& host = qnum::detail::log2_thresholds(op).t;
    std::int32_t* d = nullptr;
    QNUM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), sizeof host));  // kept for the process
    QNUM_CUDA_CHECK(cudaMemcpy(d, host.data(), sizeof host, cudaMemcpyHostToDevice));
    slot = d;
  }
  return slot;
}

Log2Lookup device_log2_lookup() {
  return {device_log2_table(qnum::detail::Log2Op::floor), device_log2_table(qnum::detail::Log2Op::nearest)};
}

/// MASE's minifloat and log emulation with the log2 decision looked up (same floats).
struct MinifloatMaseOp {
  int exponent_width, mantissa_bits, bias;
  Log2Lookup l2;
  __device__ float operator()(float x, std::uint64_t) const {
    return qnum::detail::minifloat_ieee_mase(x, exponent_width, mantissa_bits, bias, l2);
  }
};
struct LogMaseOp {
  int emin, emax;
  Log2Lookup l2;
  __device__ float operator()(float x, std::uint64_t) const {
    return qnum::detail::log_quantize_mase(x, emin, emax, l2);
  }
};

template <class Op>
__global__ void map_kernel(Op op, const float* in, float* out, std::size_t n, std::uint64_t first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = op(in[i], first + i);
}

/// Four elements per thread per step: one 16-byte load and store (aligned pointers).
template <class Op>
__global__ void map4_kernel(Op op, const float4* in, float4* out, std::size_t n4, std::uint64_t first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n4; v += stride) {
    const float4 x = in[v];
    const std::uint64_t i = first + 4 * v;
    out[v] = make_float4(op(x.x, i), op(x.y, i + 1), op(x.z, i + 2), op(x.w, i + 3));
  }
}

template <class Op>
void launch_map(const Op& op, const float* in, float* out, std::size_t n, std::uint64_t first, cudaStream_t stream) {
  if (n == 0) return;
  qnum::detail::require(in != nullptr && out != nullptr, "qnum::cuda::quantize: null device pointer");
  const bool aligned =
      reinterpret_cast<std::uintptr_t>(in) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const std::size_t n4 = aligned ? n / 4 : 0;
  if (n4) {
    map4_kernel<<<grid_for(n4), kThreads, 0, stream>>>(op, reinterpret_cast<const float4*>(in),
                                                       reinterpret_cast<float4*>(out), n4, first);
    check_launch("map4_kernel");
  }
  if (const std::size_t done = 4 * n4; done < n) {  // misaligned buffers, or the last n % 4 elements
    map_kernel<<<grid_for(n - done), kThreads, 0, stream>>>(op, in + done, out + done, n - done, first + done);
    check_launch("map_kernel");
  }
}

template <class Spec>
void launch_reference(const Spec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
                      cudaStream_t stream) {
  if (p == qnum::exact)
    launch_map(ReferenceOp<Spec, ExactPolicy>{s, {}}, in, out, n, first, stream);
  else if (p == qnum::mase_compat)
    launch_map(ReferenceOp<Spec, MasePolicy>{s, {}}, in, out, n, first, stream);
  else
    launch_map(ReferenceOp<Spec, RuntimePolicy>{s, {p}}, in, out, n, first, stream);
}

template <class Spec>
__global__ void decode_kernel(Spec s, float* out, std::uint32_t n) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += stride) out[c] = qnum::decode(s, c);
}

__global__ void mx_blocks_kernel(MXElement e, Policy p, const float* in, std::size_t n, int bs, std::size_t nblocks,
                                 float* values, std::uint8_t* scales, std::uint16_t* codes) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::size_t warps = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  for (std::size_t b = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; b < nblocks;
       b += warps) {  // b is the same on every lane of the warp
    const std::size_t start = b * static_cast<std::size_t>(bs);
    const int len = static_cast<int>(n - start < static_cast<std::size_t>(bs) ? n - start : bs);
    double amax = 0;
    int special = 0;
    for (int i = lane; i < len; i += 32) {
      const float x = in[start + static_cast<std::size_t>(i)];
      special |= !qnum::detail::is_finite(x);
      amax = fmax(amax, qnum::detail::abs(static_cast<double>(x)));
    }
    for (int off = 16; off > 0; off /= 2) {
      amax = fmax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
      special |= __shfl_xor_sync(0xFFFFFFFFu, special, off);
    }
    if (special) {  // OCP: NaN scale, the whole block is NaN
      for (int i = lane; i < len; i += 32) {
        if (values) values[start + static_cast<std::size_t>(i)] = qnum::detail::kNaN;
        if (codes) codes[start + static_cast<std::size_t>(i)] = 0;
      }
      if (scales && lane == 0) scales[b] = 0xFF;
      continue;
    }
    const int sexp = qnum::detail::mx_exact_scale_exp(e, 8, amax);
    for (int i = lane; i < len; i += 32) {
      const std::size_t k = start + static_cast<std::size_t>(i);
      const float q = qnum::detail::mx_block_element(e, p, sexp, in[k], k);
      if (values) values[k] = static_cast<float>(qnum::detail::scale2(static_cast<double>(q), sexp));
      if (codes) codes[k] = static_cast<std::uint16_t>(qnum::detail::mx_element_code(e, q));
    }
    if (scales && lane == 0) scales[b] = static_cast<std::uint8_t>(sexp + qnum::detail::mx_scale_bias(8));
  }
}

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

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

void quantize(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (const auto f = qnum::detail::FixedExactF32::make(s, p))
    launch_map(PlainOp<qnum::detail::FixedExactF32>{*f}, in, out, n, first, stream);
  else
    launch_reference(s, p, in, out, n, first, stream);
}
void quantize(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (const auto f = qnum::detail::MinifloatExactF32::make(s, p))
    launch_map(PlainOp<qnum::detail::MinifloatExactF32>{*f}, in, out, n, first, stream);
  else if (p == qnum::mase_compat && n > 0)
    launch_map(MinifloatMaseOp{s.exponent_width, s.mantissa_bits(), s.bias(), device_log2_lookup()}, in, out, n, first,
               stream);
  else
    launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const FixedSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const MinifloatSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  launch_reference(s, p, in, out, n, first, stream);
}
void quantize(const MinifloatDenormSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
              std::uint64_t first, cudaStream_t stream) {
  s.validate(p);
  launch_reference(s, p, in, out, n, first, stream);
}
void quantize(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  s.validate();
  if (p == qnum::mase_compat && n > 0)
    launch_map(LogMaseOp{s.emin(), s.emax(), device_log2_lookup()}, in, out, n, first, stream);
  else
    launch_reference(s, p, in, out, n, first, stream);
}
void quantize_reference(const LogSpec& s, const Policy& p, const float* in, float* out, std::size_t n,
                        std::uint64_t first, cudaStream_t stream) {
  s.validate();
  launch_reference(s, p, in, out, n, first, stream);
}
void quantize(const MXElement& e, const Policy& p, const float* in, float* out, std::size_t n, std::uint64_t first,
              cudaStream_t stream) {
  qnum::detail::require(e.is_ocp() && e.width >= 2 && e.width <= 16, "qnum::cuda::quantize: MX element ", e.name(),
                        " is not an OCP element type of at most 16 bits");
  launch_reference(e, p, in, out, n, first, stream);
}

void decode_codes(const MinifloatSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  if (n == 0) return;
  decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, out, n);
  check_launch("decode_kernel");
}
void decode_codes(const FixedSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  if (n == 0) return;
  decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, out, n);
  check_launch("decode_kernel");
}

void decode_codes(const MinifloatDenormSpec& s, float* out, std::uint32_t n, cudaStream_t stream) {
  s.validate();
  if (n == 0) return;
  decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(s, out, n);
  check_launch("decode_kernel");
}

void mx_quantize_blocks(const MXElement& e, const Policy& p, const float* in, std::size_t n, int block_size,
                        float* values, std::uint8_t* scales, std::uint16_t* codes, cudaStream_t stream) {
  qnum::detail::require(block_size >= 1, "qnum::cuda::mx_quantize_blocks: block_size ", block_size, " must be >= 1");
  qnum::detail::require(e.is_ocp() && e.width >= 2 && e.width <= 16, "qnum::cuda::mx_quantize_blocks: element ",
                        e.name(), " is not an OCP element type of at most 16 bits");
  if (n == 0) return;
  const std::size_t nblocks = (n + static_cast<std::size_t>(block_size) - 1) / static_cast<std::size_t>(block_size);
  mx_blocks_kernel<<<grid_for(nblocks * 32), kThreads, 0, stream>>>(e, p, in, n, block_size, nblocks, values, scales,
                                                                    codes);
  check_launch("mx_blocks_kernel");
}

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

namespace {

__global__ void fill_float_bits_kernel(float* out, std::size_t n, std::uint32_t first_bits) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __uint_as_float(first_bits + static_cast<std::uint32_t>(i));
}

__global__ void bit_mismatch_kernel(const float* a, const float* b, std::size_t n, unsigned long long* count,
                                    unsigned long long* first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = a[i], y = b[i];
    if (__float_as_uint(x) != __float_as_uint(y) && !(x != x && y != y)) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

}  // namespace

namespace testing {

void fill_float_bits(float* out, std::size_t n, std::uint32_t first_bits, cudaStream_t stream) {
  if (n == 0) return;
  fill_float_bits_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, first_bits);
  check_launch("fill_float_bits_kernel");
}

BitMismatches bit_mismatches(const float* a, const float* b, std::size_t n, cudaStream_t stream) {
  unsigned long long* d = nullptr;
  QNUM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), 2 * sizeof(unsigned long long)));
  const unsigned long long init[2] = {0, ~0ull};
  unsigned long long host[2] = {0, 0};
  try {
    QNUM_CUDA_CHECK(cudaMemcpyAsync(d, init, sizeof init, cudaMemcpyHostToDevice, stream));
    if (n) {
      bit_mismatch_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, n, d, d + 1);
      check_launch("bit_mismatch_kernel");
    }
    QNUM_CUDA_CHECK(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, stream));
    QNUM_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    cudaFree(d);
    throw;
  }
  cudaFree(d);
  return {host[0], host[1]};
}

}  // namespace testing

}  // namespace qnum::cuda
