// Elementwise kernels shared by the elementwise families (fixed, minifloat, minifloat_denorm,
// log, MX elements) and the binary family's elementwise modes (internal; not installed): each
// thread calls an element operation, usually the QNUM_HD scalar reference itself, so the
// device computes the CPU's definition (compiled with --fmad=false: no contraction the CPU
// reference lacks). Include it after the family's format header: the templates below name
// qnum::quantize, whose overloads must be declared first.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "../launch.cuh"
#include "qnum/core/policy.hpp"

namespace qnum::cuda::detail {

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

/// out[i] = op(in[i], first + i), grid-stride.
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

/// out[i] = op(in[i], i) with one grid-stride kernel named `kernel` in errors (the binary
/// family's elementwise modes; pointers checked by the caller).
template <class Op>
void launch_indexed(const char* kernel, const Op& op, const float* in, float* out, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, in, out, n, std::uint64_t{0});
  check_launch(kernel);
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

}  // namespace qnum::cuda::detail
