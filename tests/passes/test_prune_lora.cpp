// Prune and LoRA passes: exact sparsity (local and global, random and l1-norm), masks that
// survive fine-tuning and checkpoints, activation masks per sample; LoRA that starts at the
// model, trains only adapters, and fuses to the same outputs.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/pipeline.hpp"
#include "qnum/passes/prune.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/train/train.hpp"
#include "train/helpers.hpp"

using nlohmann::json;
namespace passes = qnum::passes;
namespace nn = qnum::nn;
using qnum_test::error_of;

namespace {

std::int64_t zeros(const qnum::Tensor& t) {
  std::int64_t n = 0;
  for (float v : t.values()) n += v == 0.0f;
  return n;
}

qnum::train::TrainConfig quick(const qnum_test::TempDir& dir, int epochs) {
  qnum::train::TrainConfig c;
  c.max_epochs = epochs;
  c.batch_size = 128;
  c.learning_rate = 1e-2;
  c.output_dir = dir.path.string();
  c.progress = false;
  return c;
}

}  // namespace

TEST_CASE("prune: weights reach the requested sparsity exactly, locally and globally") {
  for (const char* method : {"random", "l1-norm"})
    for (const char* scope : {"local", "global"})
      for (double s : {0.1, 0.5, 0.9}) {
        CAPTURE(method);
        CAPTURE(scope);
        CAPTURE(s);
        auto model = qnum::models::make_jsc_model("jsc-s", 2);
        const auto cfg = passes::parse_prune_config(
            {{"weight", {{"sparsity", s}, {"method", method}, {"scope", scope}}}, {"seed", 4}});
        const auto report = passes::prune(*model, cfg);
        REQUIRE(report.rows.size() == 5);
        std::int64_t total = 0, pruned = 0;
        for (const auto& row : report.rows) {
          auto& lin = dynamic_cast<nn::Linear&>(model->at(row.path));
          CHECK(zeros(lin.weight_mask) == row.pruned);
          CHECK(zeros(lin.weight) >= row.pruned);  // master weights zeroed too
          if (std::string(scope) == "local") CHECK(std::llabs(row.pruned - std::llround(s * row.weights)) <= 1);
          total += row.weights;
          pruned += row.pruned;
        }
        CHECK(std::llabs(pruned - std::llround(s * total)) <= 1);
      }
}

TEST_CASE("prune: l1-norm removes the smallest magnitudes; global ranks across layers") {
  auto model = qnum::models::make_jsc_model("jsc-three-linear", 1);
  auto layers = passes::linear_layers(*model);
  // Scale the last layer up: global l1 must then prune the first two layers more.
  for (auto& v : layers[2].second->weight.values()) v *= 100.0f;
  std::vector<std::vector<float>> before;
  for (auto& [p, l] : layers) before.push_back(l->weight.to_vector());
  passes::prune(*model, passes::parse_prune_config(
                            {{"weight", {{"sparsity", 0.5}, {"method", "l1-norm"}, {"scope", "global"}}}}));
  float max_pruned = 0.0f, min_kept = INFINITY;
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < before[l].size(); ++i) {
      const float mag = std::fabs(before[l][i]);
      if (layers[l].second->weight_mask.values()[i] == 0.0f)
        max_pruned = std::max(max_pruned, mag);
      else
        min_kept = std::min(min_kept, mag);
    }
  CHECK(max_pruned <= min_kept);
  CHECK(zeros(layers[2].second->weight_mask) == 0);
}

TEST_CASE("prune: masks survive fine-tuning and a checkpoint round trip") {
  const auto& d = qnum_test::small_jsc();
  qnum_test::TempDir dir("prune-ft");
  auto model = qnum::models::make_jsc_model("jsc-s", 3);
  passes::prune(*model, passes::parse_prune_config({{"weight", {{"sparsity", 0.7}, {"method", "l1-norm"}}}}));
  std::vector<std::vector<float>> masks;
  for (auto& [p, l] : passes::linear_layers(*model)) masks.push_back(l->weight_mask.to_vector());
  qnum::train::Trainer t(model, quick(dir, 2));
  t.fit(d.train, d.val);
  std::size_t l = 0;
  for (auto& [p, lin] : passes::linear_layers(*model)) {
    CHECK(lin->weight_mask.to_vector() == masks[l]);
    const auto w = lin->effective_weight();
    for (std::size_t i = 0; i < masks[l].size(); ++i)
      if (masks[l][i] == 0.0f) CHECK(w.values()[i] == 0.0f);
    ++l;
  }
  const auto sd = model->state_dict();
  CHECK(sd.count("2.weight_mask") == 1);
  // A fresh model with the same structure (pruned at any sparsity) loads the masks.
  auto fresh = qnum::models::make_jsc_model("jsc-s", 9);
  passes::prune(*fresh, passes::parse_prune_config({{"weight", {{"sparsity", 0.1}}}}));
  fresh->load_state_dict(sd);
  CHECK(dynamic_cast<nn::Linear&>(fresh->at("2")).weight_mask.to_vector() == masks[0]);
}

TEST_CASE("prune: activation masks are per sample and exact; global needs calibration") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  passes::prune(*model, passes::parse_prune_config({{"activation", {{"sparsity", 0.25}, {"method", "l1-norm"}}}}));
  auto& lin = dynamic_cast<nn::Linear&>(model->at("2"));
  REQUIRE(lin.input_transform);
  qnum::Tensor x = qnum::Tensor::uniform({3, 16}, 5, 0.5f, 2.0f);
  const auto masked = lin.input_transform->apply(x, true);
  for (int r = 0; r < 3; ++r) {
    int z = 0;
    float max_dropped = 0.0f, min_kept = INFINITY;
    for (int i = 0; i < 16; ++i) {
      const float v = masked.values()[r * 16 + i], orig = x.values()[r * 16 + i];
      if (v == 0.0f) {
        ++z;
        max_dropped = std::max(max_dropped, orig);
      } else {
        CHECK(v == orig);
        min_kept = std::min(min_kept, orig);
      }
    }
    CHECK(z == 4);
    CHECK(max_dropped <= min_kept);
  }
  // A row's mask does not depend on the other rows of its batch.
  qnum::Tensor x1({1, 16}, std::vector<float>(x.values().begin(), x.values().begin() + 16));
  const auto alone = lin.input_transform->apply(x1, true);
  for (int i = 0; i < 16; ++i) CHECK(alone.values()[i] == masked.values()[i]);

  auto m2 = qnum::models::make_jsc_model("jsc-tiny", 1);
  // Inputs of the Linear follow a ReLU (about half are 0): at 0.8 the threshold is positive.
  const auto global =
      passes::parse_prune_config({{"activation", {{"sparsity", 0.8}, {"method", "l1-norm"}, {"scope", "global"}}}});
  CHECK(error_of([&] { passes::prune(*m2, global); }).find("needs calibration batches") != std::string::npos);
  const auto& d = qnum_test::small_jsc();
  CHECK_NOTHROW(passes::prune(*m2, global, {d.train.features}));
  const float threshold =
      dynamic_cast<passes::ActivationPruner&>(*dynamic_cast<nn::Linear&>(m2->at("2")).input_transform).threshold();
  CHECK(threshold > 0.0f);
  // A calibration loop of the caller's own (models whose input is not one tensor) sees the
  // same inputs, so it fixes the same threshold; it runs once.
  auto m3 = qnum::models::make_jsc_model("jsc-tiny", 1);
  int calls = 0;
  passes::prune(*m3, global, [&] {
    ++calls;
    (*m3)(d.train.features);
  });
  CHECK(calls == 1);
  CHECK(dynamic_cast<passes::ActivationPruner&>(*dynamic_cast<nn::Linear&>(m3->at("2")).input_transform).threshold() ==
        threshold);
}

TEST_CASE("prune: bad configs are named errors") {
  auto e = [](json j) { return error_of([&] { passes::parse_prune_config(j); }); };
  CHECK(e({{"weight", {{"sparsity", 1.0}}}}).find("must be in [0, 1)") != std::string::npos);
  CHECK(e({{"weight", {{"sparsity", -0.1}}}}).find("must be in [0, 1)") != std::string::npos);
  CHECK(e({{"weight", {{"method", "l2"}}}}).find("unknown method 'l2'") != std::string::npos);
  CHECK(e({{"weight", {{"scope", "layer"}}}}).find("unknown scope 'layer'") != std::string::npos);
  CHECK(e({{"weight", {{"granularity", "channel"}}}}).find("elementwise") != std::string::npos);
  CHECK(e({{"weights", {{"sparsity", 0.5}}}}).find("unknown key 'weights'") != std::string::npos);
  CHECK(e({{"weight", {{"sparsty", 0.5}}}}).find("unknown key 'weight.sparsty'") != std::string::npos);
}

TEST_CASE("lora: starts unchanged, trains only adapters, fuses to the same outputs") {
  const auto& d = qnum_test::small_jsc();
  auto model = qnum::models::make_jsc_model("jsc-mlp:16-32-32-5", 4);
  qnum::Tensor x = d.val.features;
  model->eval();
  const auto y0 = (*model)(x).to_vector();
  const auto sd0 = model->state_dict();

  const auto cfg = passes::parse_lora_config({{"rank", 4}, {"alpha", 8.0}, {"dropout", 0.1}, {"seed", 3}});
  CHECK(cfg.alpha == 8.0);  // MASE tutorial 2's spelling is honoured
  const auto report = passes::insert_lora(*model, cfg);
  // Adapters only: (16+32)*4 + (32+32)*4 + (32+5)*4 = 596 trainable values.
  CHECK(report.trainable() == 596);
  CHECK(report.total() == model->num_parameters());
  CHECK(dynamic_cast<nn::Linear&>(model->at("2")).bias.requires_grad() == false);  // biases kept, frozen
  CHECK((*model)(x).to_vector() == y0);                                            // B = 0

  qnum_test::TempDir dir("lora");
  model->train();
  qnum::train::Trainer t(model, quick(dir, 1));
  t.fit(d.train, d.val);
  model->eval();
  const auto y_adapted = (*model)(x).to_vector();
  CHECK(y_adapted != y0);
  const auto sd1 = model->state_dict();
  for (const auto& [name, t0] : sd0)
    if (name.find("running") == std::string::npos && name.find("num_batches") == std::string::npos)
      CHECK_MESSAGE(t0.to_vector() == sd1.at(name).to_vector(), name);  // frozen base

  CHECK(passes::fuse_lora(*model) == 3);
  CHECK(model->state_dict().size() == sd0.size());
  const auto y_fused = (*model)(x).to_vector();
  double worst = 0.0;
  for (std::size_t i = 0; i < y_fused.size(); ++i)
    worst = std::max(worst, double(std::fabs(y_fused[i] - y_adapted[i])));
  MESSAGE("max |fused - adapted| = ", worst);
  CHECK(worst < 1e-4);
}

TEST_CASE("lora: bad configs and impossible ranks are named errors") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  CHECK(error_of([&] {
          passes::insert_lora(*model, passes::parse_lora_config({{"rank", 6}}));
        }).find("rank 6 is larger than layer '2' allows") != std::string::npos);
  CHECK(error_of([&] { passes::parse_lora_config({{"rank", 0}}); }).find("rank must be >= 1") != std::string::npos);
  CHECK(error_of([&] {
          passes::parse_lora_config({{"rank", 2}, {"lora_rank", 2}});
        }).find("unknown key 'lora_rank'") != std::string::npos);
  auto cfg = passes::parse_lora_config({{"rank", 2}, {"target", "^encoder.*"}});
  CHECK(error_of([&] { passes::insert_lora(*model, cfg); }).find("matches no Linear (layers: 2)") != std::string::npos);
  CHECK(model->num_parameters(true) == model->num_parameters());  // nothing frozen by the failed call
}

TEST_CASE("compress: quantize then prune from one config; a bad section changes nothing") {
  auto model = qnum::models::make_jsc_model("jsc-s", 1);
  const json cfg = json::parse(R"({
    "quantize": {"by": "type", "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
                 "weight_width": 8, "weight_frac_width": 4}}},
    "prune": {"weight": {"sparsity": 0.3, "method": "l1-norm", "scope": "global"}}})");
  const auto r = passes::compress(*model, cfg);
  REQUIRE(r.quantize.has_value());
  REQUIRE(r.prune.has_value());
  CHECK(r.quantize->changed() == 5);
  CHECK(r.prune->weight_sparsity() == doctest::Approx(0.3).epsilon(1e-3));
  auto fresh = qnum::models::make_jsc_model("jsc-s", 1);
  json bad = cfg;
  bad["prune"]["weight"]["sparsity"] = 2.0;
  CHECK(error_of([&] { passes::compress(*fresh, bad); }).find("must be in [0, 1)") != std::string::npos);
  CHECK_FALSE(dynamic_cast<nn::Linear&>(fresh->at("2")).is_quantized());
  CHECK(error_of([&] {
          passes::compress(*fresh, {{"quantise", json::object()}});
        }).find("unknown section 'quantise'") != std::string::npos);
}
