// Lab 4's MXINT8 variant on the host: nn::MXInt8PackedLinear's CPU path (the same
// arithmetic as DeviceBackend::mxint8_linear: bf16(x) · bf16(dequantized W) in fp32, + bias),
// models::pack_bert_linears_mxint8 and the byte accounting of models::bert_weight_bytes; the
// device path through the host reference backend (tests/tensor/host_device_backend.hpp).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_packed.hpp"
#include "qnum/nn/packed_int8_linear.hpp"
#include "qnum/nn/packed_linear.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/tensor/ops.hpp"
#include "tensor/host_device_backend.hpp"

using qnum::Tensor;
using qnum_test::error_of;

namespace {

float bf16(float x) { return qnum::detail::mx_bf16_bits_to_float(qnum::detail::mx_float_to_bf16_bits(x)); }

/// MASE's 8-bit integer config on every Linear (examples/configs/bert_int8_qat.toml).
nlohmann::json int8_linears(int x_width = 8, const std::string& name = "integer") {
  return nlohmann::json::parse(R"({"by": "type", "default": {"config": {"name": "NA"}},
      "linear": {"config": {"name": ")" + name + R"(", "data_in_width": )" + std::to_string(x_width) +
                               R"(, "data_in_frac_width": 4, "weight_width": 8,
                            "weight_frac_width": 7, "bias_width": 8, "bias_frac_width": 5}}})");
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t i = 0; i < a.values().size(); ++i)
    if (std::bit_cast<std::uint32_t>(a.values()[i]) != std::bit_cast<std::uint32_t>(b.values()[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("bert.packed: MXInt8PackedLinear on the cpu is bf16(x) times the dequantized weight, plus the bias") {
  const std::int64_t in = 64, out = 5, rows = 3;
  qnum::nn::Linear lin(in, out, true, 11);
  const qnum::nn::MXInt8PackedLinear p(lin, qnum::Device::cpu());
  CHECK(p.packed_bytes() == static_cast<std::size_t>(in * out + in * out / 32));
  CHECK(p.bias_bytes() == static_cast<std::size_t>(out * 4));
  const auto q = qnum::quantize_mxint8_mase_cuda(lin.weight.values(), 32);
  const auto wbits = qnum::dequantize_mxint8_mase_cuda_bf16(q);
  const Tensor x = Tensor::randn({rows, in}, 5);
  const Tensor y = const_cast<qnum::nn::MXInt8PackedLinear&>(p)(x);
  REQUIRE(y.shape() == qnum::Shape{rows, out});
  int far = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t n = 0; n < out; ++n) {
      double ref = lin.bias.values()[static_cast<std::size_t>(n)], mag = std::abs(ref);
      for (std::int64_t k = 0; k < in; ++k) {
        const double prod = double(bf16(x.values()[static_cast<std::size_t>(r * in + k)])) *
                            qnum::detail::mx_bf16_bits_to_float(wbits[static_cast<std::size_t>(n * in + k)]);
        ref += prod;
        mag += std::abs(prod);
      }
      // fp32 sums in some order: within K·2^-24·Σ|terms| of the exact sum.
      far += std::abs(double(y.values()[static_cast<std::size_t>(r * out + n)]) - ref) > double(in) * 0x1p-24 * mag;
    }
  CHECK(far == 0);
  // Close to the fp32 Linear (8-bit mantissas): a loose sanity bound.
  const Tensor y32 = lin(x);
  for (std::size_t i = 0; i < y.values().size(); ++i) CHECK(std::abs(y.values()[i] - y32.values()[i]) < 0.1f);
}

TEST_CASE("bert.packed: what cannot be packed is a qnum::Error") {
  qnum::nn::Linear odd(40, 8);
  CHECK(error_of([&] { qnum::nn::MXInt8PackedLinear(odd, qnum::Device::cpu()); }).find("multiple of 32") !=
        std::string::npos);
  qnum::nn::Linear pruned(64, 8);
  pruned.set_weight_mask(std::vector<float>(64 * 8, 1.0f));
  CHECK(error_of([&] { qnum::nn::MXInt8PackedLinear(pruned, qnum::Device::cpu()); }).find("pruned") !=
        std::string::npos);
  qnum::nn::Linear lin(64, 8);
  const qnum::nn::MXInt8PackedLinear p(lin, qnum::Device::cpu());
  CHECK(error_of([&] { const_cast<qnum::nn::MXInt8PackedLinear&>(p)(Tensor::zeros({2, 32})); })
            .find("in_features 64") != std::string::npos);
}

TEST_CASE("bert.packed: every Linear of a BERT packed, same labels, bytes accounted") {
  const auto config = qnum::models::bert_config("bert:2-64-2-128");
  qnum::models::BertForSequenceClassification fp32(config, 3), packed(config, 3);
  fp32.eval(), packed.eval();
  std::size_t state_bytes = 0;
  for (const auto& [name, t] : fp32.state_dict()) state_bytes += static_cast<std::size_t>(t.numel()) * 4;
  const auto wa = qnum::models::bert_weight_bytes(fp32);
  CHECK(wa.total() == state_bytes);
  CHECK(wa.packed == 0);
  CHECK(wa.other == 0);

  const auto r = qnum::models::pack_bert_linears_mxint8(packed, qnum::Device::cpu());
  CHECK(r.paths.size() == 2 * 6 + 2);  // per layer q, k, v, attention output, intermediate, output; pooler; classifier
  CHECK(r.paths.back() == "classifier");
  CHECK(r.packed_bytes * 32 == r.fp32_weight_bytes / 4 * 33);
  CHECK(packed.bert->layers[0]->attention->self->query == nullptr);  // typed handles cleared
  CHECK(packed.classifier == nullptr);
  CHECK(packed.at("bert.encoder.layer.1.intermediate.dense").type_name() == "MXInt8PackedLinear");
  const auto wb = qnum::models::bert_weight_bytes(packed);
  CHECK(wb.linear_weights == 0);
  CHECK(wb.packed == r.packed_bytes);
  CHECK(wb.embeddings == wa.embeddings);
  CHECK(wb.layer_norms == wa.layer_norms);
  CHECK(wb.linear_biases == wa.linear_biases);
  CHECK(wa.linear_weights == r.fp32_weight_bytes);

  const std::int64_t B = 4, T = 12;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7919) % 30000 + 100);
  for (std::int64_t t = 8; t < T; ++t) mask[static_cast<std::size_t>(3 * T + t)] = 0;  // one padded review
  const qnum::models::BertInput in{B, T, ids, mask, {}};
  qnum::autograd::NoGradGuard no_grad;
  const Tensor a = fp32.forward(in), b = packed.forward(in);
  REQUIRE(a.shape() == b.shape());
  for (std::size_t i = 0; i < a.values().size(); ++i) CHECK(std::abs(a.values()[i] - b.values()[i]) < 0.05f);
}

TEST_CASE("bert.packed: on a device only the packed bytes and the bias are uploaded; forward as the cpu path") {
  auto& backend = qnum::testing::host_device_backend();
  const qnum::Device dev = qnum::Device::cuda();
  const std::int64_t in = 96, out = 7;
  qnum::nn::Linear lin(in, out, true, 4);
  const auto before = backend.memory_stats().allocated;
  auto p = std::make_shared<qnum::nn::MXInt8PackedLinear>(lin, dev);
  CHECK(backend.memory_stats().allocated - before == p->packed_bytes() + p->bias_bytes());
  CHECK(p->bias.is_cuda());
  const qnum::nn::MXInt8PackedLinear host(lin, qnum::Device::cpu());
  const Tensor x = Tensor::randn({2, 3, in}, 9);
  const Tensor y = (*p)(x.to(dev));
  REQUIRE(y.is_cuda());
  REQUIRE(y.shape() == qnum::Shape{2, 3, out});
  const Tensor yc = const_cast<qnum::nn::MXInt8PackedLinear&>(host)(x);
  const auto got = y.to_vector(), want = yc.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-5f * (1 + std::abs(want[i])));
  CHECK(error_of([&] { (*p)(x); }).find("the weight is on cuda:0 but the input on cpu") != std::string::npos);
  const auto outputs = static_cast<std::size_t>(y.numel()) * sizeof(float);  // y is still alive
  p.reset();
  CHECK(backend.memory_stats().allocated == before + outputs);  // the packed bytes and bias freed with the module
}

TEST_CASE("bert.packed: the word table packed too — rows dequantized on lookup, cpu and device alike, bytes accounted") {
  qnum::testing::host_device_backend();
  const auto config = qnum::models::bert_config("bert:2-64-2-128");
  qnum::models::BertForSequenceClassification fp32(config, 3), cpu(config, 3), dev(config, 3);
  fp32.eval(), cpu.eval(), dev.eval();
  const auto wa = qnum::models::bert_weight_bytes(fp32);
  qnum::models::pack_bert_linears_mxint8(cpu, qnum::Device::cpu());
  const auto [fp32_table, packed_table] = qnum::models::pack_bert_word_embeddings_mxint8(cpu, qnum::Device::cpu());
  CHECK(packed_table * 32 == fp32_table / 4 * 33);
  CHECK(cpu.at("bert.embeddings.word_embeddings").type_name() == "MXInt8PackedEmbedding");
  const auto wb = qnum::models::bert_weight_bytes(cpu);
  CHECK(wb.packed_embeddings == packed_table);
  CHECK(wb.embeddings == wa.embeddings - fp32_table);
  // The looked-up rows are the table's dequantized values.
  const std::vector<std::int64_t> ids{5, 17, 5};
  const Tensor rows = cpu.bert->embeddings->word_embeddings->forward_indices(ids, {3});
  const auto q = qnum::quantize_mxint8_mase_cuda(fp32.bert->embeddings->word_embeddings->weight.to_vector(), 32);
  for (std::int64_t k = 0; k < 64; ++k) {
    const auto j = static_cast<std::size_t>(17 * 64 + k);
    CHECK(rows.values()[static_cast<std::size_t>(64 + k)] ==
          qnum::detail::mx_bf16_bits_to_float(qnum::dequantize_mxint8_to_bf16_bits(q.mantissa[j], q.scale[j / 32])));
  }
  // The same model packed for a device classifies as the cpu one.
  qnum::models::pack_bert_linears_mxint8(dev, qnum::Device::cuda());
  qnum::models::pack_bert_word_embeddings_mxint8(dev, qnum::Device::cuda());
  dev.to(qnum::Device::cuda());
  const std::int64_t B = 2, T = 9;
  std::vector<std::int64_t> tok(B * T), mask(B * T, 1);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<std::int64_t>((i * 7919) % 30000 + 100);
  const qnum::models::BertInput in{B, T, tok, mask, {}};
  qnum::autograd::NoGradGuard no_grad;
  const auto a = cpu.forward(in).to_vector(), b = dev.forward(in).to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 1e-4f * (1 + std::abs(a[i])));
}

TEST_CASE("bert.packed: Int8PackedLinear gives the quantized Linear's bits up to K = 1024, within its sum error above") {
  for (const std::int64_t in : {1, 63, 128, 1024, 3072}) {
    for (const auto& [x_width, name] : {std::pair{8, "integer"}, std::pair{6, "integer"}, std::pair{8, "integer_floor"}}) {
      CAPTURE(in);
      CAPTURE(x_width);
      CAPTURE(name);  // integer: codes in one pass; integer_floor (floor rounding): fake-quantize, then codes
      qnum::nn::Linear lin(in, 37, true, 5);
      auto mask = std::vector<float>(static_cast<std::size_t>(in * 37), 1.0f);
      for (std::size_t i = 0; i < mask.size(); i += 3) mask[i] = 0.0f;  // a pruned Linear packs its mask in
      lin.set_weight_mask(mask);
      qnum::nn::Module& m = lin;
      qnum::passes::quantize(m, int8_linears(x_width, name));
      const qnum::nn::Int8PackedLinear p(lin);
      CHECK(p.packed_bytes() >= static_cast<std::size_t>(in * 37));
      CHECK(p.packed_bytes() <= static_cast<std::size_t>(64 * ((in + 63) / 64 * 64) + 64 * 4));  // 32-column panels
      const Tensor x = qnum::mul_scalar(Tensor::randn({2, 9, in}, 8), 3.0f);  // some inputs saturate
      qnum::autograd::NoGradGuard no_grad;
      const Tensor want = lin(x), got = const_cast<qnum::nn::Int8PackedLinear&>(p)(x);
      REQUIRE(got.shape() == qnum::Shape{2, 9, 37});
      if (in <= qnum::kGemmFixed8ExactK) {
        CHECK(same_bits(got, want));
      } else {  // exact int32 sum rounded once vs the fp32 GEMM's partial sums: K·2^-24·Σ|terms|
        const Tensor xq = qnum::fake_quantize(x, *lin.quant().data_in, qnum::Role::activation);
        const Tensor wq = lin.forward_weight();
        int far = 0;
        for (std::int64_t r = 0; r < 18; ++r)
          for (std::int64_t n = 0; n < 37; ++n) {
            double mag = 0;
            for (std::int64_t k = 0; k < in; ++k)
              mag += std::abs(double(xq.values()[static_cast<std::size_t>(r * in + k)]) *
                              wq.values()[static_cast<std::size_t>(n * in + k)]);
            const std::size_t i = static_cast<std::size_t>(r * 37 + n);
            far += std::abs(double(got.values()[i]) - want.values()[i]) > double(in) * 0x1p-24 * mag + 1e-30;
          }
        CHECK(far == 0);
      }
    }
  }
}

TEST_CASE("bert.packed: what cannot be packed as W8A8 is a qnum::Error naming it") {
  qnum::nn::Linear plain(64, 8);
  CHECK(error_of([&] { qnum::nn::Int8PackedLinear{plain}; }).find("data_in and weight on signed fixed point") !=
        std::string::npos);
  qnum::nn::Linear wide(64, 8);
  qnum::nn::Module& m = wide;
  qnum::passes::quantize(m, nlohmann::json::parse(R"({"by": "type", "default": {"config": {"name": "NA"}},
      "linear": {"config": {"name": "integer", "data_in_width": 16, "data_in_frac_width": 8, "weight_width": 8,
                            "weight_frac_width": 7}}})"));
  CHECK(error_of([&] { qnum::nn::Int8PackedLinear{wide}; }).find("integer width<=8") != std::string::npos);
  qnum::nn::Linear lin(64, 8);
  qnum::nn::Module& ml = lin;
  qnum::passes::quantize(ml, int8_linears());
  const qnum::nn::Int8PackedLinear p(lin);
  auto& pm = const_cast<qnum::nn::Int8PackedLinear&>(p);
  CHECK(error_of([&] { pm(Tensor::zeros({2, 32})); }).find("in_features 64") != std::string::npos);
  Tensor nan = Tensor::zeros({1, 64});
  nan.values()[3] = std::nanf("");
  CHECK(error_of([&] { pm(nan); }).find("NaN") != std::string::npos);
  const auto config = qnum::models::bert_config("bert:1-32-2-64");
  qnum::models::BertForSequenceClassification model(config, 1);
  CHECK(error_of([&] { qnum::models::pack_bert_linears_int8(model); })
            .find("pack_bert_linears_int8: 'bert.encoder.layer.0.attention.self.query'") != std::string::npos);
}

TEST_CASE("bert.packed: an 8-bit integer BERT packed W8A8 gives the quantized model's logits bit for bit") {
  const auto config = qnum::models::bert_config("bert:2-64-2-256");
  qnum::models::BertForSequenceClassification quantized(config, 3), packed(config, 3);
  quantized.eval(), packed.eval();
  qnum::passes::quantize(quantized, int8_linears());
  qnum::passes::quantize(packed, int8_linears());
  const auto wa = qnum::models::bert_weight_bytes(quantized);
  const auto r = qnum::models::pack_bert_linears_int8(packed);
  CHECK(r.paths.size() == 2 * 6 + 2);
  CHECK(packed.at("bert.encoder.layer.0.output.dense").type_name() == "Int8PackedLinear");
  const auto wb = qnum::models::bert_weight_bytes(packed);
  CHECK(wb.linear_weights == 0);
  CHECK(wb.packed == r.packed_bytes);
  CHECK(r.packed_bytes < r.fp32_weight_bytes / 3);  // ~1 byte a weight against 4
  CHECK(wb.linear_biases == wa.linear_biases);
  const std::int64_t B = 3, T = 16;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7919) % 30000 + 100);
  for (std::int64_t t = 10; t < T; ++t) mask[static_cast<std::size_t>(2 * T + t)] = 0;
  const qnum::models::BertInput in{B, T, ids, mask, {}};
  qnum::autograd::NoGradGuard no_grad;
  CHECK(same_bits(quantized.forward(in), packed.forward(in)));
}

TEST_CASE("bert.packed: packed checkpoints load back to the identical model; bad ones are errors naming the layer") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("qnum-packed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto config = qnum::models::bert_config("bert:2-64-2-256");
  const std::int64_t B = 2, T = 12;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 104729) % 30000 + 100);
  const qnum::models::BertInput in{B, T, ids, mask, {}};
  for (const bool int8 : {true, false}) {
    CAPTURE(int8);
    qnum::models::BertForSequenceClassification packed(config, 4), fresh(config, 9);
    packed.eval(), fresh.eval();
    if (int8) qnum::passes::quantize(packed, int8_linears());
    const auto r = int8 ? qnum::models::pack_bert_linears_int8(packed)
                        : qnum::models::pack_bert_linears_mxint8(packed, qnum::Device::cpu());
    if (!int8) qnum::models::pack_bert_word_embeddings_mxint8(packed, qnum::Device::cpu());  // the table too
    auto state = qnum::models::packed_state(packed);
    CHECK(state.meta.size() == r.paths.size() + (int8 ? 0 : 1));
    CHECK(state.bytes.size() == r.paths.size() * (int8 ? 1 : 2) + (int8 ? 0 : 2));
    const nlohmann::json meta = {{"structure", qnum::passes::describe_structure(packed)}, {"packed", state.meta}};
    const auto file = qnum::train::save_checkpoint(dir, "m", packed, nullptr, meta, state.bytes);
    // About a byte a weight: the codes (and MXINT8's scale per 32) beside the float tensors.
    std::size_t floats = 0;
    for (const auto& [name, t] : packed.state_dict()) floats += static_cast<std::size_t>(t.numel()) * 4;
    const std::size_t weights = r.fp32_weight_bytes / 4 + (int8 ? 0 : 30522 * 64);
    CHECK(fs::file_size(file) > floats + weights);
    CHECK(fs::file_size(file) < floats + weights + weights / 32 + 64 * 1024);

    const auto st = qnum::read_safetensors(file);
    qnum::passes::restore_structure(fresh, meta["structure"]);
    qnum::models::restore_packed(fresh, meta["packed"], st.bytes);
    qnum::train::load_checkpoint(dir / "m", fresh, nullptr);
    CHECK(fresh.at("bert.encoder.layer.1.output.dense").type_name() == (int8 ? "Int8PackedLinear" : "MXInt8PackedLinear"));
    CHECK(fresh.at("bert.embeddings.word_embeddings").type_name() == (int8 ? "Embedding" : "MXInt8PackedEmbedding"));
    qnum::autograd::NoGradGuard no_grad;
    CHECK(same_bits(packed.forward(in), fresh.forward(in)));

    // A plain model cannot take the packed checkpoint; broken metadata or bytes name the layer.
    qnum::models::BertForSequenceClassification plain(config, 1);
    CHECK(error_of([&] { qnum::train::load_checkpoint(dir / "m", plain, nullptr); }).find("weight") != std::string::npos);
    const std::string q = "bert.encoder.layer.0.attention.self.query";
    auto bad_meta = meta["packed"];
    bad_meta[q]["kind"] = "nvfp4";
    qnum::models::BertForSequenceClassification other(config, 1);
    CHECK(error_of([&] { qnum::models::restore_packed(other, bad_meta, st.bytes); }) ==
          "packed layer '" + q + "': unknown kind 'nvfp4' (known: int8, mxint8, mxint8_embedding)");
    CHECK(other.at(q).type_name() == "Linear");  // nothing replaced
    bad_meta = meta["packed"];
    bad_meta[q]["in"] = 32;
    CHECK(error_of([&] { qnum::models::restore_packed(other, bad_meta, st.bytes); })
              .find("packed layer '" + q + "': the model has no 64 x 32 Linear there") != std::string::npos);
    auto bad_bytes = st.bytes;
    bad_bytes[q + ".weight_codes"].shape = {32, 128};
    CHECK(error_of([&] { qnum::models::restore_packed(other, meta["packed"], bad_bytes); })
              .find("tensor '" + q + ".weight_codes' (I8 [64, 64]) is missing or of another dtype or shape") !=
          std::string::npos);
    bad_bytes.erase(q + ".weight_codes");
    CHECK(error_of([&] { qnum::models::restore_packed(other, meta["packed"], bad_bytes); }).find("is missing") !=
          std::string::npos);
    // Byte tensors without a "packed" description are refused.
    std::map<std::string, qnum::Tensor> none;
    qnum::write_safetensors(dir / "x.safetensors", none, {}, {{"a", {"U8", {1}, {7}}}});
    CHECK(error_of([&] { qnum::train::load_checkpoint(dir / "x", plain, nullptr); })
              .find("holds byte tensors ('a') but no 'packed' description") != std::string::npos);
  }
  fs::remove_all(dir);
}
