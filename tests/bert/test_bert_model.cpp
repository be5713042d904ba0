// BERT for sequence classification: Hugging Face checkpoint and logits (fixture written by
// tests/fixtures/bert/make_fixture.py with transformers), parameter names and counts, configs,
// padding invariance, fused-kernel attention, gradients, bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_hf.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"

using qnum::Tensor;
using qnum::models::BertConfig;
using qnum::models::BertForSequenceClassification;
using qnum::models::BertInput;
using qnum_test::error_of;

namespace {

const std::filesystem::path kFixture = std::filesystem::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "bert";

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("qnum-bert-test-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::vector<std::int64_t> flat(const nlohmann::json& rows) {
  std::vector<std::int64_t> v;
  for (const auto& r : rows)
    for (const auto& x : r) v.push_back(x.get<std::int64_t>());
  return v;
}

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 24;
  c.max_position_embeddings = 32;
  c.num_labels = 3;
  c.initializer_range = 0.3;
  return c;
}

}  // namespace

TEST_CASE("bert: a Hugging Face checkpoint loads and its logits match transformers' to 1e-5") {
  const BertConfig c = BertConfig::from_file(kFixture / "config.json");
  CHECK(c.vocab_size == 99);
  CHECK(c.hidden_size == 32);
  CHECK(c.num_attention_heads == 4);
  CHECK(c.intermediate_size == 37);
  CHECK(c.num_labels == 3);
  BertForSequenceClassification model(c, 7);
  const auto report = qnum::models::load_hf_bert(model, kFixture / "model.safetensors");
  CHECK(report.missing.empty());
  CHECK(report.loaded == static_cast<std::int64_t>(model.state_dict().size()));
  model.eval();

  const auto expected = nlohmann::json::parse(qnum::read_file(kFixture / "expected.json"));
  const auto ids = flat(expected["input_ids"]), mask = flat(expected["attention_mask"]),
             types = flat(expected["token_type_ids"]);
  const std::int64_t B = static_cast<std::int64_t>(expected["input_ids"].size());
  const std::int64_t T = static_cast<std::int64_t>(expected["input_ids"][0].size());
  for (bool fused : {false, true}) {
    CAPTURE(fused);
    model.set_fused_attention(fused);
    qnum::autograd::NoGradGuard no_grad;
    const BertInput in{B, T, ids, mask, types};
    const Tensor logits = model.forward(in);
    REQUIRE(logits.shape() == qnum::Shape{B, 3});
    double worst = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t k = 0; k < 3; ++k)
        worst = std::max(worst, std::abs(logits.values()[static_cast<std::size_t>(b * 3 + k)] -
                                         expected["logits"][b][k].get<double>()));
    CHECK(worst < 1e-5);
    // The hidden states of real tokens too (padding rows are not compared: HF's are
    // averages over masked keys that nothing reads).
    const Tensor h = model.bert->encode(in);
    double worst_h = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        if (!mask[static_cast<std::size_t>(b * T + t)]) continue;
        for (std::int64_t d = 0; d < 32; ++d)
          worst_h = std::max(worst_h, std::abs(h.values()[static_cast<std::size_t>((b * T + t) * 32 + d)] -
                                               expected["last_hidden_state"][b][t][d].get<double>()));
      }
    CHECK(worst_h < 1e-5);
  }
}

TEST_CASE("bert: bert-tiny has the spec's parameter counts and Hugging Face's names") {
  auto m = qnum::models::make_bert_model("bert-tiny", 0);
  CHECK(m->num_parameters() == 4386178);
  const auto named = m->named_parameters();
  std::int64_t emb = 0, layer0 = 0, pooler = 0, cls = 0;
  for (const auto& [name, t] : named) {
    if (name.starts_with("bert.embeddings.")) emb += t.numel();
    if (name.starts_with("bert.encoder.layer.0.")) layer0 += t.numel();
    if (name.starts_with("bert.pooler.")) pooler += t.numel();
    if (name.starts_with("classifier.")) cls += t.numel();
  }
  CHECK(emb == 3972864);
  CHECK(layer0 == 198272);
  CHECK(pooler == 16512);
  CHECK(cls == 258);
  const auto sd = m->state_dict();
  for (const char* key :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.encoder.layer.1.attention.self.query.weight", "bert.encoder.layer.1.attention.self.value.bias",
        "bert.encoder.layer.0.attention.output.dense.weight", "bert.encoder.layer.0.attention.output.LayerNorm.bias",
        "bert.encoder.layer.0.intermediate.dense.weight", "bert.encoder.layer.0.output.dense.weight",
        "bert.encoder.layer.0.output.LayerNorm.weight", "bert.pooler.dense.weight", "classifier.weight",
        "classifier.bias"})
    CHECK_MESSAGE(sd.count(key) == 1, key);
  CHECK(sd.size() == named.size());
  // 14 Linear layers (spec §8.2), 4 attention Matmuls/Softmaxes as layers.
  int linears = 0, matmuls = 0, softmaxes = 0;
  for (auto& [name, mod] : m->named_modules()) {
    linears += mod->op_name() == "linear";
    matmuls += mod->op_name() == "matmul";
    softmaxes += mod->op_name() == "softmax";
  }
  CHECK(linears == 14);
  CHECK(matmuls == 4);
  CHECK(softmaxes == 2);
}

TEST_CASE("bert: other sizes are applied (presets, bert:L-H-A-I, config.json)") {
  const auto c = qnum::models::bert_config("bert:3-64-4-100");
  CHECK(c.num_hidden_layers == 3);
  CHECK(c.hidden_size == 64);
  CHECK(c.num_attention_heads == 4);
  CHECK(c.intermediate_size == 100);
  BertForSequenceClassification m(c, 1);
  CHECK(m.bert->layers.size() == 3);
  CHECK(m.bert->layers[2]->attention->self->heads == 4);
  CHECK(m.bert->layers[2]->attention->self->head_dim == 16);
  CHECK(m.state_dict().at("bert.encoder.layer.2.intermediate.dense.weight").shape() == qnum::Shape{100, 64});
  CHECK(qnum::models::bert_config("bert-mini").num_hidden_layers == 4);
  CHECK(qnum::models::bert_config("bert-mini").hidden_size == 256);
  // Round trip through HF's config.json fields.
  const auto back = BertConfig::from_json(c.to_json());
  CHECK(back.num_hidden_layers == 3);
  CHECK(back.intermediate_size == 100);
  CHECK(back.num_labels == 2);
  CHECK(error_of([] { (void)qnum::models::bert_config("bert-huge"); }).find("unknown BERT model") != std::string::npos);
  CHECK(error_of([] { (void)qnum::models::bert_config("bert:2-100-3"); }).find("not a multiple") != std::string::npos);
  CHECK(error_of([] { (void)qnum::models::bert_config("bert:2-x-2"); }).find("'x' is not a positive integer") !=
        std::string::npos);
}

TEST_CASE("bert: malformed config.json gives errors naming the problem; unknown keys are ignored") {
  const auto dir = temp_dir("config");
  auto write = [&](const std::string& text) {
    qnum::write_file_atomic(dir / "config.json", text);
    return dir / "config.json";
  };
  CHECK(BertConfig::from_file(write(R"({"hidden_size": 64, "num_attention_heads": 4, "some_future_key": [1]})"))
            .hidden_size == 64);
  CHECK(error_of([&] { (void)BertConfig::from_file(write("{not json")); }).find("is not valid JSON") !=
        std::string::npos);
  CHECK(error_of([&] {
          (void)BertConfig::from_file(write(R"({"hidden_size": "128"})"));
        }).find("'hidden_size' must be an integer") != std::string::npos);
  CHECK(error_of([&] {
          (void)BertConfig::from_file(write(R"({"layer_norm_eps": null})"));
        }).find("'layer_norm_eps' must be a number") != std::string::npos);
  CHECK(error_of([&] {
          (void)BertConfig::from_file(write(R"({"hidden_act": "relu"})"));
        }).find("hidden_act 'relu' is not supported") != std::string::npos);
  CHECK(error_of([&] { (void)BertConfig::from_file(write(R"({"model_type": "gpt2"})")); }).find("is not \"bert\"") !=
        std::string::npos);
  CHECK(error_of([&] {
          (void)BertConfig::from_file(write(R"({"num_hidden_layers": 0})"));
        }).find("num_hidden_layers must be > 0") != std::string::npos);
  CHECK(error_of([&] { (void)BertConfig::from_file(dir / "missing.json"); }).find("not found") != std::string::npos);
  CHECK(BertConfig::from_file(write(R"({"id2label": {"0": "a", "1": "b", "2": "c", "3": "d"}})")).num_labels == 4);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bert: a checkpoint that does not fit the config names the tensor; nothing changes") {
  BertConfig c = BertConfig::from_file(kFixture / "config.json");
  c.intermediate_size = 40;
  BertForSequenceClassification m(c, 3);
  const auto before = m.state_dict();
  const auto err = error_of([&] { qnum::models::load_hf_bert(m, kFixture / "model.safetensors"); });
  CHECK(err.find("tensor 'bert.encoder.layer.0.intermediate.dense.bias' has shape [37]") != std::string::npos);
  CHECK(err.find("expects [40]") != std::string::npos);
  for (const auto& [name, t] : m.state_dict()) CHECK(t.to_vector() == before.at(name).to_vector());
  // Fewer layers in the checkpoint than in the config: the missing tensor is named.
  c = BertConfig::from_file(kFixture / "config.json");
  c.num_hidden_layers = 3;
  BertForSequenceClassification deeper(c, 3);
  CHECK(error_of([&] {
          qnum::models::load_hf_bert(deeper, kFixture / "model.safetensors");
        }).find("no tensor 'bert.encoder.layer.2.") != std::string::npos);
  // Bad ids and lengths.
  BertForSequenceClassification ok(tiny_config(), 1);
  const std::vector<std::int64_t> ids{1, 2, 60};
  CHECK(error_of([&] {
          (void)ok.forward(BertInput{1, 3, ids, {}, {}});
        }).find("outside the vocabulary") != std::string::npos);
  const std::vector<std::int64_t> long_ids(40, 1);
  CHECK(error_of([&] {
          (void)ok.forward(BertInput{1, 40, long_ids, {}, {}});
        }).find("exceeds max_position_embeddings") != std::string::npos);
}

TEST_CASE("bert: a checkpoint written by qnum reloads bit-exactly") {
  const auto dir = temp_dir("reload");
  BertForSequenceClassification a(tiny_config(), 11), b(tiny_config(), 12);
  qnum::train::save_checkpoint(dir, "m", a, nullptr, nlohmann::json::object());
  qnum::train::load_checkpoint(dir / "m.safetensors", b, nullptr);
  const auto sa = a.state_dict(), sb = b.state_dict();
  for (const auto& [name, t] : sa) CHECK_MESSAGE(t.to_vector() == sb.at(name).to_vector(), name);
  // And as a Hugging Face file: load_hf_bert reads the same file.
  BertForSequenceClassification c(tiny_config(), 13);
  qnum::models::load_hf_bert(c, dir / "m.safetensors");
  for (const auto& [name, t] : c.state_dict()) CHECK_MESSAGE(t.to_vector() == sa.at(name).to_vector(), name);
  a.eval();
  b.eval();
  const std::vector<std::int64_t> ids{2, 5, 7, 9, 3, 2, 4, 3, 0, 0}, mask{1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  const Tensor ya = a.forward(BertInput{2, 5, ids, mask, {}}), yb = b.forward(BertInput{2, 5, ids, mask, {}});
  CHECK(ya.to_vector() == yb.to_vector());
  std::filesystem::remove_all(dir);
}

TEST_CASE("bert: padding does not change the outputs of the real tokens") {
  BertForSequenceClassification m(tiny_config(), 5);
  m.eval();
  for (bool fused : {false, true}) {
    CAPTURE(fused);
    m.set_fused_attention(fused);
    const std::vector<std::int64_t> ids{2, 11, 12, 13, 3}, types{0, 0, 1, 1, 1};
    const Tensor h = m.bert->encode(BertInput{1, 5, ids, {}, types});
    const Tensor y = m.forward(BertInput{1, 5, ids, {}, types});
    std::vector<std::int64_t> pids = ids, pmask(5, 1), ptypes = types;
    for (int i = 0; i < 4; ++i) {
      pids.push_back(7 + i);  // junk ids under the mask
      pmask.push_back(0);
      ptypes.push_back(1);
    }
    const Tensor hp = m.bert->encode(BertInput{1, 9, pids, pmask, ptypes});
    const Tensor yp = m.forward(BertInput{1, 9, pids, pmask, ptypes});
    for (std::int64_t t = 0; t < 5; ++t)
      for (std::int64_t d = 0; d < 16; ++d)
        CHECK(hp.values()[static_cast<std::size_t>(t * 16 + d)] ==
              doctest::Approx(h.values()[static_cast<std::size_t>(t * 16 + d)]).epsilon(1e-5));
    for (int k = 0; k < 3; ++k) CHECK(yp.values()[k] == doctest::Approx(y.values()[k]).epsilon(1e-5));
  }
}

TEST_CASE("bert: fused-kernel attention equals the layer path within the kernel's 1e-5*max|V|") {
  BertConfig c = tiny_config();
  c.hidden_size = 64;
  c.num_attention_heads = 2;
  c.max_position_embeddings = 80;
  BertForSequenceClassification m(c, 9);
  m.eval();
  const std::int64_t B = 3, T = 70;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::int64_t i = 0; i < B * T; ++i) ids[static_cast<std::size_t>(i)] = (i * 7 + 3) % 50;
  for (std::int64_t t = 40; t < T; ++t) mask[static_cast<std::size_t>(T + t)] = 0;  // row 1 padded
  const BertInput in{B, T, ids, mask, {}};
  auto& self = *m.bert->layers[0]->attention->self;
  auto no_grad = std::make_unique<qnum::autograd::NoGradGuard>();
  const Tensor x = m.bert->embeddings->forward(in);
  const Tensor mk = qnum::models::BertModel::additive_mask(in);
  const auto heads = [&](const Tensor& t) { return qnum::permute(qnum::reshape(t, {B, T, 2, 32}), {0, 2, 1, 3}); };
  const Tensor v = heads((*self.value)(x));
  float vmax = 0;
  for (float e : v.values()) vmax = std::max(vmax, std::abs(e));
  self.allow_fused = false;
  const Tensor slow = self.forward_masked(x, mk);
  self.allow_fused = true;
  CHECK(self.use_fused(v, v, v));
  const Tensor fast = self.forward_masked(x, mk);
  double worst = 0;
  for (std::size_t i = 0; i < slow.values().size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(slow.values()[i] - fast.values()[i])));
  CHECK(worst <= 1e-5 * vmax);
  CHECK(worst > 0.0);  // two different computations, not one path twice
  // A quantized softmax or a recorded gradient forces the layer path.
  const Tensor req = v.detach();
  CHECK(self.use_fused(req, req, req));
  no_grad.reset();
  CHECK_FALSE(self.use_fused(Tensor::randn({2}, 1, 0.0f, 1.0f, true), req, req));  // grad mode on, input needs grad
  qnum::nn::QuantConfig qc;
  qc.data_in = qnum::Format::parse("integer:width=8,frac_width=4");
  self.softmax->set_quant(qc);
  CHECK_FALSE(self.use_fused(req, req, req));
}

TEST_CASE("bert: inference's one-pass embeddings and residual LayerNorms give the modules' bits") {
  BertForSequenceClassification m(tiny_config(), 4);
  m.eval();
  const std::int64_t B = 3, T = 11;
  std::vector<std::int64_t> ids(B * T), types(B * T);
  for (std::int64_t i = 0; i < B * T; ++i) {
    ids[static_cast<std::size_t>(i)] = (i * 13 + 5) % 50;
    types[static_cast<std::size_t>(i)] = (i / 4) % 2;
  }
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() &&
           std::equal(a.values().begin(), a.values().end(), b.values().begin(), [](float x, float y) {
             return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
           });
  };
  auto& emb = *m.bert->embeddings;
  auto& out = *m.bert->layers[0]->output;
  const Tensor h = Tensor::randn({B, T, 24}, 1), residual = Tensor::randn({B, T, 16}, 2);
  for (const bool with_types : {false, true}) {
    const BertInput in{
        B, T, ids, {}, with_types ? std::span<const std::int64_t>(types) : std::span<const std::int64_t>()};
    CHECK_FALSE(emb.fusable());  // grad mode on, trainable weights: the module path
    const Tensor modules = emb.forward(in);
    const Tensor modules_res = out.forward_residual(h, residual);
    qnum::autograd::NoGradGuard no_grad;
    CHECK(emb.fusable());
    CHECK(same_bits(emb.forward(in), modules));
    CHECK(same_bits(out.forward_residual(h, residual), modules_res));
  }
  qnum::autograd::NoGradGuard no_grad;
  std::vector<std::int64_t> bad_types(B * T, 0);
  bad_types[7] = 2;  // type_vocab_size is 2
  CHECK(error_of([&] {
          emb.forward(BertInput{B, T, ids, {}, bad_types});
        }).find("index 2 at position 7") != std::string::npos);
  std::vector<std::int64_t> bad_ids = ids;
  bad_ids[0] = 50;
  CHECK(error_of([&] {
          emb.forward(BertInput{B, T, bad_ids, {}, {}});
        }).find("out of range [0, 50)") != std::string::npos);
}

TEST_CASE("bert: training through scaled_dot_product_attention gives the layer path's bits") {
  // Two copies of one model (same seed: same weights and dropout streams), one with its
  // attention layers forced to the op-by-op path: logits and every gradient must agree bit
  // for bit over two steps (dropout masks drawn in the same order), padded or not, with the
  // first-token shortcut or not.
  const std::int64_t B = 3, T = 9;
  std::vector<std::int64_t> ids(B * T), labels{0, 2, 1};
  for (std::int64_t i = 0; i < B * T; ++i) ids[static_cast<std::size_t>(i)] = (i * 7 + 3) % 50;
  std::vector<std::int64_t> padded(B * T, 1);
  for (std::int64_t j = 6; j < T; ++j) padded[static_cast<std::size_t>(T + j)] = 0;  // row 1: 3 pad tokens
  auto bits = [](std::span<const float> x) {
    std::vector<std::uint32_t> b;
    for (const float f : x) b.push_back(std::bit_cast<std::uint32_t>(f));
    return b;
  };
  for (const bool first_token : {true, false})
    for (const bool with_padding : {false, true}) {
      CAPTURE(first_token);
      CAPTURE(with_padding);
      BertForSequenceClassification fused(tiny_config(), 31), layers(tiny_config(), 31);
      for (auto* m : {&fused, &layers}) {
        m->train();
        m->first_token_only = first_token;
      }
      for (auto& l : layers.bert->layers) l->attention->self->allow_fused = false;
      const BertInput in{
          B, T, ids, with_padding ? std::span<const std::int64_t>(padded) : std::span<const std::int64_t>(), {}};
      for (int step = 0; step < 2; ++step) {
        CAPTURE(step);
        std::vector<std::vector<std::uint32_t>> got[2];
        int k = 0;
        for (auto* m : {&fused, &layers}) {
          for (Tensor& p : m->parameters()) p.zero_grad();
          const Tensor logits = m->forward(in);
          qnum::cross_entropy(logits, labels).backward();
          got[k].push_back(bits(logits.values()));
          for (const Tensor& p : m->parameters()) got[k].push_back(bits(p.grad()));
          ++k;
        }
        CHECK(got[0] == got[1]);
      }
    }
}

TEST_CASE("bert: attention block gradients match finite differences") {
  BertConfig c = tiny_config();
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  BertForSequenceClassification m(c, 21);
  m.train();
  auto& attn = *m.bert->layers[0]->attention;
  const std::int64_t B = 2, T = 4;
  const std::vector<std::int64_t> mask{1, 1, 1, 1, 1, 1, 0, 0}, ids(8, 1);
  const Tensor mk = qnum::models::BertModel::additive_mask(BertInput{B, T, ids, mask, {}});
  Tensor x = Tensor::randn({B, T, 8}, 4, 0.0f, 1.0f, true);
  const Tensor w = Tensor::randn({B, T, 8}, 5);
  auto loss_of = [&] { return qnum::sum(qnum::mul(attn.forward_masked(x, mk), w)); };
  const Tensor loss = loss_of();
  loss.backward();
  auto check_param = [&](Tensor p, const char* what) {
    const std::vector<float> g = p.grad_tensor().to_vector();
    for (std::size_t i = 0; i < g.size(); i += 3) {
      const float keep = p.values()[i];
      const float eps = 1e-2f;
      double lp, lm;
      {
        qnum::autograd::NoGradGuard ng;
        p.values()[i] = keep + eps;
        lp = loss_of().item();
        p.values()[i] = keep - eps;
        lm = loss_of().item();
        p.values()[i] = keep;
      }
      const double fd = (lp - lm) / (2.0 * eps);
      CAPTURE(what);
      CAPTURE(i);
      CHECK(g[i] == doctest::Approx(fd).epsilon(2e-2).scale(1.0));
    }
  };
  check_param(x, "input");
  check_param(attn.self->query->weight, "query.weight");
  check_param(attn.self->key->weight, "key.weight");
  check_param(attn.self->value->bias, "value.bias");
  check_param(attn.output->LayerNorm->weight, "output.LayerNorm.weight");
}

TEST_CASE("bert: whole-model gradients (embeddings, pooler, classifier) match finite differences") {
  BertConfig c = tiny_config();
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.intermediate_size = 12;
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  BertForSequenceClassification m(c, 23);
  m.train();
  const std::vector<std::int64_t> ids{2, 7, 9, 11, 3, 2, 4, 3, 0, 0}, mask{1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      types{0, 0, 1, 1, 1, 0, 0, 0, 0, 0}, labels{2, 0};
  const BertInput in{2, 5, ids, mask, types};
  auto loss_of = [&] { return qnum::cross_entropy(m.forward(in), labels); };
  m.zero_grad();
  loss_of().backward();
  for (auto& [name, p] : m.named_parameters()) {
    Tensor q = p;
    const std::vector<float> g = q.grad_tensor().to_vector();
    std::vector<std::size_t> picks;
    for (std::size_t i = 0; i < g.size(); i += std::max<std::size_t>(1, g.size() / 5)) picks.push_back(i);
    if (name.find("word_embeddings") != std::string::npos) picks = {7 * 8, 7 * 8 + 3, 11 * 8 + 1, 5 * 8};
    for (std::size_t i : picks) {
      const float keep = q.values()[i];
      const float eps = 5e-3f;
      double lp, lm;
      {
        qnum::autograd::NoGradGuard ng;
        q.values()[i] = keep + eps;
        lp = loss_of().item();
        q.values()[i] = keep - eps;
        lm = loss_of().item();
        q.values()[i] = keep;
      }
      const double fd = (lp - lm) / (2.0 * eps);
      CAPTURE(name);
      CAPTURE(i);
      CHECK(g[i] == doctest::Approx(fd).epsilon(3e-2).scale(0.05));
    }
  }
}

TEST_CASE("bert: the first-token last layer gives the full model's logits and gradients") {
  BertConfig c = tiny_config();
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  BertForSequenceClassification m(c, 31);
  const std::int64_t B = 3, T = 11;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::int64_t i = 0; i < B * T; ++i) ids[static_cast<std::size_t>(i)] = (i * 5 + 2) % 50;
  for (std::int64_t t = 7; t < T; ++t) mask[static_cast<std::size_t>(T + t)] = 0;  // row 1 padded
  const BertInput in{B, T, ids, mask, {}};
  auto logits = [&](bool first_only) {
    m.first_token_only = first_only;
    return m.forward(in).to_vector();
  };
  m.eval();
  REQUIRE(m.bert->first_token_exact());
  for (bool fused : {false, true}) {
    CAPTURE(fused);
    m.set_fused_attention(fused);
    qnum::autograd::NoGradGuard ng;
    const auto full = logits(false), first = logits(true);
    for (std::size_t i = 0; i < full.size(); ++i) CHECK(first[i] == doctest::Approx(full[i]).epsilon(1e-6));
  }
  // A shape check: the shortcut's hidden state is [B, 1, hidden].
  CHECK(m.bert->encode_first_token(in).shape() == qnum::Shape{B, 1, 16});

  // Training: the same loss and parameter gradients (dropout off, so no random stream).
  m.train();
  auto grads = [&](bool first_only) {
    for (auto& p : m.parameters()) p.zero_grad();
    m.first_token_only = first_only;
    const Tensor loss = qnum::sum(qnum::mul(m.forward(in), Tensor::randn({B, 3}, 3)));
    loss.backward();
    std::vector<std::vector<float>> g;
    for (auto& p : m.parameters()) g.push_back(p.grad_tensor().to_vector());
    return std::pair{loss.item(), g};
  };
  const auto [loss_full, g_full] = grads(false);
  const auto [loss_first, g_first] = grads(true);
  CHECK(loss_first == doctest::Approx(loss_full).epsilon(1e-6));
  REQUIRE(g_full.size() == g_first.size());
  for (std::size_t p = 0; p < g_full.size(); ++p) {
    CAPTURE(p);
    REQUIRE(g_full[p].size() == g_first[p].size());
    // Equal up to float rounding (the products run on different row counts): within 1e-4
    // of the parameter's largest gradient, plus 1e-7 for the key biases, whose gradient is
    // zero in exact arithmetic (softmax ignores a shift shared by all of a query's scores)
    // and rounding noise here.
    float gmax = 0, worst = 0;
    for (std::size_t i = 0; i < g_full[p].size(); ++i) {
      gmax = std::max(gmax, std::abs(g_full[p][i]));
      worst = std::max(worst, std::abs(g_first[p][i] - g_full[p][i]));
    }
    CHECK(gmax > 0.0f);
    CHECK(worst <= 1e-4f * gmax + 1e-7f);
  }

  // Element-wise formats keep the shortcut; a block format on a row-subset operand, or an
  // input transform, turns it off (they group across rows).
  auto& last = *m.bert->layers.back();
  qnum::nn::QuantConfig fixed;
  fixed.data_in = qnum::Format::parse("integer:width=8,frac_width=4");
  last.intermediate->dense->set_quant(fixed);
  CHECK(m.bert->first_token_exact());
  qnum::nn::QuantConfig block;
  block.data_in = qnum::Format::parse("block_fp:width=8,exponent_width=8,block_size=16");
  last.attention->self->key->set_quant(block);  // sees every token: still exact
  CHECK(m.bert->first_token_exact());
  last.output->dense->set_quant(block);
  CHECK_FALSE(m.bert->first_token_exact());
}
