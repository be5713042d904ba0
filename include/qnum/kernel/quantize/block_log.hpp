// block_log. exact, nearest rounding, blocks inside one row: exponents from the bits in
// vector registers (a wide variant for blocks reaching below 2^-126); other exact layouts and
// roundings: the reference's own per-block code (block_log_encode_exact / decode_exact),
// threaded over blocks. mase: every MASE tile in vector registers (per-bias tables, cached).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "qnum/format/block_log.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// block_log exact, nearest: exponents from the bits (m >= sqrt 2 rounds up; m^2 = 2 has no
/// float), clamped to [-b, top-b]; zeros -> +2^-b. Blocks whose range reaches below 2^-126
/// (the usual case for weights: a block max near 2^-5 gives b = top + 5) take the wide
/// variant (subnormal inputs normalised by an exact 2^24, outputs down to 2^-149 and 0 below);
/// only blocks with exponents above 127 run the reference codec.
template <class A>
void block_log_simd(const BlockLogSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                    const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int top = s.top();
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    // (the bias from the max's bits measured faster in cache but 12% slower from memory here:
    // the reference's double steps stay)
    const int b = qnum::detail::block_log_bias_exact(s, scan_of_bits(mb));
    if (top - b > 127) return {2, 0.0f, 0.0f};
    return {-b < -126 ? 3 : 0, static_cast<float>(-b), static_cast<float>(top - b)};
  };
  // out of line (noinline): for_each_row_block's grouped loops stay small; inlined, this kernel
  // ran ~30% slower (docs/perf.md, 2026-11-28)
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) __attribute__((noinline)) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2)
      return reference_block<BlockLogSpec, qnum::detail::block_log_encode_exact, qnum::detail::block_log_decode_exact>(
          s, p, x, y, len);
    const auto emin = static_cast<std::int32_t>(bp.a), emax = static_cast<std::int32_t>(bp.b);
    const bi<A> MAG(0x7fffffff), SIGN(static_cast<std::int32_t>(0x80000000u)), MANT(0x7fffff), ZERO(0);
    if (bp.kind == 3) {  // emin < -126: subnormal inputs and outputs
      for (std::int64_t i = 0; i < len; i += N) {
        const bi<A> bits = as_int<A>(bf<A>::load_unaligned(x + i));
        const bi<A> a = bits & MAG;
        const auto sub = a < bi<A>(0x00800000);
        // a subnormal magnitude times 2^24 is normal and exact: the same mantissa, exponent - 24
        const bi<A> an = select_i<A>(sub, as_int<A>(as_float<A>(a) * bf<A>(0x1p24f)), a);
        const bi<A> up = select_i<A>((an & MANT) >= bi<A>(kSqrt2Mantissa), bi<A>(1), ZERO);
        bi<A> e = (an >> 23) - select_i<A>(sub, bi<A>(127 + 24), bi<A>(127)) + up;
        e = clamp_i<A>(select_i<A>(a == ZERO, bi<A>(emin), e), emin, emax);  // +-0 -> +2^emin
        const bi<A> sgn = select_i<A>(a == ZERO, ZERO, bits & SIGN);
        as_float<A>(pow2_wide_bits_i<A>(e) | sgn).store_unaligned(y + i);
      }
      return;
    }
    for (std::int64_t i = 0; i < len; i += N) {
      const bi<A> bits = as_int<A>(bf<A>::load_unaligned(x + i));
      const bi<A> a = bits & MAG;
      const bi<A> up = select_i<A>((a & MANT) >= bi<A>(kSqrt2Mantissa), bi<A>(1), ZERO);
      // zero and subnormal magnitudes give e <= -126 <= emin: clamped there, as the reference
      const bi<A> e = clamp_i<A>((a >> 23) - bi<A>(127) + up, emin, emax);
      const bi<A> sgn = select_i<A>(a == ZERO, ZERO, bits & SIGN);  // +-0 -> +2^emin
      as_float<A>(((e + bi<A>(127)) << 23) | sgn).store_unaligned(y + i);
    }
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

/// MASE block_log's per-bias constants, built once per (W, bias width) for the process (a
/// call used to build all 2^bw of them, ~20 us: more than quantizing a 1K-element tensor):
/// the offset c = 2^-b · 0.1f, the log2 lookup, the exponent that x = ±0 gets when c is
/// subnormal, and which kernel runs the bias.
struct BlockLogMaseTables {
  enum Kind : std::uint8_t {
    narrow,  // exponents [-b, top - b] inside float's normal range
    wide,    // -b < -126 <= top - b <= 127: subnormal offsets and results
    scalar,  // the element function (exponents above 127, or every one below -126)
  };
  std::vector<Log2Lookup> lk;  // nearest, clamped to [max(-b, -126), top - b]
  std::vector<float> offset;
  std::vector<std::int32_t> zero_e;  // clamp(round(log2 c), -b, top - b)
  std::vector<Kind> kind;

  explicit BlockLogMaseTables(const BlockLogSpec& s) {
    namespace qd = qnum::detail;
    const int top = s.top(), nb = s.bias_max() + 1;
    lk.resize(static_cast<std::size_t>(nb));
    offset.resize(static_cast<std::size_t>(nb));
    zero_e.resize(static_cast<std::size_t>(nb));
    kind.resize(static_cast<std::size_t>(nb));
    for (int b = 0; b < nb; ++b) {
      const auto i = static_cast<std::size_t>(b);
      offset[i] = qd::mase_exp2(static_cast<float>(-b)) * 0.1f;
      const float ez =
          qd::mase_clamp(qd::mase_round(qd::mase_log2(offset[i])), static_cast<float>(-b), static_cast<float>(top - b));
      zero_e[i] = static_cast<std::int32_t>(ez);
      kind[i] = top - b > 127 || top - b < -126 ? scalar : (-b >= -126 ? narrow : wide);
      if (kind[i] != scalar) lk[i] = Log2Lookup(Log2Op::nearest, std::max(-b, -126), top - b);
    }
  }
  /// The tables of s (W and bias width identify them), shared by every call.
  static const BlockLogMaseTables& of(const BlockLogSpec& s) {
    constexpr int kW = 8, kBW = 8;  // W in [2, 9], bias width in [1, 8] (validated)
    static std::array<std::once_flag, kW * kBW> once;
    static std::array<std::unique_ptr<const BlockLogMaseTables>, kW * kBW> tables;
    const auto k = static_cast<std::size_t>((s.width - 2) * kBW + (s.exponent_bias_width - 1));
    std::call_once(once.at(k), [&] { tables[k] = std::make_unique<const BlockLogMaseTables>(s); });
    return *tables[k];
  }
};

/// MASE block_log: the bias as block_log_quantize_mase computes it; elements by MASE's log rule
/// with c = 2^-b * 0.1f (float) and round(log2) from the thresholds; the wide kernel where
/// -b < -126 (weights: a block max near 2^-5 gives b = top + 5).
template <class A>
void block_log_mase_simd(const BlockLogSpec& s, std::span<const float> in, std::span<float> out, const Shape& shape,
                         Role role) {
  namespace qd = qnum::detail;
  using T = BlockLogMaseTables;
  constexpr std::int64_t N = bf<A>::size;
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const float top = static_cast<float>(s.top()), bmax = static_cast<float>(s.bias_max());
  // MASE's offset 2^-b · 0.1f is kept per bias: it is subnormal for the usual biases (b near
  // 127), and a multiply with a subnormal result per block took a third of the kernel's time.
  const T& tab = T::of(s);
  const bool fold = L.mase_fold;
  const std::int32_t* ceil_t = log2_thresholds(Log2Op::ceil).t.data();  // looked up per block
  const std::int32_t itop = s.top(), ibmax = s.bias_max();
  auto bias_of = [&](float block_max) {  // clamp(top - ceil(log2 max), 0, bmax), integers on the bits
    const std::uint32_t mb = float_bits(block_max);
    if (qd::log2_positive_normal(mb)) [[likely]] {
      const auto f = static_cast<std::int32_t>(mb >> 23);
      const std::int32_t lg = f - 127 + (static_cast<std::int32_t>(mb) >= ceil_t[f] ? 1 : 0);
      return static_cast<float>(std::clamp(itop - lg, 0, ibmax));
    }
    return qd::mase_clamp(top - log2_op(Log2Op::ceil, block_max), 0.0f, bmax);
  };
  auto scalar_run = [&](const float* x, float* y, std::int64_t len, float bias) {
    for (std::int64_t i = 0; i < len; ++i) y[i] = qd::mase_fold_add(qd::log_mase_element(s.width, bias, x[i]), fold);
  };
  auto run_biased = [&](const float* x, float* y, std::int64_t len, float bias) __attribute__((always_inline)) {
    if (bias != bias) [[unlikely]]
      return scalar_run(x, y, len, bias);
    const auto b = static_cast<std::size_t>(bias);
    const T::Kind kind = tab.kind[b];
    const Log2Lookup& l = tab.lk[b];
    const bf<A> C(tab.offset[b]);
    std::int64_t i = 0;
    if (kind == T::narrow) {
      for (; i + N <= len; i += N) {
        const bf<A> v = bf<A>::load_unaligned(x + i);
        const bi<A> f = log2_exponent_field<A>(xsimd::abs(v) + C, l);
        bf<A> q = xsimd::select(xsimd::isnan(v), v, signed_pow2_field_i<A>(v + C, f));
        if (fold) q = bf<A>(0.0f) + q;
        q.store_unaligned(y + i);
      }
    } else if (kind == T::wide) {
      const bi<A> EZ(tab.zero_e[b]), SUB(0x00800000), ONE(0x3f800000);
      for (; i + N <= len; i += N) {
        const bf<A> v = bf<A>::load_unaligned(x + i);
        const bf<A> w = xsimd::abs(v) + C;
        const bi<A> wb = as_int<A>(w);
        const auto sub = wb < SUB;  // |x| + c subnormal: x = ±0 (then w = c), or a subnormal x
        if (xsimd::any(sub & (as_int<A>(xsimd::abs(v)) != bi<A>(0)))) [[unlikely]] {
          scalar_run(x + i, y + i, N, bias);
          continue;
        }
        const bi<A> e = select_i<A>(sub, EZ, log2_exponent<A>(as_float<A>(select_i<A>(sub, ONE, wb)), l));
        bf<A> q = xsimd::select(xsimd::isnan(v), v, signed_pow2_wide_i<A>(v + C, e));
        if (fold) q = bf<A>(0.0f) + q;
        q.store_unaligned(y + i);
      }
    }
    if (i < len) scalar_run(x + i, y + i, len - i, bias);
  };
  if (mase_row_local_runs<A>(L, in, out, bias_of, run_biased)) return;
  mase_tile_runs<A>(L, in, out, bias_of, run_biased);
}

/// BlockLogSpec's row of the kernel table.
template <>
struct FamilyKernel<BlockLogSpec> {
  template <class A>
  static QuantizePlan plan(const BlockLogSpec& s, const Policy& p, const QuantizeCall& c) {
    const Shape* shape = &c.shape;
    if (p.is_mase()) {
      if (!mase_tiles_accepted(c.shape, c.role)) return {};
      return checked_plan(QuantizePath::simd, s,
                          [&s, shape, role = c.role](std::span<const float> in, std::span<float> out) {
                            block_log_mase_simd<A>(s, in, out, *shape, role);
                          });
    }
    if ((p.rounding == Rounding::nearest_even || p.rounding == Rounding::nearest_away) && !c.shape.empty() &&
        blocks_inside_rows(exact_block_layout(c.shape, s.block_size)))
      return checked_plan(QuantizePath::simd, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
        block_log_simd<A>(s, p, in, out, *shape);
      });
    return checked_plan(QuantizePath::scalar, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
      quantize_blocks_exact_threaded<BlockLogSpec, qnum::detail::block_log_encode_exact,
                                     qnum::detail::block_log_decode_exact>(s, p, in, out, *shape);
    });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
