// The quantize pass: MASE's configs select exactly the intended layers by type, name and
// regex; quantized layers compute linear(q(x), q(W), q(b)) with straight-through gradients;
// the caller's config is untouched; bad configs are named errors; QAT and PTQ behave.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/models/jsc.hpp"
#include "qnum/passes/passes.hpp"
#include "qnum/train/train.hpp"
#include "error_of.hpp"
#include "train/helpers.hpp"

using nlohmann::json;
namespace passes = qnum::passes;
namespace nn = qnum::nn;
using qnum_test::error_of;

namespace {

/// Tutorial 3's config (also labs 1 and 2): integer 8/4 on every Linear, nothing else.
json tutorial3_config() {
  return json::parse(R"({
    "by": "type",
    "default": {"config": {"name": null}},
    "linear": {"config": {"name": "integer",
      "data_in_width": 8, "data_in_frac_width": 4,
      "weight_width": 8, "weight_frac_width": 4,
      "bias_width": 8, "bias_frac_width": 4}}})");
}

json integer_linear(int width, int frac) {
  json c = tutorial3_config();
  for (const char* op : {"data_in", "weight", "bias"}) {
    c["linear"]["config"][std::string(op) + "_width"] = width;
    c["linear"]["config"][std::string(op) + "_frac_width"] = frac;
  }
  return c;
}

std::vector<std::string> changed_paths(const passes::QuantizeReport& r) {
  std::vector<std::string> out;
  for (const auto& row : r.rows)
    if (row.changed) out.push_back(row.path);
  return out;
}

}  // namespace

TEST_CASE("quantize pass: by type on jsc-tiny changes exactly the one Linear (lab 2's question)") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  const json cfg = tutorial3_config();
  const std::string before = cfg.dump();
  const auto report = passes::quantize(*model, cfg);
  CHECK(cfg.dump() == before);  // never mutated (MASE pops "by")
  CHECK(changed_paths(report) == std::vector<std::string>{"2"});
  CHECK(report.rows.size() == 4);
  CHECK(report.rows[2].new_type == "LinearInteger");
  CHECK(report.rows[2].config ==
        "data_in=integer:width=8,frac_width=4 weight=integer:width=8,frac_width=4 bias=integer:width=8,frac_width=4");
  const auto summary = passes::summarize_quantization(report);
  REQUIRE(summary.size() == 3);
  CHECK(summary[0].original_type == "BatchNorm1d");
  CHECK(summary[1].original_type == "ReLU");
  CHECK((summary[1].total == 2 && summary[1].changed == 0 && summary[1].unchanged == 2));
  CHECK(summary[2].original_type == "Linear");
  CHECK(summary[2].op == "linear");
  CHECK((summary[2].total == 1 && summary[2].changed == 1));
  const std::string table = passes::summary_table(summary);
  CHECK(table.find("| Linear") != std::string::npos);

  // The same config again on the same (already quantized) model works: the config is reusable.
  CHECK_NOTHROW(passes::quantize(*model, cfg));
}

TEST_CASE("quantize pass: a quantized Linear computes linear(q(x), q(W), q(b)) with STE gradients") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 3);
  passes::quantize(*model, integer_linear(6, 3));
  auto& lin = dynamic_cast<nn::Linear&>(model->at("2"));
  REQUIRE(lin.is_quantized());
  CHECK(lin.type_name() == "QuantLinear");
  const auto fmt = qnum::Format::parse("integer:width=6,frac_width=3");
  qnum::Tensor x = qnum::Tensor::uniform({7, 16}, 11, -3.0f, 3.0f, true);
  qnum::Tensor y = lin(x);
  const auto qx = fmt.quantize(x.values(), x.shape(), qnum::Role::activation);
  const auto qw = fmt.quantize(lin.weight.values(), lin.weight.shape());
  const auto qb = fmt.quantize(lin.bias.values(), lin.bias.shape(), qnum::Role::bias);
  for (int r = 0; r < 7; ++r)
    for (int o = 0; o < 5; ++o) {
      float acc = 0.0f;
      for (int i = 0; i < 16; ++i) acc += qx[r * 16 + i] * qw[o * 16 + i];
      CHECK(y.values()[r * 5 + o] == doctest::Approx(acc + qb[o]).epsilon(1e-6));
    }
  // Straight-through: dL/dW = gᵀ·q(x) for L = sum(y).
  qnum::sum(y).backward();
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 16; ++i) {
      float g = 0.0f;
      for (int r = 0; r < 7; ++r) g += qx[r * 16 + i];
      CHECK(lin.weight.grad()[o * 16 + i] == doctest::Approx(g).epsilon(1e-6));
    }
  // dL/dx = g·q(W): every row the column sums of q(W).
  for (int i = 0; i < 16; ++i) {
    float g = 0.0f;
    for (int o = 0; o < 5; ++o) g += qw[o * 16 + i];
    CHECK(x.grad()[i] == doctest::Approx(g).epsilon(1e-6));
  }
}

TEST_CASE("quantize pass: an NVFP4 Linear computes linear(q(x), q(W)) + b (tensor scale of each whole operand)") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 5);
  const auto r = passes::quantize(*model, json::parse(R"({"by": "type", "default": {"config": {"name": null}},
      "linear": {"config": {"name": "nvfp4", "data_in": "nvfp4", "weight": "nvfp4"}}})"));
  CHECK(changed_paths(r) == std::vector<std::string>{"2"});
  auto& lin = dynamic_cast<nn::Linear&>(model->at("2"));
  REQUIRE(lin.is_quantized());
  const auto fmt = qnum::Format::parse("nvfp4");
  qnum::Tensor x = qnum::Tensor::uniform({7, 16}, 13, -3.0f, 3.0f, true);
  qnum::Tensor y = lin(x);
  const auto qx = fmt.quantize(x.values(), x.shape(), qnum::Role::activation);
  const auto qw = fmt.quantize(lin.weight.values(), lin.weight.shape());
  int differs_from_float = 0;
  for (int r2 = 0; r2 < 7; ++r2)
    for (int o = 0; o < 5; ++o) {
      float acc = 0.0f, exact = 0.0f;
      for (int i = 0; i < 16; ++i) {
        acc += qx[r2 * 16 + i] * qw[o * 16 + i];
        exact += x.values()[r2 * 16 + i] * lin.weight.values()[o * 16 + i];
      }
      CHECK(y.values()[r2 * 5 + o] == doctest::Approx(acc + lin.bias.values()[o]).epsilon(1e-6));
      differs_from_float += y.values()[r2 * 5 + o] != doctest::Approx(exact + lin.bias.values()[o]).epsilon(1e-6);
    }
  CHECK(differs_from_float > 0);  // 4-bit elements: the products are not the float32 ones
}

TEST_CASE("quantize pass: by name and by regex select exactly the intended layers") {
  auto model = qnum::models::make_jsc_model("jsc-s", 1);  // Linears at 2, 5, 7, 9, 11
  const json integer = tutorial3_config()["linear"];

  json by_name = {
      {"by", "name"}, {"default", {{"config", {{"name", nullptr}}}}}, {"5", integer}, {"seq_blocks_9", integer}};
  auto r = passes::quantize(*model, by_name);
  CHECK(changed_paths(r) == std::vector<std::string>{"5", "9"});
  CHECK(r.warnings.empty());

  auto m2 = qnum::models::make_jsc_model("jsc-s", 1);
  json by_regex = {{"by", "regex_name"}, {"^(2|11)$", integer}, {"^7$", integer}};
  CHECK(changed_paths(passes::quantize(*m2, by_regex)) == std::vector<std::string>{"2", "7", "11"});

  // A ReLU layer by regex gets only data_in (its only operand present in the config).
  auto m3 = qnum::models::make_jsc_model("jsc-s", 1);
  auto r3 = passes::quantize(*m3, {{"by", "regex"}, {"^4$", integer}});
  CHECK(changed_paths(r3) == std::vector<std::string>{"4"});
  CHECK(r3.rows[4].new_type == "ReLUInteger");
  CHECK(r3.rows[4].config == "data_in=integer:width=8,frac_width=4");

  // Two patterns on one layer: an error naming both; nothing changed.
  auto m4 = qnum::models::make_jsc_model("jsc-s", 1);
  const auto e = error_of([&] { passes::quantize(*m4, {{"by", "regex"}, {"^1.*", integer}, {".*1$", integer}}); });
  CHECK(e.find("matches both") != std::string::npos);
  for (auto& [path, m] : m4->named_modules())
    if (auto* q = dynamic_cast<nn::Quantizable*>(m)) CHECK_FALSE(q->is_quantized());

  // A regex matching nothing: a warning that lists the layer names.
  auto m5 = qnum::models::make_jsc_model("jsc-tiny", 1);
  auto r5 = passes::quantize(*m5, {{"by", "regex"}, {"^encoder.*", integer}});
  REQUIRE(r5.warnings.size() == 1);
  CHECK(r5.warnings[0].find("matches no quantizable layer (layers: 1, 2, 3)") != std::string::npos);
}

TEST_CASE("quantize pass: MASE's spellings and qnum's extensions") {
  // jsc_toy_by_type.toml style: "NA" default, and values "NA"/None meaning default.
  auto model = qnum::models::make_jsc_model("jsc-toy", 1);
  json toml_style = json::parse(R"({"by": "type", "default": {"config": {"name": "NA"}},
    "linear": {"config": {"name": "minifloat_ieee", "data_in_width": 8, "data_in_exponent_width": 4,
      "data_in_exponent_bias": "None", "weight_width": 8, "weight_exponent_width": 4, "weight_exponent_bias": null,
      "bias_width": 8, "bias_exponent_width": 4, "bias_exponent_bias": "none"}}})");
  auto r = passes::quantize(*model, toml_style);
  CHECK(r.changed() == 3);
  CHECK(r.rows[2].new_type == "LinearMinifloatIEEE");

  // Whole formats per operand, a block format with list block sizes, mase mode.
  auto m2 = qnum::models::make_jsc_model("jsc-tiny", 1);
  json whole = {{"by", "type"},
                {"linear",
                 {{"config",
                   {{"name", "block_fp"},
                    {"mode", "mase"},
                    {"weight_width", 8},
                    {"weight_exponent_width", 8},
                    {"weight_block_size", {1, 16}},
                    {"data_in", "log:width=8"}}}}}};
  auto r2 = passes::quantize(*m2, whole);
  REQUIRE(r2.changed() == 1);
  const auto& q = dynamic_cast<nn::Linear&>(m2->at("2")).quant();
  REQUIRE(q.weight.has_value());
  CHECK(q.weight->policy.semantics == qnum::mase_compat.semantics);
  CHECK(q.weight->to_string().find("block_size=1x16") != std::string::npos);
  CHECK(q.data_in->to_string() == "log:width=8,exponent_bias=none,mode=mase_compat");
  CHECK_FALSE(q.bias.has_value());
  qnum::Tensor x = qnum::Tensor::uniform({4, 16}, 2, -1.0f, 1.0f);
  CHECK(std::isfinite(qnum::sum((*m2)(x)).item()));

  // bypass skips.
  auto m3 = qnum::models::make_jsc_model("jsc-tiny", 1);
  json bypass = tutorial3_config();
  bypass["linear"]["config"]["bypass"] = true;
  CHECK(passes::quantize(*m3, bypass).changed() == 0);
}

TEST_CASE("quantize pass: bad configs are errors naming the problem, and change nothing") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  auto e = [&](json cfg) { return error_of([&] { passes::quantize(*model, cfg); }); };
  CHECK(e({{"linear", tutorial3_config()["linear"]}}).find("missing 'by'") != std::string::npos);
  CHECK(e({{"by", "types"}}).find("unknown by = 'types'") != std::string::npos);
  CHECK(e({{"by", "type"}, {"lineer", tutorial3_config()["linear"]}}).find("unknown op 'lineer'") != std::string::npos);
  json typo = tutorial3_config();
  typo["linear"]["config"]["wieght_width"] = 8;
  CHECK(e(typo).find("unknown key 'wieght_width'") != std::string::npos);
  json bad_key = tutorial3_config();
  bad_key["linear"]["config"]["weight_exponent_width"] = 3;
  CHECK(e(bad_key).find("exponent_width") != std::string::npos);
  json bad_format = tutorial3_config();
  bad_format["linear"]["config"]["name"] = "integr";
  CHECK(e(bad_format).find("unknown format 'integr'") != std::string::npos);
  json bad_width = integer_linear(0, 0);
  CHECK(e(bad_width).find("width") != std::string::npos);
  CHECK(e({{"by", "regex"}, {"(", tutorial3_config()["linear"]}}).find("bad regular expression") != std::string::npos);
  for (auto& [path, m] : model->named_modules())
    if (auto* q = dynamic_cast<nn::Quantizable*>(m)) CHECK_FALSE(q->is_quantized());
}

TEST_CASE("quantize pass: QAT at 8-bit fixed point is within a point of fp32; PTQ at 4 bits is worse than at 16") {
  const auto& d = qnum_test::small_jsc();
  auto train_model = [&](const std::string& name, const json* qat, int epochs) {
    qnum_test::TempDir dir("qat");
    auto model = qnum::models::make_jsc_model(name, 5);
    if (qat) passes::quantize(*model, *qat);
    qnum::train::TrainConfig c;
    c.model = name;
    c.dataset = "jsc-synthetic";
    c.max_epochs = epochs;
    c.batch_size = 128;
    c.learning_rate = 1e-2;
    c.output_dir = dir.path.string();
    c.progress = false;
    qnum::train::Trainer t(model, c);
    t.fit(d.train, d.val);
    return model;
  };
  const std::string name = "jsc-mlp:16-32-32-5";
  auto fp32 = train_model(name, nullptr, 6);
  const double acc_fp32 = qnum::train::evaluate(*fp32, d.test, 512).accuracy;
  const json q8 = integer_linear(8, 4);
  auto qat = train_model(name, &q8, 6);
  const double acc_qat = qnum::train::evaluate(*qat, d.test, 512).accuracy;
  MESSAGE("fp32 ", acc_fp32, "  QAT int8/4 ", acc_qat);
  CHECK(acc_fp32 > 0.55);
  CHECK(acc_qat > acc_fp32 - 0.01);

  auto ptq = [&](int width, int frac) {
    auto m = train_model(name, nullptr, 6);  // same seed: the same fp32 model
    passes::quantize(*m, integer_linear(width, frac));
    return qnum::train::evaluate(*m, d.test, 512).accuracy;
  };
  const double acc16 = ptq(16, 8), acc4 = ptq(4, 2);
  MESSAGE("PTQ int16/8 ", acc16, "  PTQ int4/2 ", acc4);
  CHECK(acc16 > acc_fp32 - 0.005);
  CHECK(acc4 < acc16 - 0.05);
}

TEST_CASE("quantize pass: matmul and softmax layers (attention's products) by type; traced with both operands") {
  struct Scores : nn::Module {
    std::shared_ptr<nn::Matmul> qk;
    std::shared_ptr<nn::Softmax> sm;
    Scores() {
      qk = register_module("qk", std::make_shared<nn::Matmul>());
      sm = register_module("sm", std::make_shared<nn::Softmax>(-1));
    }
    qnum::Tensor forward(const qnum::Tensor& x) override { return (*sm)((*qk)(x, qnum::transpose(x, 0, 1))); }
  } model;
  json cfg = {{"by", "type"},
              {"matmul",
               {{"config",
                 {{"name", "integer"},
                  {"data_in_width", 6},
                  {"data_in_frac_width", 3},
                  {"weight_width", 6},
                  {"weight_frac_width", 3}}}}},
              {"softmax", {{"config", {{"name", "integer"}, {"data_in_width", 8}, {"data_in_frac_width", 5}}}}}};
  const auto r = passes::quantize(model, cfg);
  CHECK(changed_paths(r) == std::vector<std::string>{"qk", "sm"});
  CHECK(r.rows[0].new_type == "MatmulInteger");
  CHECK(r.rows[1].new_type == "SoftmaxInteger");
  const qnum::Tensor x = qnum::Tensor::uniform({3, 4}, 8, -2.0f, 2.0f);
  const auto y = model(x);
  const auto f6 = qnum::Format::parse("integer:width=6,frac_width=3");
  const auto f8 = qnum::Format::parse("integer:width=8,frac_width=5");
  const auto qx = f6.quantize(x.values(), x.shape());
  std::vector<float> s(9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) s[i * 3 + j] += qx[i * 4 + k] * qx[j * 4 + k];
  const auto qs = f8.quantize(s, {3, 3});
  for (int i = 0; i < 3; ++i) {
    double z = 0;
    for (int j = 0; j < 3; ++j) z += std::exp(double(qs[i * 3 + j]));
    for (int j = 0; j < 3; ++j) CHECK(y.values()[i * 3 + j] == doctest::Approx(std::exp(double(qs[i * 3 + j])) / z));
  }
  const auto t = passes::trace(model, x);
  // x, transpose (a function outside the layers), qk (two operands), sm, output
  REQUIRE(t.nodes.size() == 5);
  CHECK(t.nodes[1].kind == "call_function");
  CHECK(t.nodes[2].target == "qk");
  CHECK(t.nodes[2].args == std::vector<int>{0, 1});
  CHECK(passes::cost(t).rows[1].macs == 3 * 3 * 4);

  // Block formats group the right operand along K in exact mode, along N in mase mode.
  nn::Matmul mm;
  const qnum::Tensor a = qnum::Tensor::uniform({2, 32}, 1, -1.0f, 1.0f);
  qnum::Tensor b = qnum::Tensor::uniform({32, 2}, 2, -1.0f, 1.0f);
  b.values()[0] = 100.0f;  // one outlier in column 0: along K it coarsens column 0's block only
  const auto mx = qnum::Format::parse("mxint8");
  mm.set_quant({std::nullopt, mx, std::nullopt, std::nullopt});
  const auto y_exact = mm(a, b);
  std::vector<float> bt(64);
  for (int k = 0; k < 32; ++k)
    for (int n = 0; n < 2; ++n) bt[n * 32 + k] = b.values()[k * 2 + n];
  const auto qbt = mx.quantize(bt, {2, 32});
  for (int i = 0; i < 2; ++i)
    for (int n = 0; n < 2; ++n) {
      float acc = 0;
      for (int k = 0; k < 32; ++k) acc += a.values()[i * 32 + k] * qbt[n * 32 + k];
      CHECK(y_exact.values()[i * 2 + n] == doctest::Approx(acc).epsilon(1e-5));
    }
}
