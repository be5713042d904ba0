// Multi-head scaled dot-product attention as one differentiable op, for training.
//
// BERT's self-attention as layers is eight ops on [B, heads, Tq, T] tensors: head split
// (permute) of Q, K and V, Kᵀ (transpose), Q·Kᵀ, × scale, + mask, softmax, dropout, ·V and
// the head merge — each a pass over memory, and their gradients as many again.
// scaled_dot_product_attention runs them per (batch, head) on blocks that stay in cache,
// reading the heads in place from the Linear outputs' token-major layout [B, T, heads·D].
//
// It gives the layer composition's bits, values and gradients: every product is the same
// GEMM on the same operands (gemm_f32_strided reads a head in place with mm_nt / nn / tn's
// arithmetic), the scale, mask and dropout are the same float operations, softmax is
// softmax_lines, and dropout's mask is the Dropout op's for the same seed (element i of the
// [B, heads, Tq, T] scores kept when CounterRng(seed).uniform4(i) >= p).
// tests/tensor/test_ops_attention.cpp checks this. Under bf16 matmul_precision() both run the
// bf16 GEMM, whose chain does not depend on the layout, so the two still agree bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "qnum/core/rng.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/ops_linalg.hpp"
#include "qnum/tensor/ops_nn.hpp"

namespace qnum {

namespace detail {

/// Where head h of batch row b starts in a token-major [B, rows, heads·D] tensor (its rows are
/// heads·D apart).
struct HeadLayout {
  std::int64_t rows, HD, D;
  std::int64_t at(std::int64_t b, std::int64_t h) const { return b * rows * HD + h * D; }
};

/// Per-thread scratch of one (batch, head) block, reused across calls: the scores, the
/// probabilities, (with dropout) the mask and, for the backward, the dropped probabilities
/// (with dropout or when recomputing), [Tq, T] each.
struct AttentionScratch {
  std::vector<float> s, p, pdrop;
  std::vector<std::uint8_t> keep;
  void size(std::int64_t Tq, std::int64_t T, bool drop, bool with_pdrop = false) {
    s.resize(static_cast<std::size_t>(Tq * T));
    p.resize(static_cast<std::size_t>(Tq * T));
    if (drop) keep.resize(static_cast<std::size_t>(Tq * T));
    if (with_pdrop) pdrop.resize(static_cast<std::size_t>(Tq * T));
  }
};
inline AttentionScratch& attention_scratch() {
  thread_local AttentionScratch s;
  return s;
}

/// C = op(A)·op(B) on one head, its operands read and written in place (rows HD apart, see
/// HeadLayout): gemm_f32_strided, with mm_nt's rule for empty sizes (K = 0 gives zeros).
inline void head_gemm(GemmForm form, const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float* C,
                      std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (std::int64_t i = 0; i < M; ++i) std::fill_n(C + i * ldc, N, 0.0f);
    return;
  }
  if (matmul_precision() == Precision::bf16)
    gemm_bf16_strided(form, A, lda, B, ldb, C, ldc, M, N, K);
  else
    gemm_f32_strided(form, A, lda, B, ldb, C, ldc, M, N, K);
}

/// One (batch, head)'s probabilities: s = Q·Kᵀ, × scale, + the mask row (when given), softmax
/// into prob; with dropout (p > 0) the mask drawn for flat indices first.. into keep and the
/// dropped probabilities into s. Returns what ·V reads: s with dropout, else prob. The forward
/// and the recomputing backward both call it, so they see the same floats.
inline const float* head_probs(const float* qh, const float* kh, std::int64_t HD, std::int64_t Tq, std::int64_t T,
                               std::int64_t D, float scale, const float* mrow, float* s, float* prob,
                               const CounterRng& rng, std::uint64_t first, float p, float keep_scale,
                               std::uint8_t* keep) {
  const std::int64_t block = Tq * T;
  head_gemm(GemmForm::nt, qh, HD, kh, HD, s, T, Tq, T, D);  // Q·Kᵀ
  // × scale, then + mask, rounded apart as mul_scalar and add round them: two loops, so that
  // FP contraction cannot fuse them into one FMA. (Locals: no store may alias them.)
  const float sc = scale;
  const float* __restrict m = mrow;
  for (std::int64_t i = 0; i < block; ++i) s[i] = s[i] * sc;
  if (m)
    for (std::int64_t i = 0; i < Tq; ++i) {
      float* __restrict row = s + i * T;
      for (std::int64_t j = 0; j < T; ++j) row[j] = row[j] + m[j];
    }
  softmax_lines(s, prob, DimView{Tq, T, 1}, false);
  if (p <= 0.0f) return prob;
  // element first + i of the scores' flat index, as the dropout op draws it
  dropout_mask_product(rng, first, p, keep_scale, prob, keep, s, static_cast<std::size_t>(block));
  return s;
}

}  // namespace detail

/// What the training attention keeps for its backward: the probabilities and dropout mask
/// ([B, heads, Tq, T]: 5 bytes per score with dropout), or nothing, recomputing them per
/// (batch, head) in backward (one more Q·Kᵀ and softmax; the same bits). `automatic` keeps
/// them up to kAttentionSaveMaxBytes per call (bert-tiny at 512 tokens, batch 32: 84 MB;
/// BERT-base there: 503 MB per layer, recomputed).
enum class AttentionMemory { automatic, save, recompute };
inline constexpr std::size_t kAttentionSaveMaxBytes = std::size_t{256} << 20;

/// softmax(q·kᵀ·scale + mask) (dropout p, in training) · v for every head: q [B, Tq, heads·D],
/// k and v [B, T, heads·D] (heads token-major, as Linear layers give them), mask undefined or
/// additive [B, 1, 1, T] without gradient. Dropout on the probabilities with keep-probability
/// 1 - p and seed `seed` when p > 0 (p in [0, 1)). Result [B, Tq, heads·D]; differentiable in
/// q, k and v. Bit for bit the composition permute / transpose / matmul / mul_scalar / add /
/// softmax / dropout / matmul / permute (see the file comment), whatever `memory` says.
inline Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                           std::int64_t heads, float scale, float p, std::uint64_t seed,
                                           AttentionMemory memory = AttentionMemory::automatic) {
  const char* op = "scaled_dot_product_attention";
  detail::require(q.rank() == 3 && k.rank() == 3 && v.rank() == 3, op, ": q, k, v must be [B, T, heads*D], got ",
                  to_string(q.shape()), ", ", to_string(k.shape()), ", ", to_string(v.shape()));
  const std::int64_t B = q.shape()[0], Tq = q.shape()[1], HD = q.shape()[2], T = k.shape()[1];
  detail::require(heads > 0 && HD % heads == 0, op, ": hidden size ", HD, " is not a multiple of heads ", heads);
  detail::require(k.shape() == Shape{B, T, HD} && v.shape() == k.shape(), op, ": q ", to_string(q.shape()), ", k ",
                  to_string(k.shape()), " and v ", to_string(v.shape()), " do not match");
  if (mask.defined() && !(mask.shape() == Shape{B, 1, 1, T} && !mask.requires_grad()))  // if/fail: shape() needs a mask
    detail::fail(op, ": mask must be an additive [", B, ", 1, 1, ", T, "] without gradient, got ",
                 to_string(mask.shape()), mask.requires_grad() ? " requiring grad" : "");
  detail::require(p >= 0.0f && p < 1.0f, op, ": dropout probability ", p, " must be in [0, 1)");
  if (device_ops::any_on_device({&q, &k, &v, &mask}))
    return device_ops::attention(q, k, v, mask, heads, scale, p, seed);
  const std::int64_t D = HD / heads, block = Tq * T;
  const detail::HeadLayout lq{Tq, HD, D}, lk{T, HD, D};  // q (and the output); k and v
  const bool with_grad = autograd::grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (Tq == 0 || T == 0) {
    // No queries or no keys: the result and every gradient are zeros (a sum over no keys is 0),
    // and the head pointers below could be null plus an offset.
    auto zeros = [](std::int64_t n) { return FloatBuffer(static_cast<std::size_t>(n), 0.0f); };
    if (!with_grad) return autograd::make_result(op, q.shape(), zeros(B * Tq * HD), {q, k, v}, nullptr);
    return autograd::make_result(op, q.shape(), zeros(B * Tq * HD), {q, k, v},
                                 [B, Tq, T, HD, zeros](std::span<const float>) {
                                   std::vector<FloatBuffer> r;
                                   r.push_back(zeros(B * Tq * HD));
                                   r.push_back(zeros(B * T * HD));
                                   r.push_back(zeros(B * T * HD));
                                   return r;
                                 });
  }
  const bool drop = p > 0.0f;
  const float keep_scale = drop ? static_cast<float>(1.0 / (1.0 - static_cast<double>(p))) : 1.0f;
  const auto scores = static_cast<std::size_t>(B * heads * block);
  const bool save =
      with_grad &&
      (memory == AttentionMemory::save ||
       (memory == AttentionMemory::automatic && scores <= kAttentionSaveMaxBytes / (sizeof(float) + (drop ? 1 : 0))));
  // Saved for backward (when `save`): the softmax output and the dropout mask, [B, heads, Tq, T].
  auto probs = std::make_shared<FloatBuffer>(save ? scores : 0);
  auto keep = std::make_shared<std::vector<std::uint8_t>>(save && drop ? scores : 0);
  FloatBuffer out(static_cast<std::size_t>(B * Tq * HD));
  const float* pq = q.data();
  const float* pk = k.data();
  const float* pv = v.data();
  const float* pm = mask.defined() ? mask.data() : nullptr;
  const CounterRng rng(seed);
  parallel_for(B * heads, 1, [&](std::int64_t bh0, std::int64_t bh1) {
    detail::AttentionScratch& w = detail::attention_scratch();
    w.size(Tq, T, drop);
    for (std::int64_t bh = bh0; bh < bh1; ++bh) {
      const std::int64_t b = bh / heads, h = bh % heads;
      float* prob = save ? probs->data() + bh * block : w.p.data();
      std::uint8_t* kb = !drop ? nullptr : save ? keep->data() + bh * block : w.keep.data();
      const float* pd =
          detail::head_probs(pq + lq.at(b, h), pk + lk.at(b, h), HD, Tq, T, D, scale, pm ? pm + b * T : nullptr,
                             w.s.data(), prob, rng, static_cast<std::uint64_t>(bh * block), p, keep_scale, kb);
      detail::head_gemm(GemmForm::nn, pd, T, pv + lk.at(b, h), HD, out.data() + lq.at(b, h), HD, Tq, D, T);  // P·V
    }
  });
  if (!with_grad) return autograd::make_result(op, q.shape(), std::move(out), {q, k, v}, nullptr);
  return autograd::make_result(
      op, q.shape(), std::move(out), {q, k, v},
      [q, k, v, mask, probs, keep, save, drop, p, seed, heads, scale, keep_scale, B, Tq, T, HD, D, block, lq,
       lk](std::span<const float> g) {
        std::vector<FloatBuffer> r(3);
        for (std::size_t i = 0; i < 3; ++i) r[i].resize(static_cast<std::size_t>(i == 0 ? B * Tq * HD : B * T * HD));
        const detail::DimView rows{Tq, T, 1};
        const CounterRng rng(seed);
        const float* pm = mask.defined() ? mask.data() : nullptr;
        parallel_for(B * heads, 1, [&](std::int64_t bh0, std::int64_t bh1) {
          detail::AttentionScratch& w = detail::attention_scratch();
          w.size(Tq, T, drop, drop || !save);
          float* pdrop = w.pdrop.data();
          for (std::int64_t bh = bh0; bh < bh1; ++bh) {
            const std::int64_t b = bh / heads, h = bh % heads;
            const float* qh = q.data() + lq.at(b, h);
            const float* kh = k.data() + lk.at(b, h);
            const float* vh = v.data() + lk.at(b, h);
            const float* gh = g.data() + lq.at(b, h);
            const float* prob = nullptr;       // softmax's output
            const std::uint8_t* kb = nullptr;  // the dropout mask
            const float* pd = nullptr;         // dropout's output, as the forward fed it to ·V
            if (save) {
              prob = probs->data() + bh * block;
              kb = drop ? keep->data() + bh * block : nullptr;
              pd = prob;
              if (drop) {
                detail::mask_product(prob, kb, keep_scale, pdrop, static_cast<std::size_t>(block));
                pd = pdrop;
              }
            } else {  // the forward's steps again, into scratch
              prob = w.p.data();
              kb = drop ? w.keep.data() : nullptr;
              pd = detail::head_probs(qh, kh, HD, Tq, T, D, scale, pm ? pm + b * T : nullptr, pdrop, w.p.data(), rng,
                                      static_cast<std::uint64_t>(bh * block), p, keep_scale, w.keep.data());
            }
            float* ds = w.s.data();
            detail::head_gemm(GemmForm::nt, gh, HD, vh, HD, ds, T, Tq, T, D);  // d(P after dropout) = dO·Vᵀ
            detail::head_gemm(GemmForm::tn, pd, T, gh, HD, r[2].data() + lk.at(b, h), HD, T, D, Tq);  // dV = Pᵀ·dO
            const float* dp = ds;
            if (drop) {  // dropout's backward (the same factor per element), into P's spent copy
              detail::mask_product(ds, kb, keep_scale, pdrop, static_cast<std::size_t>(block));
              dp = pdrop;
            }
            detail::softmax_backward_lines(dp, prob, ds, rows);
            const float sc = scale;
            for (std::int64_t i = 0; i < block; ++i) ds[i] = ds[i] * sc;  // × scale's backward
            detail::head_gemm(GemmForm::nn, ds, T, kh, HD, r[0].data() + lq.at(b, h), HD, Tq, D, T);  // dQ = dS·K
            detail::head_gemm(GemmForm::tn, ds, T, qh, HD, r[1].data() + lk.at(b, h), HD, T, D, Tq);  // dK = dSᵀ·Q
          }
        });
        for (std::size_t i = 0; i < 3; ++i)
          if (!(i == 0 ? q : i == 1 ? k : v).requires_grad()) r[i] = {};
        return r;
      });
}

}  // namespace qnum
