// The model registry (include/qnum/pipeline/registry.hpp): built-in names give their input
// kind and recipe; a user's own Module (the lab reports' jsc-custom) and an architecture
// string register under a name and train through the one Trainer; unknown names list the
// known ones.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "error_of.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/train/trainer.hpp"

namespace pipeline = qnum::pipeline;
namespace nn = qnum::nn;
using qnum_test::error_of;

namespace {

/// jsc-custom of the lab reports: BatchNorm, ReLU, Linear 16->32, BatchNorm, ReLU, Dropout
/// 0.2, Linear 32->16, BatchNorm, ReLU, Dropout 0.2, Linear 16->5, BatchNorm, ReLU.
std::shared_ptr<nn::Module> jsc_custom(std::uint64_t seed) {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::BatchNorm1d>(16));
  s->push_back(std::make_shared<nn::ReLU>());
  s->push_back(std::make_shared<nn::Linear>(16, 32, true, seed + 1));
  s->push_back(std::make_shared<nn::BatchNorm1d>(32));
  s->push_back(std::make_shared<nn::ReLU>());
  s->push_back(std::make_shared<nn::Dropout>(0.2f, seed + 2));
  s->push_back(std::make_shared<nn::Linear>(32, 16, true, seed + 3));
  s->push_back(std::make_shared<nn::BatchNorm1d>(16));
  s->push_back(std::make_shared<nn::ReLU>());
  s->push_back(std::make_shared<nn::Dropout>(0.2f, seed + 4));
  s->push_back(std::make_shared<nn::Linear>(16, 5, true, seed + 5));
  s->push_back(std::make_shared<nn::BatchNorm1d>(5));
  s->push_back(std::make_shared<nn::ReLU>());
  return s;
}

}  // namespace

TEST_CASE("registry: built-in names give their input kind and default recipe") {
  CHECK(pipeline::model_spec("jsc-tiny").input == pipeline::InputKind::features);
  CHECK(pipeline::model_spec("jsc-mlp:16-8-5").input == pipeline::InputKind::features);
  CHECK(pipeline::model_spec("bert-tiny").input == pipeline::InputKind::tokens);
  CHECK(pipeline::model_spec("bert:1-32-2-64").input == pipeline::InputKind::tokens);
  const auto jsc = pipeline::default_recipe("jsc-s");
  CHECK(jsc.model == "jsc-s");
  CHECK(jsc.optimizer == "adam");
  CHECK(jsc.schedule_unit == "epoch");
  const auto text = pipeline::default_recipe("bert-tiny");
  CHECK(text.optimizer == "adamw");
  CHECK(text.learning_rate == 1e-3);
  CHECK(text.weight_decay == 0.01);
  CHECK(text.warmup_ratio == 0.06);
  CHECK(text.schedule == "linear");
  CHECK(text.schedule_unit == "step");
  CHECK(text.max_grad_norm == 1.0);
  const auto bert = pipeline::make_classifier("bert:1-32-2-64", {3, 100});
  CHECK(bert.input == pipeline::InputKind::tokens);
  CHECK(bert.config["vocab_size"] == 100);
  CHECK(bert.config["hidden_size"] == 32);
  const auto e = error_of([] { pipeline::model_spec("jsc-huge"); });
  CHECK(e.find("unknown model 'jsc-huge'") != std::string::npos);
  CHECK(e.find("jsc-tiny") != std::string::npos);
  CHECK(e.find("bert-tiny") != std::string::npos);
}

TEST_CASE("registry: jsc-custom (a Module of the program) and an architecture string train through the Trainer") {
  pipeline::register_model("jsc-custom", jsc_custom);
  pipeline::register_model("jsc-wide", "jsc-mlp:16-48-5");
  CHECK(pipeline::known_model_names().find("jsc-custom") != std::string::npos);
  const auto m = pipeline::make_classifier("jsc-custom", {7});
  CHECK(m.module->num_parameters() == 1295);  // ~1.3k, as the lab reports say
  CHECK(pipeline::make_classifier("jsc-wide").module->num_parameters() ==
        pipeline::make_classifier("jsc-mlp:16-48-5").module->num_parameters());
  const auto data = qnum::data::make_jsc_synthetic({600, 200, 200, 3});
  auto c = pipeline::default_recipe("jsc-custom");
  c.dataset = "jsc-synthetic";
  c.max_epochs = 3;
  c.batch_size = 64;
  c.learning_rate = 1e-2;
  c.progress = false;
  c.output_dir = (std::filesystem::temp_directory_path() / "qnum-registry-jsc-custom").string();
  std::filesystem::remove_all(c.output_dir);
  qnum::train::Trainer t(m.module, m.forward, c);
  const auto records = t.fit(data.train, data.val);
  REQUIRE(records.size() == 3);
  CHECK(records.back().train_loss < records.front().train_loss);
  // The checkpoint reloads into a fresh model built by name.
  const auto again = pipeline::make_classifier("jsc-custom", {99});
  qnum::train::load_checkpoint(t.last_checkpoint(), *again.module, nullptr);
  CHECK(qnum::train::evaluate(*again.module, again.forward, data.test, 64).loss ==
        qnum::train::evaluate(*m.module, m.forward, data.test, 64).loss);
  // A feature model given token batches is a clear error.
  qnum::data::TokenDataset tokens;
  tokens.add(std::vector<std::int32_t>{2, 5, 3}, 0);
  CHECK(error_of([&] { qnum::train::evaluate(*m.module, m.forward, tokens, 8); }).find("takes feature rows") !=
        std::string::npos);
  std::filesystem::remove_all(c.output_dir);
}
