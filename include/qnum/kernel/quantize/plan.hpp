// The kernel plan: which implementation runs one tensor quantize, decided once per call from
// (spec, policy, shape, role, in place) for one instruction set `A`. The path report
// (kernel::quantize_path) and the run (kernel::quantize_arch) both read the same plan.
//
// The kernels form a table with one row per family: kernel/quantize/<family>.hpp specialises
// FamilyKernel<Spec> with `template <class A> static QuantizePlan plan(spec, policy, call)`.
// A family without a row runs the tensor reference (Format::quantize), single-threaded.
// Also here: the elementwise driver the elementwise rows share — the vector loop over fixed
// chunks (chunk boundaries depend only on the size, so results never depend on the thread
// count), vector tails through the scalar reference.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "qnum/core/policy.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/kernel/quantize/simd.hpp"
#include "qnum/kernel/quantize_path.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// Elements per parallel chunk: fixed, so chunk boundaries never depend on the thread count.
inline constexpr std::int64_t kQuantizeGrain = 1 << 16;

/// What a plan is decided from besides the spec and the policy.
struct QuantizeCall {
  const Shape& shape;
  Role role = Role::weight;
  bool in_place = false;  // `out` is `in` (a few kernels read inputs after writing outputs)
};

}  // namespace detail

/// One tensor quantize, decided: the path quantize_path reports and what quantize_arch runs
/// (`run` empty: the tensor reference, Format::quantize). The closure refers to the call's
/// spec, policy and shape: run it while they live.
struct QuantizePlan {
  QuantizePath path = QuantizePath::reference;
  std::function<void(std::span<const float> in, std::span<float> out)> run;
};

namespace detail {

/// Runs f() with everything it calls inlined into this level's own code. Kernels check their
/// spec through it: an out-of-line copy of an inline function such as a spec's validate(),
/// compiled for AVX in a dispatch level, would be a weak symbol any caller in the program may
/// be bound to (kernel.isa_isolation).
template <class F>
[[gnu::flatten]] void in_level(F&& f) {
  f();
}

/// A plan whose run checks the spec (in_level), then runs kernel(in, out): the blocked
/// families' rows.
template <class Spec, class Kernel>
QuantizePlan checked_plan(QuantizePath path, const Spec& s, Kernel kernel) {
  return {path, [&s, kernel](std::span<const float> in, std::span<float> out) {
            in_level([&] { s.validate(); });
            kernel(in, out);
          }};
}

/// A family's row of the kernel table (specialised in kernel/quantize/<family>.hpp); the
/// primary template has no plan: the family runs the reference.
template <class Spec>
struct FamilyKernel {};

// ---- the elementwise driver ---------------------------------------------------------------
// An elementwise kernel K has `template <class A> bf<A> apply(bf<A>) const` and
// `float scalar(float, i)` (the reference, for tails).

/// The vector loop over [begin, end): full batches, then the reference for the tail. Streamed
/// (stream_output): the reference up to the first batch-aligned output, then streamed stores.
template <class A, class K>
void run_simd(const K& kernel, const float* in, float* out, std::int64_t begin, std::int64_t end, bool stream) {
  constexpr std::int64_t n = bf<A>::size;
  const K k = kernel;  // a local copy: stores to `out` cannot alias it, its fields stay in registers
  std::int64_t i = begin;
  // Software prefetch ~2 KB ahead: long kernels keep few loads in flight, and without it the
  // loop runs at memory latency on machines whose hardware prefetcher does not keep up.
  if (stream) {
    for (; i < end && !batch_aligned<A>(out + i); ++i) out[i] = k.scalar(in[i], static_cast<std::uint64_t>(i));
    for (; i + n <= end; i += n) {
      __builtin_prefetch(in + i + 512);
      store_stream<A>(k.template apply<A>(bf<A>::load_unaligned(in + i)), out + i);
    }
    stream_fence();
  }
  for (; i + n <= end; i += n) {
    __builtin_prefetch(in + i + 512);
    k.template apply<A>(bf<A>::load_unaligned(in + i)).store_unaligned(out + i);
  }
  for (; i < end; ++i) out[i] = k.scalar(in[i], static_cast<std::uint64_t>(i));
}

template <class A, class K>
void run_threaded(const K& k, std::span<const float> in, std::span<float> out) {
  const float* src = in.data();
  float* dst = out.data();
  const bool stream = stream_output(in, out);
  parallel_for(static_cast<std::int64_t>(in.size()), kQuantizeGrain,
               [&](std::int64_t b, std::int64_t e) { run_simd<A>(k, src, dst, b, e, stream); });
}

/// The vector path of an elementwise kernel, threaded.
template <class A, class K>
QuantizePlan elementwise_simd(const K& k) {
  return {QuantizePath::simd, [k](std::span<const float> in, std::span<float> out) { run_threaded<A>(k, in, out); }};
}

/// The scalar reference per element, keyed by the flat index, threaded (policies the vector
/// code does not cover: stochastic and other directed roundings, wrap, extreme biases).
/// `element(x, i)` is the family's qnum::quantize(spec, policy, x, i).
template <class Element>
QuantizePlan elementwise_scalar(Element element) {
  return {QuantizePath::scalar, [element](std::span<const float> in, std::span<float> out) {
            const float* src = in.data();
            float* dst = out.data();
            parallel_for(static_cast<std::int64_t>(in.size()), kQuantizeGrain, [&](std::int64_t b, std::int64_t e) {
              for (std::int64_t i = b; i < e; ++i) dst[i] = element(src[i], static_cast<std::uint64_t>(i));
            });
          }};
}

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
