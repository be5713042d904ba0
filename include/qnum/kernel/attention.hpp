// Scaled dot-product attention forward (BERT self-attention and cross-attention), two ways:
//
//   attention_naive  materialises the scores, as eager PyTorch does: S = scale * Q Kᵀ for all
//                    (batch, head) [Eigen GEMM], S += mask, softmax rows, O = P V [Eigen GEMM]
//                    — four passes over a [batch, heads, seq_q, seq_k] buffer.
//   attention_fused  flash-style: each task is one (batch, head, tile of 42 queries = 3 row
//                    groups of 14; 18 = 3 x 6 below AVX-512). Keys are taken 256 at a time
//                    (8 tiles of 2 SIMD widths): the scores of a row group come from a
//                    GEMM-style 14 x 32 register tile (query rows broadcast from a transposed
//                    copy, Kᵀ tiles streamed), then one online-softmax step per block (block
//                    row max, the rescale factors exp(m_old - m_new) of all 14 rows as one
//                    vector exp, exp of the scores, per-lane row sums), then O = O·corr + P V
//                    with the same register tile over pairs of vectors of the head dimension,
//                    so the output rows are reloaded and rescaled once per 256 keys. It never
//                    holds more than 14 x 256 scores. A task packs the K and V of its
//                    (batch, head) into aligned per-thread scratch first (Kᵀ per key tile, V
//                    with padded rows), so they stay in L2 while its query tiles use them.
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
// (measured worst over the test shapes, scores up to ~±40: 9.0e-7). Outputs are convex
// combinations of V rows, so max|V| is their natural scale; the differences come from
// float32 summation order (Q Kᵀ dot products, row sums, P V) and the 1-ulp exp — the online
// rescaling factors multiply the accumulator and the row sum alike, so their error cancels in
// the final ratio. The fused path's exp (exp_nonpositive: its inputs are scores minus the
// running max) has the same polynomial as softmax's exp_batch. Exception: a row masked
// entirely with a finite value (BERT's -10000) has scores rounded to ulp(10000) ~ 1e-3, so
// there the variants agree only to ~2e-3 * max|V| (that row is ill-conditioned by
// construction; use -inf masks for a defined zero row).
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
#include "qnum/kernel/transpose.hpp"

namespace qnum {

/// Sizes of one attention call.
/// How q, k, v and out hold their heads: [batch, heads, seq, head_dim] (heads_major) or
/// [batch, seq, heads, head_dim] (token_major).
enum class AttentionLayout { heads_major, token_major };

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

constexpr std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// Fused kernel geometry: GEMM-style register tiles of kRows query rows x kVecs vectors (14 x 2
// with AVX-512's 32 registers, 6 x 2 below). Keys are taken kKeyBlock at a time per online-
// softmax step, so the row max, the rescale of the output rows and their reload happen once
// per block, not per tile.
inline constexpr std::int64_t kRows = kFloatLanes >= 16 ? 14 : 6;
inline constexpr int kVecs = 2;
inline constexpr std::int64_t kKeyTile = kVecs * kFloatLanes;  // keys per score micro-tile
inline constexpr std::int64_t kKeyBlock = 8 * kKeyTile;        // keys per online-softmax step
inline constexpr std::int64_t kQueryTile = 3 * kRows;          // query rows per tile

/// Scores for kRows query rows x one key tile: acc[r][c] = Σ_t q[t][r] · kt[t][c·W ..].
/// q: the row group transposed, [d][kRows]; kt: [d][kKeyTile] transposed keys (aligned).
[[gnu::always_inline]] inline void score_tile(const float* q, std::int64_t d, const float* kt,
                                              FloatBatch (&acc)[kRows][kVecs]) {
#pragma GCC unroll 16
  for (std::int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < kVecs; ++c) acc[r][c] = FloatBatch(0.0f);
  for (std::int64_t t = 0; t < d; ++t) {
    const float* kr = kt + t * kKeyTile;
#pragma GCC unroll 4
    for (int c = 0; c < kVecs; ++c) __builtin_prefetch(kr + 16 * kKeyTile + c * kFloatLanes);  // Kᵀ streams from L2
    FloatBatch kv[kVecs];
#pragma GCC unroll 4
    for (int c = 0; c < kVecs; ++c) kv[c] = FloatBatch::load_aligned(kr + c * kFloatLanes);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      const FloatBatch qb(q[t * kRows + r]);
#pragma GCC unroll 4
      for (int c = 0; c < kVecs; ++c) acc[r][c] = fmadd(qb, kv[c], acc[r][c]);
    }
  }
}

/// s[r][j] = (q·k)·scale + mask for kRows rows and the nb keys (a multiple of kKeyTile) of
/// one block; s has row stride kKeyBlock. kt and mb start at the block.
inline void score_block(const float* q, std::int64_t d, const float* kt, const float* mb, std::int64_t nb, float scale,
                        float* s) {
  const FloatBatch vscale(scale);
  for (std::int64_t j = 0; j < nb; j += kKeyTile) {
    FloatBatch acc[kRows][kVecs];
    score_tile(q, d, kt + j * d, acc);
    FloatBatch mk[kVecs];
#pragma GCC unroll 4
    for (int c = 0; c < kVecs; ++c) mk[c] = FloatBatch::load_aligned(mb + j + c * kFloatLanes);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < kVecs; ++c)
        fmadd(acc[r][c], vscale, mk[c]).store_aligned(s + r * kKeyBlock + j + c * kFloatLanes);
  }
}

/// Row-group state (running max m, rescale factor corr) is kept kRowPad floats per group,
/// so it is updated a vector at a time.
inline constexpr std::int64_t kRowPad = round_up(kRows, kFloatLanes);

/// Max of n aligned floats, n a multiple of two vectors (two chains: max has a 4-cycle latency).
inline float block_max(const float* s, std::int64_t n) {
  FloatBatch v0(-std::numeric_limits<float>::infinity()), v1 = v0;
  for (std::int64_t j = 0; j < n; j += 2 * kFloatLanes) {
    v0 = xsimd::max(v0, FloatBatch::load_aligned(s + j));
    v1 = xsimd::max(v1, FloatBatch::load_aligned(s + j + kFloatLanes));
  }
  return hmax(xsimd::max(v0, v1));
}

/// One online-softmax step of a row group over nb keys (a multiple of kKeyTile): the scores s
/// ([kRows][kKeyBlock]) become weights, the running maxima m and per-lane row sums l
/// ([kRows][lanes]) are updated, and corr[r] = exp(m_old - m_new) is the factor that
/// rescales row r's earlier accumulations (1 when its max did not grow). Branch free: the
/// new maxima and factors of all rows are one vector computation.
inline void softmax_block(float* s, std::int64_t nb, float* m, float* l, float* corr) {
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  alignas(64) float bm[kRowPad], shift[kRowPad];
  for (std::int64_t r = 0; r < kRowPad; ++r) bm[r] = r < kRows ? block_max(s + r * kKeyBlock, nb) : ninf;
  for (std::int64_t c = 0; c < kRowPad; c += kFloatLanes) {
    const FloatBatch mo = FloatBatch::load_aligned(m + c);
    const FloatBatch mn = xsimd::max(mo, FloatBatch::load_aligned(bm + c));
    const auto none = mn == FloatBatch(ninf);  // every key so far masked: weights stay 0
    exp_nonpositive(xsimd::select(none, FloatBatch(0.0f), mo - mn)).store_aligned(corr + c);
    mn.store_aligned(m + c);
    xsimd::select(none, FloatBatch(0.0f), mn).store_aligned(shift + c);
  }
  for (std::int64_t r = 0; r < kRows; ++r) {
    const FloatBatch vm(shift[r]);
    float* sr = s + r * kKeyBlock;
    FloatBatch sum0(0.0f), sum1(0.0f);
    for (std::int64_t j = 0; j < nb; j += 2 * kFloatLanes) {
      const FloatBatch e0 = exp_nonpositive(FloatBatch::load_aligned(sr + j) - vm);
      const FloatBatch e1 = exp_nonpositive(FloatBatch::load_aligned(sr + j + kFloatLanes) - vm);
      e0.store_aligned(sr + j);
      e1.store_aligned(sr + j + kFloatLanes);
      sum0 += e0;
      sum1 += e1;
    }
    // Row sums stay one per lane until the end (one horizontal add per row).
    float* lr = l + r * kFloatLanes;
    fmadd(FloatBatch::load_aligned(lr), FloatBatch(corr[r]), sum0 + sum1).store_aligned(lr);
  }
}

/// o[r][c..c+NV) = o * corr[r] + Σ_{j < nk} p[r][j] · v[j][c..]: kRows rows, NV vectors of
/// the packed (aligned) V; p has row stride kKeyBlock.
template <int NV>
[[gnu::always_inline]] inline void pv_tile(const float* p, std::int64_t nk, const float* v, std::int64_t ldv, float* o,
                                           std::int64_t ldo, const float* corr) {
  FloatBatch acc[kRows][NV];
#pragma GCC unroll 16
  for (std::int64_t r = 0; r < kRows; ++r) {
    const FloatBatch cr(corr[r]);
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[r][c] = FloatBatch::load_aligned(o + r * ldo + c * kFloatLanes) * cr;
  }
  for (std::int64_t j = 0; j < nk; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) __builtin_prefetch(v + (j + 16) * ldv + c * kFloatLanes);  // V streams from L2
    FloatBatch vb[NV];
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) vb[c] = FloatBatch::load_aligned(v + j * ldv + c * kFloatLanes);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      const FloatBatch pb(p[r * kKeyBlock + j]);
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) acc[r][c] = fmadd(pb, vb[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (std::int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[r][c].store_aligned(o + r * ldo + c * kFloatLanes);
}

/// pv_tile over the nv vectors of the head dimension, kVecs at a time.
inline void pv_tile_all(const float* p, std::int64_t nk, const float* v, std::int64_t ldv, std::int64_t nv, float* o,
                        std::int64_t ldo, const float* corr) {
  std::int64_t c = 0;
  for (; c + kVecs <= nv; c += kVecs) pv_tile<kVecs>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
  if (c < nv) pv_tile<1>(p, nk, v + c * kFloatLanes, ldv, o + c * kFloatLanes, ldo, corr);
}

/// K [sk][d] -> Kᵀ tiles [skp / kKeyTile][d][kKeyTile], keys past sk zero. Each key tile is
/// one contiguous block (a strided layout would map a tile's rows onto a few L1 sets).
/// ldk: the distance between key rows (d when packed, heads·d in token-major layout).
inline void pack_keys(const float* k, std::int64_t sk, std::int64_t d, std::int64_t ldk, float* kt) {
  const std::int64_t skp = round_up(sk, kKeyTile);
  for (std::int64_t j0 = 0; j0 < skp; j0 += kKeyTile) {
    float* tile = kt + j0 * d;
    const std::int64_t n = std::min(kKeyTile, sk - j0);
    std::int64_t t0 = 0;
#if defined(__AVX512F__)
    if (n == kKeyTile && kKeyTile % 16 == 0)  // full tiles: 16x16 register transposes
      for (; t0 + 16 <= d; t0 += 16)
        for (std::int64_t h = 0; h < kKeyTile; h += 16)
          transpose16(k + (j0 + h) * ldk + t0, ldk, tile + t0 * kKeyTile + h, kKeyTile);
#endif
    for (std::int64_t t = t0; t < d; ++t)
      for (std::int64_t j = 0; j < kKeyTile; ++j) tile[t * kKeyTile + j] = j < n ? k[(j0 + j) * ldk + t] : 0.0f;
  }
}

/// nrows query rows [nrows][d] -> row groups transposed, [prows / kRows][d][kRows], so the
/// score tile broadcasts from fixed offsets; rows past nrows are zero.
inline void pack_queries(const float* q, std::int64_t nrows, std::int64_t prows, std::int64_t d, std::int64_t ldq,
                         float* qs) {
  for (std::int64_t r0 = 0; r0 < prows; r0 += kRows) {
    float* g = qs + r0 * d;
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t t = 0; t < d; ++t) g[t * kRows + r] = r0 + r < nrows ? q[(r0 + r) * ldq + t] : 0.0f;
  }
}

/// Per-thread scratch reused across calls (slots 0..7), so repeated calls do not page-fault.
/// attention_fused uses slot 2 on the calling thread and 0, 1, 3-6 in each task; attention_naive
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

/// V [sk][d] -> [sk][dp], columns past d zero (aligned rows for the PV tiles).
inline void pack_values(const float* v, std::int64_t sk, std::int64_t d, std::int64_t ldv, float* vp) {
  const std::int64_t dp = round_up(d, kFloatLanes);
  for (std::int64_t j = 0; j < sk; ++j) {
    std::copy(v + j * ldv, v + j * ldv + d, vp + j * dp);
    std::fill(vp + j * dp + d, vp + (j + 1) * dp, 0.0f);
  }
}

/// A fused-attention task's buffers in its thread's scratch (slots 0, 1, 3-6): packed Kᵀ and
/// V of one head, the transposed query tile, the output accumulator, the score block and
/// the row state (m and corr per row group [groups][kRowPad], l per row [rows][lanes]).
struct FusedScratch {
  static constexpr std::int64_t kGroups = kQueryTile / kRows;
  float *kt, *vp, *qs, *acc, *sb, *m, *corr, *l;
  FusedScratch(std::int64_t sk, std::int64_t d) {
    const std::int64_t skp = round_up(sk, kKeyTile), dp = round_up(d, kFloatLanes);
    kt = scratch(0, static_cast<std::size_t>(d * skp)).data();
    vp = scratch(1, static_cast<std::size_t>(sk * dp)).data();
    qs = scratch(3, static_cast<std::size_t>(kQueryTile * d)).data();
    acc = scratch(4, static_cast<std::size_t>(kQueryTile * dp)).data();
    sb = scratch(5, static_cast<std::size_t>(kRows * kKeyBlock)).data();
    m = scratch(6, static_cast<std::size_t>((2 * kRowPad + kRows * kFloatLanes) * kGroups)).data();
    corr = m + kRowPad * kGroups;
    l = corr + kRowPad * kGroups;
  }
};

/// One query tile of nrows <= kQueryTile rows q [nrows][d] (rows ld apart) against the head
/// packed in w: online softmax over the key blocks, then out [nrows][d] (rows ld apart) =
/// acc / l (0 for rows whose every key is masked). mb: the batch's padded mask.
inline void fused_query_tile(const float* q, std::int64_t nrows, std::int64_t sk, std::int64_t d, std::int64_t ld,
                             const float* mb, const FusedScratch& w, float* out) {
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const std::int64_t skp = round_up(sk, kKeyTile), dp = round_up(d, kFloatLanes), prows = round_up(nrows, kRows);
  const float scale = attention_scale(d);
  pack_queries(q, nrows, prows, d, ld, w.qs);
  std::fill(w.acc, w.acc + prows * dp, 0.0f);
  std::fill(w.m, w.m + kRowPad * FusedScratch::kGroups, ninf);
  std::fill(w.l, w.l + kQueryTile * kFloatLanes, 0.0f);
  for (std::int64_t j0 = 0; j0 < skp; j0 += kKeyBlock) {
    const std::int64_t nb = std::min(kKeyBlock, skp - j0), nk = std::min(nb, sk - j0);
    for (std::int64_t r0 = 0; r0 < prows; r0 += kRows) {
      float* mg = w.m + r0 / kRows * kRowPad;
      float* cg = w.corr + r0 / kRows * kRowPad;
      score_block(w.qs + r0 * d, d, w.kt + j0 * d, mb + j0, nb, scale, w.sb);
      softmax_block(w.sb, nb, mg, w.l + r0 * kFloatLanes, cg);
      if (std::any_of(mg, mg + kRows, [=](float x) { return x != ninf; }))
        pv_tile_all(w.sb, nk, w.vp + j0 * dp, dp, dp / kFloatLanes, w.acc + r0 * dp, dp, cg);
    }
  }
  for (std::int64_t r = 0; r < nrows; ++r) {
    const float lr = xsimd::hadd(FloatBatch::load_aligned(w.l + r * kFloatLanes));
    const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
    const FloatBatch vinv(inv);
    std::int64_t t = 0;
    for (; t + kFloatLanes <= d; t += kFloatLanes)
      (FloatBatch::load_aligned(w.acc + r * dp + t) * vinv).store_unaligned(out + r * ld + t);
    for (; t < d; ++t) out[r * ld + t] = w.acc[r * dp + t] * inv;
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
/// layout: heads_major (q [batch, heads, seq_q, head_dim], as attention_naive) or
/// token_major (q [batch, seq_q, heads, head_dim] — a Linear's output as it is, so a model
/// needs no head split and merge copies; k, v and out alike). Same values either way.
inline void attention_fused(const float* q, const float* k, const float* v, const float* mask, float* out,
                            const AttentionShape& s, AttentionLayout layout = AttentionLayout::heads_major) {
  using namespace detail;
  check_attention("attention_fused", s, q, k, v, out);
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const std::int64_t bh = s.batch * s.heads, sq = s.seq_q, sk = s.seq_k, d = s.head_dim;
  const std::int64_t skp = round_up(sk, kKeyTile);
  // The mask per batch as [skp], -inf on the padding keys.
  float* mp = scratch(2, static_cast<std::size_t>(s.batch * skp)).data();
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t j = 0; j < skp; ++j) mp[b * skp + j] = j < sk ? (mask ? mask[b * sk + j] : 0.0f) : ninf;

  // A task is one (batch, head) and a run of its query tiles: it packs K and V into its
  // thread's scratch, so they are in L2 while its tiles stream them. Heads are split into
  // runs only when there are too few heads to keep the threads busy (each row's result
  // does not depend on the split).
  const std::int64_t qtiles = (sq + kQueryTile - 1) / kQueryTile;
  const std::int64_t runs = std::min(qtiles, (2 * num_threads() + bh - 1) / bh);
  const std::int64_t per_run = (qtiles + runs - 1) / runs;
  parallel_for(bh * runs, 1, [&](std::int64_t t0, std::int64_t t1) {
    FusedScratch w(sk, d);
    for (std::int64_t task = t0; task < t1; ++task) {
      const std::int64_t i = task / runs, qt0 = (task % runs) * per_run;
      if (qt0 >= qtiles) continue;
      // (batch, head) i: where its rows start and how far apart they are.
      const bool tm = layout == AttentionLayout::token_major;
      const std::int64_t b = i / s.heads, h = i % s.heads, ld = tm ? s.heads * d : d;
      const std::int64_t kv0 = tm ? (b * sk * s.heads + h) * d : i * sk * d;
      const std::int64_t q0 = tm ? (b * sq * s.heads + h) * d : i * sq * d;
      pack_keys(k + kv0, sk, d, ld, w.kt);
      pack_values(v + kv0, sk, d, ld, w.vp);
      for (std::int64_t qt = qt0; qt < std::min(qtiles, qt0 + per_run); ++qt) {
        const std::int64_t row0 = qt * kQueryTile;
        fused_query_tile(q + q0 + row0 * ld, std::min(kQueryTile, sq - row0), sk, d, ld, mp + b * skp, w,
                         out + q0 + row0 * ld);
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
                            std::span<const float> mask, std::span<float> out, const AttentionShape& s,
                            AttentionLayout layout = AttentionLayout::heads_major) {
  detail::check_attention("attention_fused", s, q.data(), k.data(), v.data(), out.data());
  detail::check_attention_spans("attention_fused", s, q.size(), k.size(), v.size(), mask.size(), out.size());
  attention_fused(q.data(), k.data(), v.data(), mask.empty() ? nullptr : mask.data(), out.data(), s, layout);
}

}  // namespace qnum
