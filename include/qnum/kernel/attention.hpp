// Scaled dot-product attention forward (BERT self-attention and cross-attention), two ways:
//
//   attention_naive  materialises the scores, as eager PyTorch does: S = scale * Q Kᵀ for all
//                    (batch, head) [Eigen GEMM], S += mask, softmax rows, O = P V [Eigen GEMM]
//                    — four passes over a [batch, heads, seq_q, seq_k] buffer.
//   attention_fused  flash-style: each task is one (batch, head, tile of 48 queries; 16 below
//                    AVX-512). It walks key tiles of 4 SIMD widths, keeps a running row max
//                    m and sum l, rescales the output accumulator by exp(m_old - m_new) when
//                    the max grows, and never holds more than 6 x 64 scores. Inner loops are
//                    xsimd register-blocked micro-kernels (6 query rows x 4 vectors with
//                    AVX-512, 2 x 4 below). K and V are first packed once per (batch, head)
//                    into aligned per-thread scratch (Kᵀ per key tile, V with padded rows).
//
// Layout: Q [batch, heads, seq_q, head_dim], K and V [batch, heads, seq_k, head_dim], output
// [batch, heads, seq_q, head_dim], all contiguous row-major float32, any alignment. mask
// (optional, nullptr / empty span for none) is additive, [batch, seq_k], broadcast over heads
// and queries: 0 keeps a key, -inf (or a large negative value such as BERT's -10000 or
// -FLT_MAX) removes it. scale = 1 / sqrt(head_dim).
//
// Fully masked rows (every key of a query has score -inf) give an all-zero output row in
// both variants (the softmax weights are defined as zero), never NaN. With a finite large
// negative mask instead of -inf such a row is a plain softmax over the masked scores (a
// uniform average of V rows when the mask dominates), as in PyTorch.
//
// Accuracy (tested): for finite inputs both variants are within 1e-5 * max|V| (per (batch,
// head)) of a double-precision reference, and |fused - naive| <= 1e-5 * max|V| elementwise
// (measured worst over the test shapes, scores up to ~±40: 1.1e-6). Outputs are convex
// combinations of V rows, so max|V| is their natural scale; the differences come from
// float32 summation order (Q Kᵀ dot products, row sums, P V) and the 1-ulp exp — the online
// rescaling factors multiply the accumulator and the row sum alike, so their error cancels in
// the final ratio. Exception: a row masked entirely with a finite value (BERT's -10000) has
// scores rounded to ulp(10000) ~ 1e-3, so there the variants agree only to ~2e-3 * max|V|
// (that row is ill-conditioned by construction; use -inf masks for a defined zero row).
// Inputs holding NaN or +inf give unspecified (typically NaN) rows.
//
// Threads (qnum::set_num_threads): results are bit-identical for any thread count — each
// output row is computed by one thread in a fixed order, and Eigen is kept single-threaded
// inside each task.
//
// Bad input (qnum::Error): any size < 1, a null buffer, and in the span forms buffers whose
// sizes do not match the shape. The output must not overlap the inputs.
#pragma once

#include <Eigen/Core>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/softmax.hpp"
#include "qnum/kernel/threading.hpp"

namespace qnum {

/// Sizes of one attention call.
struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t seq_q = 1;
  std::int64_t seq_k = 1;
  std::int64_t head_dim = 1;

  /// Self-attention shape (seq_q == seq_k == seq).
  static AttentionShape self(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t head_dim) {
    return {batch, heads, seq, seq, head_dim};
  }
  std::int64_t q_size() const { return batch * heads * seq_q * head_dim; }
  std::int64_t kv_size() const { return batch * heads * seq_k * head_dim; }
  std::int64_t mask_size() const { return batch * seq_k; }
  /// Multiply-adds counted as 2 flops: Q Kᵀ and P V.
  double flops() const {
    return 4.0 * static_cast<double>(batch * heads) * static_cast<double>(seq_q) * static_cast<double>(seq_k) *
           static_cast<double>(head_dim);
  }
};

namespace detail {

inline void check_attention(const char* what, const AttentionShape& s, const float* q, const float* k, const float* v,
                            const float* out) {
  require(s.batch >= 1 && s.heads >= 1 && s.seq_q >= 1 && s.seq_k >= 1 && s.head_dim >= 1, what, ": batch ", s.batch,
          ", heads ", s.heads, ", seq_q ", s.seq_q, ", seq_k ", s.seq_k, ", head_dim ", s.head_dim,
          " must all be >= 1");
  constexpr std::int64_t lim = std::int64_t{1} << 40;
  require(s.batch < lim / s.heads && s.batch * s.heads < lim / s.seq_q &&
              s.batch * s.heads * s.seq_q < lim / std::max(s.seq_k, s.head_dim),
          what, ": shape too large");
  require(q && k && v && out, what, ": null buffer");
}

inline void check_attention_spans(const char* what, const AttentionShape& s, std::size_t q, std::size_t k,
                                  std::size_t v, std::size_t mask, std::size_t out) {
  require(static_cast<std::int64_t>(q) == s.q_size(), what, ": q has ", q, " values, expected ", s.q_size(),
          " = batch*heads*seq_q*head_dim");
  require(static_cast<std::int64_t>(k) == s.kv_size(), what, ": k has ", k, " values, expected ", s.kv_size(),
          " = batch*heads*seq_k*head_dim");
  require(static_cast<std::int64_t>(v) == s.kv_size(), what, ": v has ", v, " values, expected ", s.kv_size(),
          " = batch*heads*seq_k*head_dim");
  require(mask == 0 || static_cast<std::int64_t>(mask) == s.mask_size(), what, ": mask has ", mask,
          " values, expected 0 (none) or ", s.mask_size(), " = batch*seq_k");
  require(static_cast<std::int64_t>(out) == s.q_size(), what, ": out has ", out, " values, expected ", s.q_size(),
          " = batch*heads*seq_q*head_dim");
}

inline float attention_scale(std::int64_t head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

/// Keeps Eigen's GEMM single-threaded for its lifetime (Eigen reads the calling thread's
/// OpenMP thread count); qnum's own parallel_for decides the threading.
class EigenSerial {
 public:
#if defined(_OPENMP)
  EigenSerial() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~EigenSerial() { omp_set_num_threads(saved_); }

 private:
  int saved_;
#else
  EigenSerial() = default;
#endif
 public:
  EigenSerial(const EigenSerial&) = delete;
  EigenSerial& operator=(const EigenSerial&) = delete;
};

using AlignedFloats = std::vector<float, xsimd::aligned_allocator<float>>;

inline std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// Fused kernel geometry.
// Query rows per micro-kernel: kRows x 4 accumulators plus 4 loaded vectors and a broadcast
// must fit the register file (32 vector registers with AVX-512, 16 below).
inline constexpr std::int64_t kRows = kFloatLanes >= 16 ? 6 : 2;
inline constexpr std::int64_t kKeyTile = 4 * kFloatLanes;  // keys per tile
inline constexpr std::int64_t kQueryTile = 8 * kRows;      // query rows per task

/// Scores for kRows query rows x one key tile: acc[r][c] = sum_d q[r][d] * kt[d][c*W ..].
/// q: kRows rows of stride d; kt: [d][ldk] transposed keys at the tile.
[[gnu::always_inline]] inline void score_tile(const float* q, std::int64_t d, const float* kt, std::int64_t ldk,
                                              FloatBatch (&acc)[kRows][4]) {
#pragma GCC unroll 8
  for (std::int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) acc[r][c] = FloatBatch(0.0f);
  for (std::int64_t t = 0; t < d; ++t) {
    const float* kr = kt + t * ldk;
    const FloatBatch k0 = FloatBatch::load_aligned(kr);
    const FloatBatch k1 = FloatBatch::load_aligned(kr + kFloatLanes);
    const FloatBatch k2 = FloatBatch::load_aligned(kr + 2 * kFloatLanes);
    const FloatBatch k3 = FloatBatch::load_aligned(kr + 3 * kFloatLanes);
#pragma GCC unroll 8
    for (std::int64_t r = 0; r < kRows; ++r) {
      const FloatBatch qb(q[r * d + t]);
      acc[r][0] = xsimd::fma(qb, k0, acc[r][0]);
      acc[r][1] = xsimd::fma(qb, k1, acc[r][1]);
      acc[r][2] = xsimd::fma(qb, k2, acc[r][2]);
      acc[r][3] = xsimd::fma(qb, k3, acc[r][3]);
    }
  }
}

/// o[r][c..c+NV) = o * corr[r] + sum_{j < nk} p[r][j] * v[j][c..]: kRows rows, NV vectors of
/// the packed (aligned) V.
template <int NV>
[[gnu::always_inline]] inline void pv_tile(const float* p, std::int64_t nk, const float* v, std::int64_t ldv, float* o,
                                           std::int64_t ldo, const float* corr) {
  FloatBatch acc[kRows][NV];
#pragma GCC unroll 8
  for (std::int64_t r = 0; r < kRows; ++r) {
    const FloatBatch cr(corr[r]);
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[r][c] = FloatBatch::load_aligned(o + r * ldo + c * kFloatLanes) * cr;
  }
  for (std::int64_t j = 0; j < nk; ++j) {
    FloatBatch vb[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) vb[c] = FloatBatch::load_aligned(v + j * ldv + c * kFloatLanes);
#pragma GCC unroll 8
    for (std::int64_t r = 0; r < kRows; ++r) {
      const FloatBatch pb(p[r * kKeyTile + j]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = xsimd::fma(pb, vb[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (std::int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[r][c].store_aligned(o + r * ldo + c * kFloatLanes);
}

/// pv_tile over nv vectors of the head dimension.
inline void pv_tile_all(const float* p, std::int64_t nk, const float* v, std::int64_t ldv, std::int64_t nv, float* o,
                        std::int64_t ldo, const float* corr) {
  std::int64_t c = 0;
  for (; c + 4 <= nv; c += 4) pv_tile<4>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
  switch (nv - c) {
    case 3:
      pv_tile<3>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
      break;
    case 2:
      pv_tile<2>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
      break;
    case 1:
      pv_tile<1>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
      break;
    default:
      break;
  }
}

/// Per-thread scratch reused across calls (slots 0..7), so repeated calls do not page-fault.
/// attention_fused uses slots 0-2 on the calling thread and 3-6 in each task; attention_naive
/// slot 7 on the calling thread.
inline AlignedFloats* scratch_slots() {
  thread_local AlignedFloats bufs[8];
  return bufs;
}

inline AlignedFloats& scratch(int slot, std::size_t n) {
  AlignedFloats& b = scratch_slots()[slot];
  if (b.size() < n) b.resize(n);
  return b;
}

/// Frees this thread's scratch buffers above 64 MiB, so one large call does not pin memory.
inline void trim_scratch() {
  for (int i = 0; i < 8; ++i) {
    AlignedFloats& b = scratch_slots()[i];
    if (b.size() > (std::size_t{64} << 20) / sizeof(float)) AlignedFloats().swap(b);
  }
}

}  // namespace detail

/// Naive attention: materialises the [batch, heads, seq_q, seq_k] scores (see the header).
inline void attention_naive(const float* q, const float* k, const float* v, const float* mask, float* out,
                            const AttentionShape& s) {
  detail::check_attention("attention_naive", s, q, k, v, out);
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const RowMajor>;
  using Map = Eigen::Map<RowMajor>;
  const std::int64_t bh = s.batch * s.heads, sq = s.seq_q, sk = s.seq_k, d = s.head_dim;
  const float scale = detail::attention_scale(d);
  // The scores live in reused per-thread scratch, like the fused path's buffers, so that
  // neither variant pays page faults for fresh allocations on every call.
  float* scores = detail::scratch(7, static_cast<std::size_t>(bh * sq * sk)).data();
  // 1. S = scale * Q Kᵀ
  parallel_for(bh, 1, [&](std::int64_t b0, std::int64_t b1) {
    [[maybe_unused]] detail::EigenSerial serial;
    for (std::int64_t i = b0; i < b1; ++i) {
      Map sm(scores + i * sq * sk, sq, sk);
      sm.noalias() = scale * (CMap(q + i * sq * d, sq, d) * CMap(k + i * sk * d, sk, d).transpose());
    }
  });
  // 2. S += mask (broadcast over heads and queries)
  if (mask) {
    const std::int64_t rows = bh * sq;
    parallel_for(rows, std::max<std::int64_t>(1, 16384 / sk), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* m = mask + (r / (s.heads * sq)) * sk;
        float* row = scores + r * sk;
        for (std::int64_t j = 0; j < sk; ++j) row[j] += m[j];
      }
    });
  }
  // 3. softmax rows (fully masked rows become zeros)
  softmax(scores, scores, bh * sq, sk);
  // 4. O = P V
  parallel_for(bh, 1, [&](std::int64_t b0, std::int64_t b1) {
    [[maybe_unused]] detail::EigenSerial serial;
    for (std::int64_t i = b0; i < b1; ++i) {
      Map om(out + i * sq * d, sq, d);
      om.noalias() = CMap(scores + i * sq * sk, sq, sk) * CMap(v + i * sk * d, sk, d);
    }
  });
  detail::trim_scratch();
}

/// Fused (flash-style) attention: tiles and online softmax, no [seq_q, seq_k] buffer.
inline void attention_fused(const float* q, const float* k, const float* v, const float* mask, float* out,
                            const AttentionShape& s) {
  using namespace detail;
  check_attention("attention_fused", s, q, k, v, out);
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const std::int64_t bh = s.batch * s.heads, sq = s.seq_q, sk = s.seq_k, d = s.head_dim;
  const std::int64_t skp = round_up(sk, kKeyTile), dp = round_up(d, kFloatLanes);
  const float scale = attention_scale(d);

  // Pack once per (batch, head), into aligned per-thread scratch: Kᵀ as
  // [skp / kKeyTile][d][kKeyTile] (zero padded keys), V as [sk][dp] (zero padded columns),
  // and the mask per batch as [skp] with -inf on the padding keys.
  const std::int64_t ldv = dp;
  float* kt = scratch(0, static_cast<std::size_t>(bh * d * skp)).data();
  float* vp = scratch(1, static_cast<std::size_t>(bh * sk * dp)).data();
  float* mp = scratch(2, static_cast<std::size_t>(s.batch * skp)).data();
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t j = 0; j < skp; ++j) mp[b * skp + j] = j < sk ? (mask ? mask[b * sk + j] : 0.0f) : ninf;
  parallel_for(bh, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t i = b0; i < b1; ++i) {
      const float* ki = k + i * sk * d;
      float* kti = kt + i * d * skp;
      // Each key tile is one contiguous [d][kKeyTile] block (a strided layout would map a
      // tile's rows onto a few L1 sets).
      for (std::int64_t j0 = 0; j0 < skp; j0 += kFloatLanes) {
        float* tile = kti + (j0 / kKeyTile) * d * kKeyTile + j0 % kKeyTile;
        if (j0 + kFloatLanes <= sk) {
          for (std::int64_t t = 0; t < d; ++t)
            for (std::int64_t j = 0; j < kFloatLanes; ++j) tile[t * kKeyTile + j] = ki[(j0 + j) * d + t];
        } else {
          for (std::int64_t t = 0; t < d; ++t)
            for (std::int64_t j = 0; j < kFloatLanes; ++j)
              tile[t * kKeyTile + j] = j0 + j < sk ? ki[(j0 + j) * d + t] : 0.0f;
        }
      }
      const float* vi = v + i * sk * d;
      float* vpi = vp + i * sk * dp;
      for (std::int64_t j = 0; j < sk; ++j) {
        std::copy(vi + j * d, vi + (j + 1) * d, vpi + j * dp);
        std::fill(vpi + j * dp + d, vpi + (j + 1) * dp, 0.0f);
      }
    }
  });

  const std::int64_t qtiles = (sq + kQueryTile - 1) / kQueryTile;
  parallel_for(bh * qtiles, 1, [&](std::int64_t t0, std::int64_t t1) {
    float* qs = scratch(3, static_cast<std::size_t>(kQueryTile * d)).data();
    float* acc = scratch(4, static_cast<std::size_t>(kQueryTile * dp)).data();
    float* ptile = scratch(5, static_cast<std::size_t>(kRows * kKeyTile)).data();
    float* m = scratch(6, static_cast<std::size_t>((2 + kFloatLanes) * kQueryTile)).data();
    float* corr = m + kQueryTile;
    float* l = corr + kQueryTile;  // [kQueryTile][lanes], aligned
    for (std::int64_t task = t0; task < t1; ++task) {
      const std::int64_t i = task / qtiles, row0 = (task % qtiles) * kQueryTile;
      const std::int64_t nrows = std::min(kQueryTile, sq - row0);
      const std::int64_t prows = round_up(nrows, kRows);
      const float* qi = q + (i * sq + row0) * d;
      std::copy(qi, qi + nrows * d, qs);
      std::fill(qs + nrows * d, qs + prows * d, 0.0f);
      std::fill(acc, acc + prows * dp, 0.0f);
      std::fill(m, m + kQueryTile, ninf);
      std::fill(l, l + kQueryTile * kFloatLanes, 0.0f);
      const float* kti = kt + i * d * skp;
      const float* vi = vp + i * sk * dp;
      const float* mb = mp + (i / s.heads) * skp;
      const FloatBatch vscale(scale);
      for (std::int64_t j0 = 0; j0 < skp; j0 += kKeyTile) {
        const FloatBatch mk[4] = {FloatBatch::load_aligned(mb + j0), FloatBatch::load_aligned(mb + j0 + kFloatLanes),
                                  FloatBatch::load_aligned(mb + j0 + 2 * kFloatLanes),
                                  FloatBatch::load_aligned(mb + j0 + 3 * kFloatLanes)};
        for (std::int64_t r0 = 0; r0 < prows; r0 += kRows) {
          FloatBatch sc[kRows][4];
          score_tile(qs + r0 * d, d, kti + j0 * d, kKeyTile, sc);
          bool any = false;
#pragma GCC unroll 8
          for (std::int64_t r = 0; r < kRows; ++r) {
            // (q.k) * scale + mask, rounded as in the naive path.
#pragma GCC unroll 8
            for (int c = 0; c < 4; ++c) sc[r][c] = sc[r][c] * vscale + mk[c];
            const FloatBatch vmax = xsimd::max(xsimd::max(sc[r][0], sc[r][1]), xsimd::max(sc[r][2], sc[r][3]));
            const float mold = m[r0 + r];
            float* pr = ptile + r * kKeyTile;
            float cr = 1.0f;
            // The horizontal max is needed only when some score exceeds the running max.
            if (xsimd::any(vmax > FloatBatch(mold))) {
              const float mnew = std::max(mold, hmax(vmax));
              cr = exp_scalar(mold - mnew);  // 0 when mold is -inf
              m[r0 + r] = mnew;
            } else if (mold == ninf) {  // every key so far masked: weights stay zero
              corr[r0 + r] = 1.0f;
#pragma GCC unroll 8
              for (int c = 0; c < 4; ++c) FloatBatch(0.0f).store_aligned(pr + c * kFloatLanes);
              continue;
            }
            any = true;
            corr[r0 + r] = cr;
            const FloatBatch vm(m[r0 + r]);
            FloatBatch sum(0.0f);
#pragma GCC unroll 8
            for (int c = 0; c < 4; ++c) {
              const FloatBatch e = exp_batch(sc[r][c] - vm);
              e.store_aligned(pr + c * kFloatLanes);
              sum += e;
            }
            // Row sums stay one per lane until the end (one horizontal add per row).
            float* lr = l + (r0 + r) * kFloatLanes;
            xsimd::fma(FloatBatch::load_aligned(lr), FloatBatch(cr), sum).store_aligned(lr);
          }
          if (any)
            pv_tile_all(ptile, std::min(kKeyTile, sk - j0), vi + j0 * ldv, ldv, dp / kFloatLanes, acc + r0 * dp, dp,
                        corr + r0);
        }
      }
      float* oi = out + (i * sq + row0) * d;
      for (std::int64_t r = 0; r < nrows; ++r) {
        const float lr = xsimd::hadd(FloatBatch::load_aligned(l + r * kFloatLanes));
        const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
        const FloatBatch vinv(inv);
        std::int64_t t = 0;
        for (; t + kFloatLanes <= d; t += kFloatLanes)
          (FloatBatch::load_aligned(acc + r * dp + t) * vinv).store_unaligned(oi + r * d + t);
        for (; t < d; ++t) oi[r * d + t] = acc[r * dp + t] * inv;
      }
    }
  });
  trim_scratch();
}

/// Span forms: sizes are checked against the shape; an empty mask means no mask.
inline void attention_naive(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                            std::span<const float> mask, std::span<float> out, const AttentionShape& s) {
  detail::check_attention("attention_naive", s, q.data(), k.data(), v.data(), out.data());
  detail::check_attention_spans("attention_naive", s, q.size(), k.size(), v.size(), mask.size(), out.size());
  attention_naive(q.data(), k.data(), v.data(), mask.empty() ? nullptr : mask.data(), out.data(), s);
}

inline void attention_fused(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                            std::span<const float> mask, std::span<float> out, const AttentionShape& s) {
  detail::check_attention("attention_fused", s, q.data(), k.data(), v.data(), out.data());
  detail::check_attention_spans("attention_fused", s, q.size(), k.size(), v.size(), mask.size(), out.size());
  attention_fused(q.data(), k.data(), v.data(), mask.empty() ? nullptr : mask.data(), out.data(), s);
}

}  // namespace qnum
