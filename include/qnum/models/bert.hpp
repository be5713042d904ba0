// BERT for sequence classification (Hugging Face's BertForSequenceClassification, spec/
// system.md §8.2) as an nn::Module tree whose state_dict names are Hugging Face's
// ("bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
// "bert.pooler.dense.weight", "classifier.weight", ...), so an HF safetensors checkpoint of
// any BERT loads (load_hf_bert, models/bert_hf.hpp) and a qnum checkpoint loads into
// transformers. Beside it: its config and presets (models/bert_config.hpp) and the surgery a
// search does on it (models/bert_surgery.hpp: Linears replaced, square ones by Identity).
//
//   embeddings  word + position + token type, LayerNorm, dropout
//   layer i     self-attention (query/key/value Linear, Matmul Q·Kᵀ, scale, additive mask on
//               padded keys, Softmax, dropout, Matmul P·V), output dense + dropout +
//               residual + LayerNorm; intermediate dense + GELU; output dense + dropout +
//               residual + LayerNorm
//   pooler      dense + tanh on the [CLS] token; then dropout and the classifier
//
// Attention products and softmax are Matmul / Softmax layers, so the quantize pass selects
// them by type "matmul" / "softmax" and a trace sees them. When none of them is quantized,
// no gradient is needed (grad mode off or nothing requires grad), attention dropout is
// inactive and no trace is running, attention runs through the fused kernel
// (kernel/attention.hpp) instead — within its stated 1e-5·max|V| of the layer path. When a
// gradient is needed (training) under the same conditions but for dropout, it runs through
// scaled_dot_product_attention (tensor/ops_attention.hpp): the layers' ops per (batch,
// head) in cache, with their bits, dropout drawing the module's next mask.
//
// The classifier reads only the [CLS] token of the last layer, so forward runs that layer's
// query, attention output and feed-forward for that token alone (keys and values still from
// every token) whenever this gives the same logits: no trace or observer running, no
// row-spanning quantizer or input transform on those ops (BertModel::first_token_exact).
// At bert-tiny's sizes that is about a third less work; `first_token_only = false` does
// every token, as transformers does.
//
// Sizes come from BertConfig (models/bert_config.hpp: HF config.json keys, or a preset).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/kernel/attention.hpp"
#include "qnum/models/bert_config.hpp"
#include "qnum/models/forward.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/tensor/ops.hpp"

namespace qnum::models {

/// One batch of token ids, row-major [batch, seq] (int64 as HF's): attention_mask 1 = token,
/// 0 = padding; empty attention_mask / token_type_ids mean all ones / all zeros.
/// The tensors are optional: the same ids as float tensors [batch, seq] of whole numbers, as a
/// traced graph's inputs carry them; when given, the graph links them to the embedding
/// lookups and the attention mask (passes::trace), and the mask is always applied.
struct BertInput {
  std::int64_t batch = 0, seq = 0;
  std::span<const std::int64_t> input_ids, attention_mask, token_type_ids;
  Tensor input_ids_tensor{}, attention_mask_tensor{}, token_type_ids_tensor{};
};

namespace detail {

inline float to_prob(double p) { return static_cast<float>(p); }

/// Overwrites t's values with N(0, std) draws from `seed` (HF's _init_weights).
inline void init_normal(Tensor& t, std::uint64_t seed, double std) {
  const Tensor r = Tensor::randn(t.shape(), seed, 0.0f, static_cast<float>(std));
  std::copy(r.values().begin(), r.values().end(), t.values().begin());
}

/// HF's initialisation: Linear and Embedding weights N(0, initializer_range), biases 0,
/// LayerNorm 1 / 0; seeds derived per parameter name order.
inline void init_bert_weights(nn::Module& m, double range, std::uint64_t seed) {
  std::uint64_t stream = 0;
  for (auto& [name, mod] : m.named_modules()) {
    if (auto* lin = dynamic_cast<nn::Linear*>(mod)) {
      init_normal(lin->weight, nn::detail::derive_seed(seed, stream++), range);
      if (lin->bias.defined()) std::fill(lin->bias.values().begin(), lin->bias.values().end(), 0.0f);
    } else if (auto* emb = dynamic_cast<nn::Embedding*>(mod)) {
      init_normal(emb->weight, nn::detail::derive_seed(seed, stream++), range);
    }
  }
}

/// Whether a module or op observer (a trace, a profile) watches this thread: fused inference
/// paths, which skip module calls and ops, run only when none does.
inline bool observed() { return nn::detail::module_observer() || autograd::detail::op_observer(); }

/// `typed` applied to x while it is the child registered under `name` in `parent`; once
/// another module is in its place (replace_linear nulls the handle; passes::restore_structure
/// rebuilding an identity swaps the child through the generic Module tree), that module.
inline Tensor call_slot(const std::shared_ptr<nn::Linear>& typed, nn::Module& parent, const char* name,
                        const Tensor& x) {
  nn::Module& child = parent.at(name);
  return &child == typed.get() ? (*typed)(x) : child(x);
}

/// A container of numbered children ("0", "1", ...) that is never called as a whole
/// (torch.nn.ModuleList).
class ModuleList : public nn::Module {
 public:
  std::string type_name() const override { return "ModuleList"; }
  void push_back(std::shared_ptr<nn::Module> m) { register_module(std::to_string(children().size()), std::move(m)); }
};

}  // namespace detail

/// Word, position and token-type embeddings summed, then LayerNorm and dropout.
class BertEmbeddings : public nn::Module {
 public:
  BertEmbeddings(const BertConfig& c, std::uint64_t seed) : max_positions(c.max_position_embeddings) {
    word_embeddings = register_module("word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size));
    position_embeddings = register_module("position_embeddings",
                                          std::make_shared<nn::Embedding>(c.max_position_embeddings, c.hidden_size));
    token_type_embeddings =
        register_module("token_type_embeddings", std::make_shared<nn::Embedding>(c.type_vocab_size, c.hidden_size));
    LayerNorm = register_module("LayerNorm",
                                std::make_shared<nn::LayerNorm>(c.hidden_size, static_cast<float>(c.layer_norm_eps)));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(detail::to_prob(c.hidden_dropout_prob),
                                                                       nn::detail::derive_seed(seed, 1)));
  }
  std::string type_name() const override { return "BertEmbeddings"; }

  using nn::Module::forward;  // the single-tensor one stays visible (clang -Woverloaded-virtual)
  /// [batch, seq, hidden] for the batch's ids (positions 0..seq-1).
  Tensor forward(const BertInput& in) {
    qnum::detail::require(in.seq <= max_positions, "BERT: sequence length ", in.seq,
                          " exceeds max_position_embeddings ", max_positions);
    if (word_embeddings->dense() && !word_embeddings->weight.is_cuda() && fusable())
      return (*dropout)(sum_layer_norm(in));
    const Shape ids_shape{in.batch, in.seq};
    Tensor x = lookup(*word_embeddings, in.input_ids, ids_shape, in.input_ids_tensor);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(in.seq));
    for (std::int64_t t = 0; t < in.seq; ++t) pos[static_cast<std::size_t>(t)] = t;
    x = add(x, lookup(*position_embeddings, pos, Shape{in.seq}, Tensor()));
    if (in.token_type_ids.empty()) {
      const std::vector<std::int64_t> zero{0};
      x = add(x, lookup(*token_type_embeddings, zero, Shape{1}, Tensor()));
    } else {
      x = add(x, lookup(*token_type_embeddings, in.token_type_ids, ids_shape, in.token_type_ids_tensor));
    }
    return (*dropout)((*LayerNorm)(x));
  }

  /// Whether forward may form the sum and LayerNorm in one pass: no trace watching, a float
  /// LayerNorm, and no gradient needed.
  bool fusable() const {
    if (detail::observed() || LayerNorm->is_quantized()) return false;
    if (!autograd::grad_enabled()) return true;
    for (const Tensor* t : {&word_embeddings->weight, &position_embeddings->weight, &token_type_embeddings->weight,
                            &LayerNorm->weight, &LayerNorm->bias})
      if (t->requires_grad()) return false;
    return true;
  }

  /// Each token's word + position (+ token type) row summed in the output and normalised
  /// there: the lookups', adds' and layer_norm's bits (the same float additions in the same
  /// order), without three intermediate [batch, seq, hidden] tensors.
  Tensor sum_layer_norm(const BertInput& in) const {
    const Tensor &word = word_embeddings->weight, &pos = position_embeddings->weight,
                 &type = token_type_embeddings->weight;
    const std::int64_t n = in.batch * in.seq, h = word.shape()[1];
    const Shape ids_shape{in.batch, in.seq};
    qnum::detail::check_embedding_indices(in.input_ids, ids_shape, word.shape()[0]);
    if (!in.token_type_ids.empty())
      qnum::detail::check_embedding_indices(in.token_type_ids, ids_shape, type.shape()[0]);
    const FloatBuffer wb = qnum::detail::layer_norm_params(LayerNorm->weight, LayerNorm->bias, h);
    FloatBuffer y(static_cast<std::size_t>(n * h));
    constexpr std::int64_t kAhead = 8;  // word rows are scattered over the table: fetch ahead
    auto prefetch_row = [&](std::int64_t i) {
      const char* row = reinterpret_cast<const char*>(word.data() + in.input_ids[static_cast<std::size_t>(i)] * h);
      for (std::int64_t b = 0; b < h * static_cast<std::int64_t>(sizeof(float)); b += 64) __builtin_prefetch(row + b);
    };
    for (std::int64_t i = 0; i < std::min(n, kAhead); ++i) prefetch_row(i);
    for (std::int64_t i = 0; i < n; ++i) {
      if (i + kAhead < n) prefetch_row(i + kAhead);
      const float* w = word.data() + in.input_ids[static_cast<std::size_t>(i)] * h;
      const float* p = pos.data() + (i % in.seq) * h;
      const float* t =
          type.data() + (in.token_type_ids.empty() ? 0 : in.token_type_ids[static_cast<std::size_t>(i)]) * h;
      float* yr = y.data() + i * h;
      for (std::int64_t k = 0; k < h; ++k) yr[k] = (w[k] + p[k]) + t[k];
      qnum::detail::layer_norm_row(yr, yr, nullptr, h, wb.data(), wb.data() + h, LayerNorm->eps);
    }
    return Tensor(Shape{in.batch, in.seq, h}, std::move(y));
  }

  /// e's rows for `ids`, as a module call a trace sees (with `ids_tensor` as its input edge
  /// when the caller has one).
  static Tensor lookup(nn::Embedding& e, std::span<const std::int64_t> ids, const Shape& shape,
                       const Tensor& ids_tensor) {
    auto rows = [&] { return e.forward_indices(ids, shape); };
    return ids_tensor.defined() ? e.observed({ids_tensor}, rows) : e.observed({}, rows);
  }

  std::int64_t max_positions;
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;  // HF's attribute name
  std::shared_ptr<nn::Dropout> dropout;
};

/// Multi-head self-attention: query/key/value projections and the attention itself on
/// Matmul / Softmax layers (quantizable), or the fused kernel when allowed (file comment).
class BertSelfAttention : public nn::Module {
 public:
  BertSelfAttention(const BertConfig& c, std::uint64_t seed)
      : heads(c.num_attention_heads), head_dim(c.hidden_size / c.num_attention_heads) {
    query = register_module("query", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
    key = register_module("key", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
    value = register_module("value", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(detail::to_prob(c.attention_probs_dropout_prob),
                                                                       nn::detail::derive_seed(seed, 2)));
    matmul_qk = register_module("matmul_qk", std::make_shared<nn::Matmul>());
    softmax = register_module("softmax", std::make_shared<nn::Softmax>(-1));
    matmul_pv = register_module("matmul_pv", std::make_shared<nn::Matmul>());
  }
  std::string type_name() const override { return "BertSelfAttention"; }

  /// x [B, T, hidden]; mask: the additive key mask [B, 1, 1, T] (undefined: none).
  Tensor forward_masked(const Tensor& x, const Tensor& mask) { return forward_masked(x, mask, x); }

  /// Attention of the queries of xq [B, Tq, hidden] (x itself, or some of its tokens) over
  /// the keys and values of all of x's tokens -> [B, Tq, hidden].
  Tensor forward_masked(const Tensor& x, const Tensor& mask, const Tensor& xq) {
    const std::int64_t B = x.shape()[0], T = x.shape()[1], Tq = xq.shape()[1];
    auto heads_first = [&](const Tensor& t, std::int64_t n) {
      return permute(reshape(t, {B, n, heads, head_dim}), {0, 2, 1, 3});
    };
    const Tensor ql = detail::call_slot(query, *this, "query", xq), kl = detail::call_slot(key, *this, "key", x),
                 vl = detail::call_slot(value, *this, "value", x);
    // The fused kernel reads the heads in place ([B, T, heads, head_dim], token-major) and
    // writes the merged context: no head split or merge copies.
    // (On a device, scaled_dot_product_attention below is the fused path.)
    if (!ql.is_cuda() && use_fused(ql, kl, vl)) return fused(ql, kl, vl, mask, B, Tq, T);
    // Training (or any gradient): the layers' ops in one, per (batch, head) in cache, with
    // their bits (scaled_dot_product_attention; dropout draws this module's next mask).
    if (use_fused_training(mask, B, T)) {
      const float p = is_training() ? dropout->p : 0.0f;
      return scaled_dot_product_attention(ql, kl, vl, mask, heads, qnum::detail::attention_scale(head_dim), p,
                                          p > 0.0f ? dropout->next_seed() : 0);
    }
    const Tensor q = heads_first(ql, Tq), k = heads_first(kl, T), v = heads_first(vl, T);
    Tensor scores = mul_scalar((*matmul_qk)(q, transpose(k, 2, 3)), qnum::detail::attention_scale(head_dim));
    if (mask.defined()) scores = add(scores, mask);
    const Tensor ctx = (*matmul_pv)((*dropout)((*softmax)(scores)), v);
    return reshape(permute(ctx, {0, 2, 1, 3}), {B, Tq, heads * head_dim});
  }

  /// Whether the fused kernel path may run (see the file comment); `allow_fused` = false
  /// forces the layer path (tests compare the two).
  bool use_fused(const Tensor& q, const Tensor& k, const Tensor& v) const {
    if (!allow_fused || matmul_qk->is_quantized() || softmax->is_quantized() || matmul_pv->is_quantized()) return false;
    if (detail::observed()) return false;
    if (is_training() && dropout->p > 0.0f) return false;
    return !autograd::grad_enabled() || !(q.requires_grad() || k.requires_grad() || v.requires_grad());
  }

  /// Whether scaled_dot_product_attention may stand in for the layers: none quantized, no
  /// observer, softmax over the keys, a [B, 1, 1, T] mask without gradient (or none), and
  /// allow_fused.
  bool use_fused_training(const Tensor& mask, std::int64_t B, std::int64_t T) const {
    if (!allow_fused || matmul_qk->is_quantized() || softmax->is_quantized() || matmul_pv->is_quantized()) return false;
    if (detail::observed() || (softmax->dim != -1 && softmax->dim != 3)) return false;
    return !mask.defined() || (mask.shape() == Shape{B, 1, 1, T} && !mask.requires_grad());
  }

  std::int64_t heads, head_dim;
  bool allow_fused = true;
  std::shared_ptr<nn::Linear> query, key, value;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Matmul> matmul_qk, matmul_pv;
  std::shared_ptr<nn::Softmax> softmax;

 private:
  /// q [B, Tq, hidden], k and v [B, T, hidden] (token-major heads) -> context [B, Tq, hidden].
  Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, std::int64_t B, std::int64_t Tq,
               std::int64_t T) const {
    FloatBuffer out(static_cast<std::size_t>(q.numel()));
    const AttentionShape s{B, heads, Tq, T, head_dim};
    attention_fused(q.data(), k.data(), v.data(), mask.defined() ? mask.data() : nullptr, out.data(), s,
                    AttentionLayout::token_major);
    return Tensor(q.shape(), std::move(out));
  }
};

/// dense + dropout, then LayerNorm(· + residual): BertSelfOutput and BertOutput.
class BertDenseResidual : public nn::Module {
 public:
  BertDenseResidual(std::int64_t in, const BertConfig& c, std::uint64_t seed, const char* type) : type_(type) {
    dense = register_module("dense", std::make_shared<nn::Linear>(in, c.hidden_size));
    LayerNorm = register_module("LayerNorm",
                                std::make_shared<nn::LayerNorm>(c.hidden_size, static_cast<float>(c.layer_norm_eps)));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(detail::to_prob(c.hidden_dropout_prob), seed));
  }
  std::string type_name() const override { return type_; }
  Tensor forward_residual(const Tensor& x, const Tensor& residual) {
    const Tensor h = (*dropout)(detail::call_slot(dense, *this, "dense", x));
    // No trace watching and a float LayerNorm: the sum is formed and normalised row by row
    // (add_layer_norm: add then layer_norm's bits; it is the two ops when a gradient is needed).
    if (!LayerNorm->is_quantized() && !detail::observed())
      return add_layer_norm(h, residual, LayerNorm->weight, LayerNorm->bias, LayerNorm->eps);
    return (*LayerNorm)(add(h, residual));
  }
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  std::shared_ptr<nn::Dropout> dropout;

 private:
  std::string type_;
};

/// self (BertSelfAttention) + output (BertSelfOutput).
class BertAttention : public nn::Module {
 public:
  BertAttention(const BertConfig& c, std::uint64_t seed) {
    self = register_module("self", std::make_shared<BertSelfAttention>(c, seed));
    output = register_module("output", std::make_shared<BertDenseResidual>(
                                           c.hidden_size, c, nn::detail::derive_seed(seed, 3), "BertSelfOutput"));
  }
  std::string type_name() const override { return "BertAttention"; }
  Tensor forward_masked(const Tensor& x, const Tensor& mask) { return forward_masked(x, mask, x); }
  /// xq: the tokens whose outputs are wanted (x itself, or some of its tokens).
  Tensor forward_masked(const Tensor& x, const Tensor& mask, const Tensor& xq) {
    return output->forward_residual(self->forward_masked(x, mask, xq), xq);
  }
  std::shared_ptr<BertSelfAttention> self;
  std::shared_ptr<BertDenseResidual> output;
};

/// dense (hidden → intermediate) + GELU.
class BertIntermediate : public nn::Module {
 public:
  explicit BertIntermediate(const BertConfig& c) {
    dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size));
    intermediate_act_fn = register_module("intermediate_act_fn", std::make_shared<nn::GELU>());
  }
  std::string type_name() const override { return "BertIntermediate"; }
  Tensor forward(const Tensor& x) override {
    return (*intermediate_act_fn)(detail::call_slot(dense, *this, "dense", x));
  }
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::GELU> intermediate_act_fn;
};

/// One encoder layer: attention, intermediate, output.
class BertLayer : public nn::Module {
 public:
  BertLayer(const BertConfig& c, std::uint64_t seed) {
    attention = register_module("attention", std::make_shared<BertAttention>(c, seed));
    intermediate = register_module("intermediate", std::make_shared<BertIntermediate>(c));
    output = register_module("output", std::make_shared<BertDenseResidual>(
                                           c.intermediate_size, c, nn::detail::derive_seed(seed, 4), "BertOutput"));
  }
  std::string type_name() const override { return "BertLayer"; }
  Tensor forward_masked(const Tensor& x, const Tensor& mask) { return forward_masked(x, mask, x); }
  /// The layer's outputs for the tokens of xq only (x's first token, say), keys and values
  /// from all of x: every op after the key/value projections works on xq's rows alone.
  Tensor forward_masked(const Tensor& x, const Tensor& mask, const Tensor& xq) {
    const Tensor a = attention->forward_masked(x, mask, xq);
    return output->forward_residual((*intermediate)(a), a);
  }
  std::shared_ptr<BertAttention> attention;
  std::shared_ptr<BertIntermediate> intermediate;
  std::shared_ptr<BertDenseResidual> output;
};

/// dense + tanh on the first ([CLS]) token.
class BertPooler : public nn::Module {
 public:
  explicit BertPooler(const BertConfig& c) {
    dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
    activation = register_module("activation", std::make_shared<nn::Tanh>());
  }
  std::string type_name() const override { return "BertPooler"; }
  /// hidden [B, T, H] -> [B, H].
  Tensor forward(const Tensor& hidden) override {
    const std::int64_t B = hidden.shape()[0], T = hidden.shape()[1], H = hidden.shape()[2];
    const Tensor first = cls_rows(hidden, B, T, H);
    return (*activation)(detail::call_slot(dense, *this, "dense", first));
  }

 private:
  /// hidden[:, 0, :] (differentiable: a [B, T] one-hot selector as a matmul would cost more).
  static Tensor cls_rows(const Tensor& h, std::int64_t B, std::int64_t T, std::int64_t H) {
    if (h.is_cuda()) return reshape(narrow(h, 1, 0, 1), {B, H});
    FloatBuffer y(static_cast<std::size_t>(B * H));
    for (std::int64_t b = 0; b < B; ++b) std::copy_n(h.data() + b * T * H, H, y.data() + b * H);
    return autograd::make_result("select_cls", Shape{B, H}, std::move(y), {h}, [B, T, H](std::span<const float> g) {
      FloatBuffer gh(static_cast<std::size_t>(B * T * H), 0.0f);
      for (std::int64_t b = 0; b < B; ++b) std::copy_n(g.data() + b * H, H, gh.data() + b * T * H);
      return std::vector<FloatBuffer>{std::move(gh)};
    });
  }

 public:
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::Tanh> activation;
};

/// embeddings, encoder.layer.*, pooler (HF's BertModel).
class BertModel : public nn::Module {
 public:
  BertModel(const BertConfig& c, std::uint64_t seed) {
    embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(c, nn::detail::derive_seed(seed, 10)));
    auto enc = register_module("encoder", std::make_shared<nn::Module>());
    layer = enc->register_module("layer", std::make_shared<detail::ModuleList>());
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
      auto l = std::make_shared<BertLayer>(c, nn::detail::derive_seed(seed, 100 + static_cast<std::uint64_t>(i)));
      layers.push_back(l);
      layer->push_back(l);
    }
    pooler = register_module("pooler", std::make_shared<BertPooler>(c));
  }
  std::string type_name() const override { return "BertModel"; }

  /// The last hidden state [B, T, hidden].
  Tensor encode(const BertInput& in) {
    Tensor x = embeddings->forward(in);
    const Tensor mask = on_device_of(additive_mask(in), x);
    for (auto& l : layers) x = l->forward_masked(x, mask);
    return x;
  }

  /// The last hidden state of the first ([CLS]) token only, [B, 1, hidden] — all the pooler
  /// reads. The last layer computes its query, attention output and feed-forward for that
  /// token alone (its keys and values still come from every token), about a third of the
  /// model's work at bert-tiny's sizes. Same values as encode(in)[:, :1] when
  /// first_token_exact(); in training, dropout draws its masks for the smaller tensors, so
  /// the random stream (not its distribution) differs from encode's.
  Tensor encode_first_token(const BertInput& in) {
    Tensor x = embeddings->forward(in);
    const Tensor mask = on_device_of(additive_mask(in), x);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (i + 1 < layers.size())
        x = layers[i]->forward_masked(x, mask);
      else
        x = layers[i]->forward_masked(x, mask, narrow(x, 1, 0, 1));
    }
    return layers.empty() ? narrow(x, 1, 0, 1) : x;
  }

  /// Whether encode_first_token computes what encode does for the first token: no trace or
  /// module observer is running (they see the whole model), and every op of the last layer
  /// that sees only the first token's rows treats rows independently — no input transform
  /// (activation pruning's threshold spans the tensor) and, where quantized, element-wise
  /// data_in/data_out formats (fixed point, minifloat, log; block, MX and statistics-based
  /// formats group across rows). The key and value projections see every token either way.
  bool first_token_exact() {
    if (detail::observed()) return false;
    if (layers.empty()) return true;
    auto elementwise = [](const std::optional<Format>& f) {
      return !f || f->elementwise();
    };
    const auto& last = layers.back();
    const nn::Module* key = last->attention->self->key.get();
    const nn::Module* value = last->attention->self->value.get();
    for (auto& [name, m] : last->named_modules()) {
      if (m == key || m == value) continue;
      if (const auto* lin = dynamic_cast<const nn::Linear*>(m); lin && lin->input_transform) return false;
      if (const auto* q = dynamic_cast<const nn::Quantizable*>(m))
        if (!elementwise(q->quant().data_in) || !elementwise(q->quant().data_out)) return false;
    }
    return true;
  }

  /// The mask (made on the host from the batch's attention_mask) where the activations are.
  static Tensor on_device_of(const Tensor& mask, const Tensor& x) {
    return mask.defined() && x.is_cuda() ? mask.to(x.device()) : mask;
  }

  /// HF's extended attention mask: 0 on tokens, float32's lowest on padding, [B, 1, 1, T];
  /// undefined when there is no padding (nothing to add).
  /// With attention_mask_tensor given (a traced graph), the mask is an op on that input and
  /// is built even without padding.
  static Tensor additive_mask(const BertInput& in) {
    if (in.attention_mask.empty()) return {};
    bool any = false;
    FloatBuffer m(static_cast<std::size_t>(in.batch * in.seq));
    for (std::size_t i = 0; i < m.size(); ++i) {
      m[i] = in.attention_mask[i] ? 0.0f : std::numeric_limits<float>::lowest();
      any = any || !in.attention_mask[i];
    }
    const Shape shape{in.batch, 1, 1, in.seq};
    if (in.attention_mask_tensor.defined())
      return autograd::make_result("additive_attention_mask", shape, std::move(m), {in.attention_mask_tensor},
                                   [](std::span<const float>) { return std::vector<FloatBuffer>{{}}; });
    if (!any) return {};
    return Tensor(shape, std::move(m));
  }

  std::shared_ptr<BertEmbeddings> embeddings;
  std::shared_ptr<detail::ModuleList> layer;
  std::vector<std::shared_ptr<BertLayer>> layers;
  std::shared_ptr<BertPooler> pooler;
};

/// BertForSequenceClassification: bert, dropout, classifier (logits [B, num_labels]).
class BertForSequenceClassification : public nn::Module {
 public:
  /// A model with HF's initialisation from `seed` (N(0, initializer_range) weights).
  explicit BertForSequenceClassification(BertConfig c, std::uint64_t seed = 0) : config(std::move(c)) {
    config.validate();
    bert = register_module("bert", std::make_shared<BertModel>(config, seed));
    const double p = config.classifier_dropout >= 0 ? config.classifier_dropout : config.hidden_dropout_prob;
    dropout =
        register_module("dropout", std::make_shared<nn::Dropout>(detail::to_prob(p), nn::detail::derive_seed(seed, 5)));
    classifier = register_module("classifier", std::make_shared<nn::Linear>(config.hidden_size, config.num_labels));
    detail::init_bert_weights(*this, config.initializer_range, nn::detail::derive_seed(seed, 6));
  }
  std::string type_name() const override { return "BertForSequenceClassification"; }

  /// Logits [batch, num_labels] for a batch of token ids; sizes and ids are checked.
  Tensor forward(const BertInput& in) {
    check(in);
    const Tensor h = first_token_only && bert->first_token_exact() ? bert->encode_first_token(in) : bert->encode(in);
    return detail::call_slot(classifier, *this, "classifier", (*dropout)((*bert->pooler)(h)));
  }

  /// The single-tensor form (for traces and generic tools): x holds input_ids [B, T] as
  /// whole numbers; no padding, token type 0.
  Tensor forward(const Tensor& x) override {
    qnum::detail::require(x.rank() == 2, "BERT: input_ids tensor must be [batch, seq], got ", to_string(x.shape()));
    std::vector<std::int64_t> ids(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const float v = x.values()[i];
      qnum::detail::require(std::nearbyint(v) == v, "BERT: input id ", v, " is not a whole number");
      ids[i] = static_cast<std::int64_t>(v);
    }
    return forward(BertInput{x.shape()[0], x.shape()[1], ids, {}, {}, x, {}, {}});
  }

  /// The tensor form of a traced graph (MASE's hf_input_names): input_ids, and optionally
  /// attention_mask and token_type_ids, as float tensors [batch, seq] of whole numbers
  /// (undefined: not an input). The graph links them to the ops that read them.
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask, const Tensor& token_type_ids = {}) {
    auto ints = [](const Tensor& t, const char* what, const Shape& want) {
      std::vector<std::int64_t> v;
      if (!t.defined()) return v;
      qnum::detail::require(t.shape() == want, "BERT: ", what, " must be ", to_string(want), " like input_ids, got ",
                            to_string(t.shape()));
      v.resize(static_cast<std::size_t>(t.numel()));
      for (std::size_t i = 0; i < v.size(); ++i) {
        const float f = t.values()[i];
        qnum::detail::require(std::nearbyint(f) == f, "BERT: ", what, " value ", f, " is not a whole number");
        v[i] = static_cast<std::int64_t>(f);
      }
      return v;
    };
    qnum::detail::require(input_ids.defined() && input_ids.rank() == 2, "BERT: input_ids tensor must be [batch, seq]");
    const auto ids = ints(input_ids, "input_ids", input_ids.shape());
    const auto mask = ints(attention_mask, "attention_mask", input_ids.shape());
    const auto types = ints(token_type_ids, "token_type_ids", input_ids.shape());
    return forward(BertInput{input_ids.shape()[0], input_ids.shape()[1], ids, mask, types, input_ids, attention_mask,
                             token_type_ids});
  }

  /// Whether forward computes the last layer for the first token only where that gives the
  /// same logits (BertModel::first_token_exact); false always runs every token through.
  bool first_token_only = true;

  /// Uses (true) or never uses (false) the fused attention kernel where it is allowed.
  void set_fused_attention(bool on) {
    for (auto& l : bert->layers) l->attention->self->allow_fused = on;
  }

  BertConfig config;
  std::shared_ptr<BertModel> bert;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;

 private:
  void check(const BertInput& in) const {
    using qnum::detail::require;
    require(in.batch > 0 && in.seq > 0, "BERT: empty batch (", in.batch, " x ", in.seq, ")");
    const auto n = static_cast<std::size_t>(in.batch * in.seq);
    require(in.input_ids.size() == n, "BERT: ", in.input_ids.size(), " input_ids for a ", in.batch, " x ", in.seq,
            " batch");
    require(in.attention_mask.empty() || in.attention_mask.size() == n, "BERT: ", in.attention_mask.size(),
            " attention_mask values for a ", in.batch, " x ", in.seq, " batch");
    require(in.token_type_ids.empty() || in.token_type_ids.size() == n, "BERT: ", in.token_type_ids.size(),
            " token_type_ids for a ", in.batch, " x ", in.seq, " batch");
    for (std::size_t i = 0; i < in.input_ids.size(); ++i)
      require(in.input_ids[i] >= 0 && in.input_ids[i] < config.vocab_size, "BERT: input id ", in.input_ids[i],
              " at position ", i, " is outside the vocabulary [0, ", config.vocab_size, ")");
    for (std::size_t i = 0; i < in.token_type_ids.size(); ++i)
      require(in.token_type_ids[i] >= 0 && in.token_type_ids[i] < config.type_vocab_size, "BERT: token type id ",
              in.token_type_ids[i], " at position ", i, " is outside [0, ", config.type_vocab_size, ")");
    for (std::size_t i = 0; i < in.attention_mask.size(); ++i)
      require(in.attention_mask[i] == 0 || in.attention_mask[i] == 1, "BERT: attention_mask value ",
              in.attention_mask[i], " at position ", i, " is not 0 or 1");
  }
};

/// A BERT classifier by name (bert_config) with HF's initialisation from `seed`.
inline std::shared_ptr<BertForSequenceClassification> make_bert_model(std::string_view name, std::uint64_t seed = 0,
                                                                      std::int64_t num_labels = 2) {
  return std::make_shared<BertForSequenceClassification>(bert_config(name, num_labels), seed);
}

/// The Forward of a BERT classifier: a batch's token ids, attention mask and token types.
inline Forward bert_forward(std::shared_ptr<BertForSequenceClassification> m) {
  return [m](const data::Batch& b) {
    qnum::detail::require(!b.features.defined(), "BERT takes tokenized text, but the data are feature rows");
    return m->forward(BertInput{b.batch_size, b.seq_len, b.input_ids, b.attention_mask, b.token_type_ids});
  };
}

}  // namespace qnum::models
