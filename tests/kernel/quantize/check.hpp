// The kernel quantize tests (tests/kernel/quantize/<family>.cpp): SIMD quantize kernels
// against the scalar reference Format::quantize, bit for bit (any NaN equals any NaN), for
// every compiled-in instruction set, on random inputs, every code's neighbourhood (value, float
// neighbours, midpoints = ties), log2 decision points, specials, odd sizes, unaligned pointers
// and 1/2/3 threads; and every run-time dispatch level (qnum::kernels: baseline, avx2, avx512)
// this CPU runs, on the same inputs. Blocked and per-row families also on every shared bias's
// code neighbourhood, MASE's tiles and roles, and in place.
// This header holds the shared checks and input sets, defined once in check.cpp, which also
// compiles the kernels of every tested architecture (quantize_arch, quantize_plan): the
// per-family files include quantize.hpp but compile none of its kernels (extern templates),
// so splitting the suite by family costs no kernel build twice.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "qnum/kernel/dispatch.hpp"
#include "qnum/kernel/quantize.hpp"

// The kernels of every tested architecture are compiled once, in check.cpp.
#define QNUM_KERNEL_CHECK_ARCH(KIND, A)                                                                            \
  KIND template void qnum::kernel::quantize_arch<A>(const qnum::Format&, std::span<const float>, std::span<float>, \
                                                    const qnum::Shape&, qnum::Role);                               \
  KIND template qnum::kernel::QuantizePlan qnum::kernel::quantize_plan<A>(const qnum::Format&, const qnum::Shape&, \
                                                                          qnum::Role, bool);
/// Calls M(A) for every listed architecture of TestedArchs (xsimd::default_arch apart).
#if XSIMD_WITH_AVX512BW
#define QNUM_KERNEL_CHECK_AVX512BW(M) M(xsimd::avx512bw)
#else
#define QNUM_KERNEL_CHECK_AVX512BW(M)
#endif
#if XSIMD_WITH_AVX2
#define QNUM_KERNEL_CHECK_AVX2(M) M(xsimd::avx2)
#else
#define QNUM_KERNEL_CHECK_AVX2(M)
#endif
#if XSIMD_WITH_SSE4_2
#define QNUM_KERNEL_CHECK_SSE4_2(M) M(xsimd::sse4_2)
#else
#define QNUM_KERNEL_CHECK_SSE4_2(M)
#endif
#if XSIMD_WITH_SSE2
#define QNUM_KERNEL_CHECK_SSE2(M) M(xsimd::sse2)
#else
#define QNUM_KERNEL_CHECK_SSE2(M)
#endif
#define QNUM_KERNEL_CHECK_LISTED(M) \
  QNUM_KERNEL_CHECK_AVX512BW(M) QNUM_KERNEL_CHECK_AVX2(M) QNUM_KERNEL_CHECK_SSE4_2(M) QNUM_KERNEL_CHECK_SSE2(M)

#ifndef QNUM_KERNEL_CHECK_DEFINITIONS
#define QNUM_KERNEL_CHECK_EXTERN(A) QNUM_KERNEL_CHECK_ARCH(extern, A)
QNUM_KERNEL_CHECK_LISTED(QNUM_KERNEL_CHECK_EXTERN)
QNUM_KERNEL_CHECK_EXTERN(xsimd::default_arch)
#undef QNUM_KERNEL_CHECK_EXTERN
#endif

namespace kernel_check {

using qnum::Format;
using qnum::Policy;

/// Same bit pattern (any two NaNs count as equal), float or double.
template <class T>
bool same_bits(T a, T b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class... A>
struct Archs {};
using TestedArchs = Archs<
#if XSIMD_WITH_AVX512BW
    xsimd::avx512bw,
#endif
#if XSIMD_WITH_AVX2
    xsimd::avx2,
#endif
#if XSIMD_WITH_SSE4_2
    xsimd::sse4_2,
#endif
#if XSIMD_WITH_SSE2
    xsimd::sse2,
#endif
    xsimd::default_arch>;

std::string hex(float v);

/// Counts mismatches of `out` against `ref`; reports the first.
int count_mismatch(const Format& f, const std::vector<float>& in, const std::vector<float>& ref,
                   const std::vector<float>& out, const std::string& what);

void add_with_neighbours(std::vector<float>& v, float x, int ulps = 2);

std::vector<float> random_inputs(std::uint64_t seed);

/// Powers of two, sqrt(2) points and the mase log2 thresholds, each with float neighbours,
/// both signs (also shifted by MASE's epsilons, so value + eps lands on the threshold).
std::vector<float> log2_points();

/// Every code's value of an elementwise format up to 16 bits, its float neighbours, and the
/// midpoints between consecutive values (ties) with theirs; both signs.
std::vector<float> code_neighbourhood(const Format& f);

/// Every run-time dispatch level this CPU can run, on a tensor of `shape`.
int check_dispatch_levels(const Format& f, const std::vector<float>& in, const std::vector<float>& ref,
                          const qnum::Shape& shape, qnum::Role role = qnum::Role::weight);

/// The whole conformance check of one format on one input set.
void check_format(const Format& f, std::vector<float> in);

void check_format_full(const Format& f, std::uint64_t seed = 1);

Format fmt(const std::string& text, Policy base = qnum::exact);
/// `spec` with more keys appended (spec may or may not have keys already).
std::string with(const std::string& spec, const std::string& keys);

/// Every code's neighbourhood of an MX element grid, laid out in blocks of `bs` whose first
/// element is the grid's max (so the shared scale is 2^s), for several scales s.
std::vector<float> mx_neighbourhood(const qnum::MXElement& e, int bs);

void check_blocked(const Format& f, const std::vector<float>& in, std::int64_t cols, bool expect_simd);

/// Every compiled architecture and dispatch level against the reference on one shaped tensor.
void check_shaped(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role,
                  bool expect_simd);

/// quantize(f, x, x) (in place) against the reference out of place.
void check_in_place(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role);

/// Inputs for MASE's blocked formats: random values with specials, whole zero blocks (MASE's
/// zero-block rule), values at and below its 1e-8 pass-through, and exact ties of the element
/// grid 2^(e-M) (k + 1/2) for a spread of block scales.
std::vector<float> mase_block_inputs(std::size_t n, std::uint64_t seed, bool specials);

/// Weight-scale inputs (N(0, 0.02), BERT's initialisation): block_log's biases then exceed 126,
/// so elements and results reach float's subnormals. With exact zeros (pruned weights), a
/// few subnormal elements inside ordinary blocks, and blocks of subnormals only.
std::vector<float> weight_scale_inputs(std::size_t n, std::uint64_t seed);

/// Every element code's value for several shared biases, with float neighbours, ties (the
/// midpoints and, for log, geometric midpoints), both signs, in blocks of `bs` whose first
/// element is that bias's largest value (so the block takes that bias).
std::vector<float> shared_bias_neighbourhood(const Format& f, int bs);

/// Whether an exact block_minifloat/block_log spec runs in vector registers on a tensor of
/// rank r (every dim > 1): nearest rounding (block_log: either nearest) and block_size entries of 1 (or none) on every
/// leading dim (entries are right-aligned; extra leading ones are ignored).
bool expect_row_simd(const std::string& spec, std::size_t r);

/// MASE's blocked formats on every tile shape the kernels meet: 1-D and 2-D weights, 2-D and
/// 3-D activations (mase_block_inputs, with or without specials).
inline void check_mase_tiles(const Format& f, bool specials) {
  check_shaped(f, mase_block_inputs(1000, 1, specials), {1000}, qnum::Role::weight, true);
  check_shaped(f, mase_block_inputs(37 * 50, 2, specials), {37, 50}, qnum::Role::weight, true);
  check_shaped(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, qnum::Role::activation, true);
  check_shaped(f, mase_block_inputs(3 * 20 * 33, 4, specials), {3, 20, 33}, qnum::Role::activation, true);
}

/// A shaped check at 1, 2 and 3 threads on the default architecture.
void check_threads(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role);

}  // namespace kernel_check
