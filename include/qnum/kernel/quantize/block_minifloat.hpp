// block_minifloat. exact, nearest even, blocks inside one row: in vector registers, one
// GridKernel per shared bias (cached); other exact layouts and roundings: the reference's own
// per-block code (block_minifloat_encode_exact / decode_exact), threaded over blocks. mase:
// every MASE tile in vector registers (MinifloatMaseKernel per bias, cached).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <vector>

#include "qnum/format/block_minifloat.hpp"
#include "qnum/kernel/quantize/grid.hpp"
#include "qnum/kernel/quantize/minifloat.hpp"
#include "qnum/kernel/quantize/walks.hpp"

namespace qnum::kernel {
inline namespace QNUM_KERNEL_ISA_NS {
namespace detail {

/// block_minifloat exact's grid kernels, one per bias b in [bias_min, bias_max], built once per
/// (W, E, bias width, policy) for the process (a call used to build them: ~3 us, more than
/// quantizing a 1K-element tensor).
inline const std::vector<GridKernel<MinifloatSpec>>& block_minifloat_grid_kernels(const BlockMinifloatSpec& s,
                                                                                  const Policy& p) {
  struct Entry {
    int width, exponent_width, bias_width;
    Policy policy;
    std::vector<GridKernel<MinifloatSpec>> grid;
  };
  static std::mutex mutex;
  static std::deque<Entry> cache;  // a deque: references to entries stay valid as it grows
  const std::lock_guard lock(mutex);
  for (const Entry& e : cache)
    if (e.width == s.width && e.exponent_width == s.exponent_width && e.bias_width == s.exponent_bias_width &&
        e.policy == p)
      return e.grid;
  Entry& e = cache.emplace_back(Entry{s.width, s.exponent_width, s.exponent_bias_width, p, {}});
  // b <= 2^(bw-1)-1 <= 127: emin = 1-b >= -126; b >= 2^E-1-127 (the Inf bias): max < 2^128
  for (int b = s.bias_min(false); b <= s.bias_max(false); ++b)
    e.grid.emplace_back(MinifloatSpec{}, p, qnum::detail::block_minifloat_grid(s, b, p), false);
  return e.grid;
}

/// block_minifloat exact, nearest even: one grid kernel per bias b (2^bw of them, cached).
template <class A>
void block_minifloat_simd(const BlockMinifloatSpec& s, const Policy& p, std::span<const float> in, std::span<float> out,
                          const Shape& shape) {
  constexpr std::int64_t N = bf<A>::size;
  const auto L = exact_block_layout(shape, s.block_size);
  const std::int64_t row = shape.back(), bs = std::max<std::int64_t>(L.tile.back(), 1);
  const int bmin = s.bias_min(false), bmax = s.bias_max(false), top_field = (1 << s.exponent_width) - 1;
  const std::vector<GridKernel<MinifloatSpec>>& grid = block_minifloat_grid_kernels(s, p);
  // GridKernel's subnormal magic 2^(emin - (M+1) + 24) must be a float: blocks of a bias
  // below this (a max above ~2^(104+M)) run the reference codec
  const int b_vector = -102 - s.mantissa_bits();
  auto prep = [&](std::int32_t mb) -> BlockParams {
    if (mb > 0x7f800000) return {1, 0.0f, 0.0f};  // NaN block
    // a normal max: ilog2 from its bits (the reference's double path otherwise)
    const int b = mb >= 0x00800000 && mb < 0x7f800000 ? std::clamp(top_field - ((mb >> 23) - 127), bmin, bmax)
                                                      : qnum::detail::block_minifloat_bias_exact(s, scan_of_bits(mb));
    if (b < b_vector) return {2, 0.0f, 0.0f};
    return {0, static_cast<float>(b - bmin), 0.0f};
  };
  // inlined into for_each_row_block (unlike the MX and block_log rows): out of line it ran ~5%
  // slower on a quiet machine (docs/perf.md, 2026-11-28)
  auto apply = [&](const float* x, float* y, std::int64_t len, const BlockParams& bp) {
    if (bp.kind == 1) return fill_nan(y, len);
    if (bp.kind == 2)
      return reference_block<BlockMinifloatSpec, qnum::detail::block_minifloat_encode_exact,
                             qnum::detail::block_minifloat_decode_exact>(s, p, x, y, len);
    const GridKernel<MinifloatSpec>& g = grid[static_cast<std::size_t>(bp.a)];  // by reference: no copy per block
    for (std::int64_t i = 0; i < len; i += N) g.template apply<A>(bf<A>::load_unaligned(x + i)).store_unaligned(y + i);
  };
  for_each_row_block<A>(in, out, row, bs, prep, apply);
}

/// MinifloatMaseKernel for minifloat_ieee(W, E) with each bias b in [0, 126], built once per
/// (W, E) for the process (a call used to build them: ~10 us, more than quantizing a
/// 1K-element tensor).
inline const std::vector<MinifloatMaseKernel>& block_minifloat_mase_kernels(const BlockMinifloatSpec& s) {
  constexpr int kW = 23, kE = 6;  // W in [2, 24], E in [1, 6] (validated)
  static std::array<std::once_flag, kW * kE> once;
  static std::array<std::vector<MinifloatMaseKernel>, kW * kE> kernels;
  const auto i = static_cast<std::size_t>((s.width - 2) * kE + (s.exponent_width - 1));
  std::call_once(once.at(i), [&] {
    for (int b = 0; b <= 126; ++b)
      kernels[i].emplace_back(MinifloatSpec{s.width, s.exponent_width, b, Specials::none}, mase_compat);
  });
  return kernels[i];
}

/// MASE block_minifloat: the bias as block_minifloat_quantize_mase computes it; elements by
/// MinifloatMaseKernel for minifloat_ieee(W, E) with that bias (bias <= 126).
template <class A>
void block_minifloat_mase_simd(const BlockMinifloatSpec& s, std::span<const float> in, std::span<float> out,
                               const Shape& shape, Role role) {
  namespace qd = qnum::detail;
  constexpr std::int64_t N = bf<A>::size;
  const auto L = mase_block_layout(s.name, shape, s.block_size, role);
  const float bmax = static_cast<float>(s.bias_max(true));
  const std::vector<MinifloatMaseKernel>& k = block_minifloat_mase_kernels(s);
  const bool fold = L.mase_fold;
  const std::int32_t* floor_t = log2_thresholds(Log2Op::floor).t.data();  // looked up per block
  const std::int32_t ibmax = s.bias_max(true);
  auto bias_of = [&](float block_max) {  // clamp(floor(log2 max), 0, bmax), integers on the bits
    const std::uint32_t mb = float_bits(block_max);
    if (qd::log2_positive_normal(mb)) [[likely]] {
      const auto f = static_cast<std::int32_t>(mb >> 23);
      const std::int32_t lg = f - 127 + (static_cast<std::int32_t>(mb) >= floor_t[f] ? 1 : 0);
      return static_cast<float>(std::clamp(lg, 0, ibmax));
    }
    return qd::mase_clamp(log2_op(Log2Op::floor, block_max), 0.0f, bmax);
  };
  // Elements the vector kernel does not take (a tail shorter than a vector, a bias above 126
  // or NaN) through the reference's element function; kept out of the hot loop.
  auto run_reference = [&](const float* x, float* y, std::int64_t len, float bias) {
    for (std::int64_t i = 0; i < len; ++i)
      y[i] = qd::mase_fold_add(qd::minifloat_ieee_mase_element(s.width, s.exponent_width, bias, x[i]), fold);
  };
  auto run_biased = [&](const float* x, float* y, std::int64_t len, float bias) __attribute__((always_inline)) {
    if (!(bias <= 126.0f)) [[unlikely]]  // NaN too
      return run_reference(x, y, len, bias);
    // by reference: a copy (its 128-byte threshold window included) per block of 16
    // elements was 30% of the kernel's time
    const MinifloatMaseKernel& kk = k[static_cast<std::size_t>(bias)];
    const std::int64_t full = len - len % N;
    if (fold)
      for (std::int64_t i = 0; i < full; i += N)
        (bf<A>(0.0f) + kk.template apply<A>(bf<A>::load_unaligned(x + i))).store_unaligned(y + i);
    else
      for (std::int64_t i = 0; i < full; i += N)
        kk.template apply<A>(bf<A>::load_unaligned(x + i)).store_unaligned(y + i);
    if (full < len) [[unlikely]]
      run_reference(x + full, y + full, len - full, bias);
  };
  if (mase_row_local_runs<A>(L, in, out, bias_of, run_biased)) return;
  mase_tile_runs<A>(L, in, out, bias_of, run_biased);
}

/// BlockMinifloatSpec's row of the kernel table.
template <>
struct FamilyKernel<BlockMinifloatSpec> {
  template <class A>
  static QuantizePlan plan(const BlockMinifloatSpec& s, const Policy& p, const QuantizeCall& c) {
    const Shape* shape = &c.shape;
    if (p.is_mase()) {
      if (!mase_tiles_accepted(c.shape, c.role)) return {};
      return checked_plan(QuantizePath::simd, s,
                          [&s, shape, role = c.role](std::span<const float> in, std::span<float> out) {
                            block_minifloat_mase_simd<A>(s, in, out, *shape, role);
                          });
    }
    if (p.rounding == Rounding::nearest_even && !c.shape.empty() &&
        blocks_inside_rows(exact_block_layout(c.shape, s.block_size)))
      return checked_plan(QuantizePath::simd, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
        block_minifloat_simd<A>(s, p, in, out, *shape);
      });
    return checked_plan(QuantizePath::scalar, s, [&s, &p, shape](std::span<const float> in, std::span<float> out) {
      quantize_blocks_exact_threaded<BlockMinifloatSpec, qnum::detail::block_minifloat_encode_exact,
                                     qnum::detail::block_minifloat_decode_exact>(s, p, in, out, *shape);
    });
  }
};

}  // namespace detail
}  // namespace QNUM_KERNEL_ISA_NS
}  // namespace qnum::kernel
