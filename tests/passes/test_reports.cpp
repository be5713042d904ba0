// Analyses: the forward trace and graph report (MASE's counts for jsc-tiny), DOT export,
// FLOPs/BitOPs by the documented formulas, model size under formats, the statistics
// profile, and structure records that let a transformed checkpoint load again.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/models/jsc.hpp"
#include "qnum/passes/passes.hpp"
#include "train/helpers.hpp"

using nlohmann::json;
namespace passes = qnum::passes;
namespace nn = qnum::nn;

namespace {

json int_linear(int w, int f) {
  json c = {{"name", "integer"}};
  for (const char* op : {"data_in", "weight", "bias"}) {
    c[std::string(op) + "_width"] = w;
    c[std::string(op) + "_frac_width"] = f;
  }
  return {{"by", "type"}, {"linear", {{"config", c}}}};
}

}  // namespace

TEST_CASE("trace: jsc-tiny is 1 placeholder, 4 call_module, 1 output (MASE's report)") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  const auto t = passes::trace(*model, qnum::Tensor::zeros({8, 16}));
  const auto c = t.counts();
  CHECK(c.at("placeholder") == 1);
  CHECK(c.at("call_module") == 4);
  CHECK(c.at("call_function") == 0);
  CHECK(c.at("output") == 1);
  REQUIRE(t.nodes.size() == 6);
  CHECK(t.nodes[3].target == "2");
  CHECK(t.nodes[3].op == "linear");
  CHECK(t.nodes[3].args == std::vector<int>{2});
  CHECK(t.nodes[3].out_shape == qnum::Shape{8, 5});
  CHECK(t.nodes[5].args == std::vector<int>{4});
  CHECK(model->is_training());  // mode restored
  const auto report = passes::graph_report(t);
  CHECK(report.find("call_module=4") != std::string::npos);
  CHECK(report.find("2: Linear(in_features=16, out_features=5, bias=True)") != std::string::npos);
  CHECK(report.find("0: BatchNorm1d(16)") != std::string::npos);
  const auto dot = passes::to_dot(t, "jsc-tiny");
  CHECK(dot.starts_with("digraph \"jsc-tiny\" {"));
  CHECK(dot.find("n2 -> n3;") != std::string::npos);
}

TEST_CASE("trace: functional ops outside layers become call_function nodes") {
  // A residual block: y = relu(linear(x)) + x.
  struct Residual : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::ReLU> act;
    Residual() {
      fc = register_module("fc", std::make_shared<nn::Linear>(4, 4, true, 1));
      act = register_module("act", std::make_shared<nn::ReLU>());
    }
    qnum::Tensor forward(const qnum::Tensor& x) override { return qnum::add((*act)((*fc)(x)), x); }
  } model;
  const auto t = passes::trace(model, qnum::Tensor::ones({2, 4}));
  REQUIRE(t.nodes.size() == 5);
  CHECK(t.nodes[3].kind == "call_function");
  CHECK(t.nodes[3].op == "add");
  CHECK(t.nodes[3].args == std::vector<int>{2, 0});
  CHECK(t.nodes[4].args == std::vector<int>{3});
}

TEST_CASE("cost: FLOPs and BitOPs of a Linear equal the formulas; model size follows the formats") {
  auto model = qnum::models::make_jsc_model("jsc-s", 1);
  const std::int64_t B = 32;
  auto t = passes::trace(*model, qnum::Tensor::ones({B, 16}));
  auto c = passes::cost(t);
  const passes::CostRow* first = nullptr;
  for (const auto& r : c.rows)
    if (r.node == "2") first = &r;
  REQUIRE(first != nullptr);
  CHECK(first->macs == 64 * 16 * B);
  CHECK(first->flops_forward == 2.0 * 64 * 16 * B + 64 * B);
  CHECK(first->flops_backward == 4.0 * 64 * 16 * B + 64 * B);
  CHECK(first->bitops_forward == 64.0 * 16 * B * 32 * 32);
  CHECK(c.unsupported().empty());
  const auto size_fp = passes::model_size(*model);
  CHECK(size_fp.parameters == 5615);
  CHECK(size_fp.bits == 32.0 * 5615);

  passes::quantize(*model, int_linear(8, 4));
  c = passes::cost(passes::trace(*model, qnum::Tensor::ones({B, 16})));
  for (const auto& r : c.rows)
    if (r.node == "2") CHECK(r.bitops_forward == 64.0 * 16 * B * 8 * 8);
  const auto size_q = passes::model_size(*model);
  // Linear weights and biases at 8 bits, BatchNorm parameters at 32.
  const double linear_params = 16 * 64 + 64 + 64 * 32 + 32 + 32 * 32 + 32 + 32 * 32 + 32 + 32 * 5 + 5;
  CHECK(size_q.bits == 8.0 * linear_params + 32.0 * (5615 - linear_params));
  CHECK(size_q.ratio() > 3.0);
}

TEST_CASE("profile: weights and activations with Welford statistics") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  const auto& d = qnum_test::small_jsc();
  const auto p = passes::profile_statistics(*model, {d.train.features, d.val.features});
  CHECK(p.batches == 2);
  const passes::ProfileEntry* w = nullptr;
  const passes::ProfileEntry* a = nullptr;
  for (const auto& e : p.entries) {
    if (e.name == "2.weight") w = &e;
    if (e.name == "0.data_in_0") a = &e;
  }
  REQUIRE(w);
  REQUIRE(a);
  CHECK(w->stats.count == 80);
  double mn = INFINITY, mx = -INFINITY, mean = 0;
  auto& lin = dynamic_cast<nn::Linear&>(model->at("2"));
  for (float v : lin.weight.values()) mn = std::min(mn, double(v)), mx = std::max(mx, double(v)), mean += v;
  CHECK(w->stats.min == mn);
  CHECK(w->stats.max == mx);
  CHECK(w->stats.mean == doctest::Approx(mean / 80));
  CHECK(a->stats.count == (d.train.size() + d.val.size()) * 16);
  CHECK(a->stats.mean == doctest::Approx(0.0).epsilon(0.05).scale(1));  // standardised features
  CHECK(p.table().find("2.data_in_0") != std::string::npos);
}

TEST_CASE("structure: a quantized, pruned, LoRA-adapted model reloads into a fresh one bit for bit") {
  auto model = qnum::models::make_jsc_model("jsc-s", 1);
  passes::quantize(*model, int_linear(8, 4));
  passes::prune(*model, passes::parse_prune_config({{"weight", {{"sparsity", 0.5}, {"method", "l1-norm"}}},
                                                    {"activation", {{"sparsity", 0.25}, {"method", "l1-norm"}}}}));
  passes::insert_lora(*model, passes::parse_lora_config({{"rank", 2}, {"target", "^(5|7)$"}}));
  auto& b = dynamic_cast<nn::Linear&>(model->at("5")).lora_B->weight;
  for (auto& v : b.values()) v = 0.01f;
  const json structure = passes::describe_structure(*model);
  CHECK(structure.at("5").contains("lora"));
  CHECK(structure.at("2").at("weight_mask") == true);
  CHECK(structure.at("2").at("quant").at("weight") == "integer:width=8,frac_width=4");

  auto fresh = qnum::models::make_jsc_model("jsc-s", 77);
  passes::restore_structure(*fresh, json::parse(structure.dump()));
  fresh->load_state_dict(model->state_dict());
  model->eval();
  fresh->eval();
  const auto& d = qnum_test::small_jsc();
  CHECK((*fresh)(d.val.features).to_vector() == (*model)(d.val.features).to_vector());

  auto other = qnum::models::make_jsc_model("jsc-tiny", 1);
  CHECK_THROWS_WITH_AS(passes::restore_structure(*other, structure), doctest::Contains("(Sequential has no child '"),
                       qnum::Error);
}
