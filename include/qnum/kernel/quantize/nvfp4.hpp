// nvfp4 in vector registers (exact, the only mode): the tensor's largest finite |x| as an
// integer max over the bits, then blocks of 16 along each row (for_each_row_block). Per block
// the reference's E4M3 scale code from the block max, the 8 E2M1 magnitudes' values under it
// (NVFP4BlockTables: the reference's own arithmetic) and the midpoint thresholds as floats; on
// larger tensors the code is a count of per-call bounds (NVFP4ScaleCodes) and the tables are
// built once per code (they depend only on the code and the tensor scale). Per element the
// E2M1 code is a count of compares — |x| > mid_k (double) is |x| > the largest float <= mid_k,
// and a tie |x| == mid_k (possible only where mid_k is a float) between codes k and k + 1
// (k odd) moves to the even code — then the value by table lookup with x's sign. Blocks with
// NaN or Inf are NaN, as the reference's NaN scale makes them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

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

/// The block scale code the reference gives a block max of bits mb under tensor scale t,
/// nvfp4_e4m3_code(amax / (6 t)), as a count of bounds: that code never decreases as amax
/// grows (a correctly rounded quotient and a nearest rounding onto a grid both keep order), so
/// code >= c exactly when mb >= bound[c], the smallest finite float's bits whose code is >= c.
/// Each bound is found with the reference itself, by a search bracketed around 6 t times the
/// midpoint below E4M3 value c (the whole range where the bracket misses).
struct NVFP4ScaleCodes {
  std::int32_t bound[128];  // bound[c], c = 1..126; bound[0] = 0; 0x7f800000: no finite float

  explicit NVFP4ScaleCodes(float t) {
    const double td = t;
    const auto code = [td](std::int32_t b) {
      return qnum::detail::nvfp4_e4m3_code(static_cast<double>(bits_float(static_cast<std::uint32_t>(b))) / (6.0 * td));
    };
    const auto scale_value = [](int c) {
      NVFP4Block b;
      b.scale = static_cast<std::uint8_t>(c);
      return static_cast<double>(b.scale_value());
    };
    constexpr std::int32_t kNone = 0x7f800000;
    bound[0] = 0;
    bound[127] = kNone;
    std::int32_t start = 0;  // every b < start has a code < c
    for (int c = 1; c < 127; ++c) {
      const double mid = 0.5 * (scale_value(c - 1) + scale_value(c));
      const auto guess = static_cast<std::int32_t>(float_bits(static_cast<float>(6.0 * td * mid)));
      std::int32_t lo = std::max(start, guess - 8), hi = std::min(kNone, guess + 8);
      if (!(lo == start || code(lo - 1) < c) || !(hi == kNone || code(hi) >= c)) lo = start, hi = kNone;
      while (lo < hi) {  // the smallest b in [lo, hi) with code(b) >= c, or hi
        const std::int32_t m = lo + (hi - lo) / 2;
        if (code(m) >= c)
          hi = m;
        else
          lo = m + 1;
      }
      bound[c] = start = lo;
    }
  }
  int operator()(std::int32_t mb) const {
    int c = 0;
    for (int step = 64; step > 0; step /= 2) c += bound[c + step] <= mb ? step : 0;
    return c;
  }
};

/// Tensors of at least this many blocks take the per-call tables (the scale-code bounds and one
/// NVFP4BlockTables per code, tens of microseconds to build); smaller ones run the reference's
/// scale code and build each block's tables.
inline constexpr std::int64_t kNVFP4TableBlocks = 1024;

/// nvfp4, exact: see the top of the file.
template <class A>
void nvfp4_simd(std::span<const float> in, std::span<float> out, const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto [rows, n] = qnum::detail::nvfp4_rows(shape);
  if (rows == 0) return;
  const float t = qnum::detail::nvfp4_tensor_scale_of(
      bits_float(static_cast<std::uint32_t>(finite_max_bits<A>(in.data(), static_cast<std::int64_t>(in.size())))));
  const double td = t;
  const std::int64_t blocks = rows * ((n + NVFP4Spec::block_size - 1) / NVFP4Spec::block_size);
  std::optional<NVFP4ScaleCodes> codes;
  std::vector<NVFP4BlockTables> by_code;  // a block's tables depend only on its scale code and t
  if (blocks >= kNVFP4TableBlocks) {
    codes.emplace(t);
    by_code.reserve(NVFP4Spec::nan_scale);
    for (int c = 0; c < NVFP4Spec::nan_scale; ++c) by_code.emplace_back(static_cast<std::uint8_t>(c), t);
  }
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb >= 0x7f800000) return {1, 0.0f, 0.0f};  // NaN or Inf: the NaN scale
    if (codes) return {0, static_cast<float>((*codes)(mb)), 0.0f};
    const double amax = static_cast<double>(bits_float(static_cast<std::uint32_t>(mb)));
    return {0, static_cast<float>(qnum::detail::nvfp4_e4m3_code(amax / (6.0 * td))), 0.0f};
  };
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    const auto code = static_cast<std::uint8_t>(bp.a);
    std::optional<NVFP4BlockTables> own;
    const NVFP4BlockTables& tab = by_code.empty() ? own.emplace(code, t) : by_code[code];
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
      as_float<A>(lookup8_i32<A>(tab.value_bits, c) | sign).store_unaligned(y + i);
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
