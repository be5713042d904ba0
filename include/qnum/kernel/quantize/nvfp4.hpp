// nvfp4 in vector registers (exact, the only mode): the tensor's largest finite |x| as an
// integer max over the bits, then blocks of 16 along each row (for_each_row_block). Per block
// the reference's E4M3 scale code from the block max, the 8 E2M1 magnitudes' values under it
// (BlockValues: the reference's own arithmetic) and the midpoint thresholds as floats; per
// element the E2M1 code is a count of compares — |x| > mid_k (double) is |x| > the largest
// float <= mid_k, and a tie |x| == mid_k (possible only where mid_k is a float) between codes
// k and k + 1 (k odd) moves to the even code — then the value by table lookup with x's sign.
// Blocks with NaN or Inf are NaN, as the reference's NaN scale makes them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

#include "qnum/format/nvfp4.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// The largest finite |x| of x[0, n) as float bits (0 when none), chunks in parallel.
template <class A>
std::int32_t finite_max_bits(const float* x, std::int64_t n) {
  constexpr std::int64_t N = bf<A>::size;
  const std::int64_t chunks = (n + kQuantizeGrain - 1) / kQuantizeGrain;
  std::vector<std::int32_t> part(static_cast<std::size_t>(chunks), 0);
  parallel_for(chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t b = c * kQuantizeGrain, e = std::min(n, b + kQuantizeGrain);
      bi<A> m(0);
      std::int64_t i = b;
      for (; i + N <= e; i += N) {
        const bi<A> a = as_int<A>(bf<A>::load_unaligned(x + i)) & bi<A>(0x7fffffff);
        m = select_i<A>((a > m) & (a < bi<A>(0x7f800000)), a, m);  // Inf and NaN bits are larger
      }
      alignas(64) std::int32_t lanes[bi<A>::size];
      m.store_aligned(lanes);
      std::int32_t r = 0;
      for (std::int32_t l : lanes) r = std::max(r, l);
      for (; i < e; ++i) {
        const auto a = static_cast<std::int32_t>(float_bits(x[i]) & 0x7fffffffu);
        if (a < 0x7f800000) r = std::max(r, a);
      }
      part[static_cast<std::size_t>(c)] = r;
    }
  });
  std::int32_t r = 0;
  for (std::int32_t v : part) r = std::max(r, v);
  return r;
}

/// One block's decision tables under tensor scale t: its E2M1 magnitudes' values and the
/// midpoint thresholds.
struct NVFP4BlockTables {
  alignas(64) std::int32_t value_bits[8];  // the value of magnitude code c (sign added per element)
  float above[7];                          // |x| > mid_k (double) iff |x| > above[k]
  float tie[3];                            // |x| == mid_k for k = 1, 3, 5 (NaN: no float equals it)
  bool zero;                               // st == 0: every element a signed zero

  NVFP4BlockTables(std::uint8_t scale, float t) {
    NVFP4Block b;
    b.scale = scale;
    const double td = t, st = static_cast<double>(b.scale_value()) * td;
    zero = !(st > 0.0);
    double mid_st[7];
    qnum::detail::nvfp4_e2m1_midpoints(st, mid_st);
    for (int k = 0; k < 7; ++k) above[k] = float_at_or_below(mid_st[k]);
    for (int k = 0; k < 3; ++k) {
      const double m = mid_st[2 * k + 1];
      tie[k] = static_cast<double>(static_cast<float>(m)) == m ? static_cast<float>(m)
                                                               : std::numeric_limits<float>::quiet_NaN();
    }
    for (int c = 0; c < 8; ++c)
      value_bits[c] = static_cast<std::int32_t>(float_bits(b.code_value(static_cast<std::uint8_t>(c), t)));
  }
};

/// nvfp4, exact: see the top of the file.
template <class A>
void nvfp4_simd(std::span<const float> in, std::span<float> out, const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto [rows, n] = qnum::detail::nvfp4_rows(shape);
  if (rows == 0) return;
  const float t = qnum::detail::nvfp4_tensor_scale_of(
      bits_float(static_cast<std::uint32_t>(finite_max_bits<A>(in.data(), static_cast<std::int64_t>(in.size())))));
  const double td = t;
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // NaN or Inf: the NaN scale
    const double amax = static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)));
    return {0, static_cast<float>(qnum::detail::nvfp4_e4m3_code(amax / (6.0 * td))), 0.0f};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    const NVFP4BlockTables tab(static_cast<std::uint8_t>(bp.a), t);
    const bi<A> SIGN(static_cast<std::int32_t>(0x80000000u)), ONE(1), ZERO(0);
    for (std::int64_t i = 0; i < len; i += N) {
      const bf<A> v = bf<A>::load_unaligned(x + i);
      const bi<A> sign = as_int<A>(v) & SIGN;
      if (tab.zero) {
        as_float<A>(sign).store_unaligned(y + i);
        continue;
      }
      const bf<A> a = xsimd::abs(v);
      bi<A> c = ZERO;
      for (int k = 0; k < 7; ++k) c += select_i<A>(to_imask<A>(a > bf<A>(tab.above[k])), ONE, ZERO);
      const auto tie = (a == bf<A>(tab.tie[0])) | (a == bf<A>(tab.tie[1])) | (a == bf<A>(tab.tie[2]));
      c += select_i<A>(to_imask<A>(tie), ONE, ZERO);  // between odd k and k + 1: the even code
      as_float<A>(gather_i32<A>(tab.value_bits, c) | sign).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, n, NVFP4Spec::block_size, prep, apply);
}

/// NVFP4Spec's row of the kernel table.
template <>
struct FamilyKernel<NVFP4Spec> {
  template <class A>
  static QuantizePlan plan(const NVFP4Spec& s, const Policy& p, const QuantizeCall& c) {
    return {QuantizePath::simd, [&s, &p, shape = &c.shape](std::span<const float> in, std::span<float> out) {
              in_level([&] { s.validate(p); });
              nvfp4_simd<A>(in, out, *shape);
            }};
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
