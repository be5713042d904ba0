// The text trainer on text-synthetic: a tiny BERT learns (far above chance), metrics and
// checkpoints are written and reload, gradient clipping, per-step warm-up/decay, QAT and
// LoRA runs, resume bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "qnum/data/text.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/trainer.hpp"

using qnum::Tensor;
using qnum_test::error_of;
namespace models = qnum::models;
namespace train = qnum::train;

namespace {

std::filesystem::path trainer_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("qnum-text-trainer-" + name);
  std::filesystem::remove_all(d);
  return d;
}

const qnum::data::TextSplits& synthetic() {
  static const qnum::data::TextSplits s = [] {
    qnum::data::TextSyntheticOptions o;
    o.train = 4000;
    o.val = 200;
    o.test = 300;
    return qnum::data::make_text_synthetic(o);
  }();
  return s;
}

std::shared_ptr<models::BertForSequenceClassification> small_bert(std::uint64_t seed) {
  models::BertConfig c = models::bert_config("bert:1-32-2-64");
  c.vocab_size = synthetic().tokenizer->vocab_size();
  c.max_position_embeddings = 128;
  return std::make_shared<models::BertForSequenceClassification>(c, seed);
}

train::TrainConfig quick_config(const std::string& name) {
  train::TrainConfig c = train::text_recipe();
  c.model = "bert:1-32-2-64";
  c.dataset = "text-synthetic";
  c.max_epochs = 3;
  c.batch_size = 32;
  c.learning_rate = 3e-3;
  c.warmup_ratio = 0.1;
  c.threads = 1;
  c.progress = false;
  c.output_dir = trainer_dir(name).string();
  return c;
}

}  // namespace

TEST_CASE("text trainer: a tiny BERT learns text-synthetic far above chance; checkpoints reload") {
  const auto& d = synthetic();
  auto model = small_bert(1);
  const auto before = train::evaluate(*model, models::bert_forward(model), d.test, 64);
  train::Trainer t(model, models::bert_forward(model), quick_config("learn"));
  std::vector<double> lrs;
  t.on_step([&](std::int64_t, float) { lrs.push_back(t.optimizer().lr()); });
  const auto records = t.fit(d.train, d.val);
  REQUIRE(records.size() == 3);
  const auto test = t.evaluate(d.test);
  MESSAGE("text-synthetic test accuracy ", test.accuracy, " (before training ", before.accuracy, ")");
  // 300 test rows: chance is 0.5 +- 0.03; negations make the task need word order.
  CHECK(before.accuracy < 0.6);
  CHECK(test.accuracy > 0.65);
  CHECK(records.back().val_accuracy > 0.62);
  CHECK(records.back().train_loss < records.front().train_loss);
  // Per-step linear schedule: warm-up over ceil(0.1 * total) steps, then decay to 0.
  CHECK(t.total_steps() == 3 * 125);
  CHECK(t.warmup_steps() == 38);
  REQUIRE(lrs.size() == 375);
  CHECK(lrs[0] == 0.0);
  CHECK(lrs[19] == doctest::Approx(3e-3 * 19 / 38));
  CHECK(lrs[38] == doctest::Approx(3e-3));
  CHECK(lrs[374] == doctest::Approx(3e-3 * 1.0 / 337));
  // metrics.jsonl, best/last with structure; best reloads to the same evaluation.
  const auto lines = qnum::read_file(t.metrics_file());
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 3);
  const auto meta = train::read_checkpoint_meta(t.last_checkpoint());
  CHECK(meta.contains("structure"));
  CHECK(meta["config"]["optimizer"] == "adamw");
  auto reloaded = small_bert(99);
  train::load_checkpoint(t.last_checkpoint(), *reloaded, nullptr);
  const auto again = train::evaluate(*reloaded, models::bert_forward(reloaded), d.test, 64);
  CHECK(again.accuracy == test.accuracy);
  CHECK(again.loss == test.loss);
  std::filesystem::remove_all(t.output_dir());
}

TEST_CASE("text trainer: gradient clipping scales the global norm to max_grad_norm") {
  Tensor a = Tensor::ones({3}, true), b = Tensor::ones({4}, true), frozen = Tensor::ones({2});
  qnum::sum(qnum::mul_scalar(a, 3.0f)).backward();  // grads 3, 3, 3
  qnum::sum(qnum::mul_scalar(b, 2.0f)).backward();  // grads 2, 2, 2, 2
  std::vector<Tensor> ps{a, b, frozen};
  const double norm = train::clip_grad_norm(ps, 1.0);
  CHECK(norm == doctest::Approx(std::sqrt(27.0 + 16.0)));
  double sq = 0;
  for (auto& p : ps)
    for (float g : p.grad()) sq += g * g;
  CHECK(std::sqrt(sq) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK_FALSE(frozen.has_grad());
  // Below the limit nothing changes.
  std::vector<Tensor> small{a};
  const float g0 = a.grad()[0];
  train::clip_grad_norm(small, 10.0);
  CHECK(a.grad()[0] == g0);
}

TEST_CASE("text trainer: QAT (integer 8/4 linear, matmul and softmax) and LoRA train and save their structure") {
  const auto& d = synthetic();
  {
    auto model = small_bert(2);
    const auto report = qnum::passes::quantize(*model, nlohmann::json::parse(R"({
      "by": "type",
      "default": {"config": {"name": null}},
      "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
        "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}},
      "matmul": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
        "weight_width": 8, "weight_frac_width": 4}},
      "softmax": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}}})"));
    (void)report;
    CHECK(model->bert->layers[0]->attention->self->matmul_qk->is_quantized());
    CHECK(model->bert->layers[0]->attention->self->softmax->is_quantized());
    auto cfg = quick_config("qat");
    cfg.max_epochs = 2;
    train::Trainer t(model, models::bert_forward(model), cfg);
    const auto rec = t.fit(d.train, d.val);
    const auto ev = t.evaluate(d.test);
    MESSAGE("QAT test accuracy ", ev.accuracy);
    CHECK(rec.back().train_loss < rec.front().train_loss);
    CHECK(ev.accuracy > 0.6);
    // The checkpoint rebuilds the quantized model.
    auto fresh = small_bert(3);
    qnum::passes::restore_structure(*fresh, train::read_checkpoint_meta(t.best_checkpoint())["structure"]);
    train::load_checkpoint(t.best_checkpoint(), *fresh, nullptr);
    CHECK(fresh->bert->layers[0]->attention->self->softmax->is_quantized());
    std::filesystem::remove_all(t.output_dir());
  }
  {
    auto model = small_bert(4);
    qnum::passes::LoraConfig lc;
    lc.rank = 4;
    lc.alpha = 8;
    lc.target = ".*(query|value)";
    lc.trainable = {"classifier", "bert\\.pooler\\.dense"};
    qnum::passes::insert_lora(*model, lc);
    const auto frozen_before = model->bert->embeddings->word_embeddings->weight.to_vector();
    auto cfg = quick_config("lora");
    cfg.max_epochs = 1;
    train::Trainer t(model, models::bert_forward(model), cfg);
    t.fit(d.train, d.val);
    CHECK(model->bert->embeddings->word_embeddings->weight.to_vector() == frozen_before);
    CHECK(train::read_checkpoint_meta(t.last_checkpoint())["structure"].dump().find("lora") != std::string::npos);
    std::filesystem::remove_all(t.output_dir());
  }
}

TEST_CASE("text trainer: bad settings and empty data are errors") {
  auto model = small_bert(5);
  auto cfg = quick_config("bad");
  cfg.schedule = "exponential";
  CHECK(error_of([&] { train::Trainer(model, models::bert_forward(model), cfg); }).find("exponential") !=
        std::string::npos);
  cfg = quick_config("bad");
  cfg.warmup_ratio = 2;
  CHECK(error_of([&] { train::Trainer(model, models::bert_forward(model), cfg); }).find("warmup_ratio") !=
        std::string::npos);
  cfg = quick_config("bad");
  train::Trainer t(model, models::bert_forward(model), cfg);
  CHECK(error_of([&] { t.fit(qnum::data::TokenDataset{}, synthetic().val); }).find("training set is empty") !=
        std::string::npos);
}

TEST_CASE("trainer on text: 1 epoch + resume 1 more == 2 epochs straight, bit for bit (per-step schedule, dropout)") {
  const auto& d = synthetic();
  const auto sub = d.train.subset(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                                            16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  auto cfg = quick_config("resume-straight");
  cfg.max_epochs = 2;
  cfg.batch_size = 8;
  auto straight = small_bert(6);
  train::Trainer a(straight, models::bert_forward(straight), cfg);
  const auto ra = a.fit(sub, d.val);

  cfg.output_dir = trainer_dir("resume-split").string();
  auto first = small_bert(6);
  train::Trainer b(first, models::bert_forward(first), cfg);
  b.on_epoch_end([](const train::EpochRecord&) { return false; });  // "killed" after epoch 1
  REQUIRE(b.fit(sub, d.val).size() == 1);
  // Built as the run's model was (the dropout seeds follow the initialisation seed); weights,
  // optimizer state and dropout counters come from `last`.
  auto resumed = small_bert(6);
  resumed->bert->embeddings->word_embeddings->weight.data()[0] += 1.0f;  // overwritten by the load
  train::Trainer c(resumed, models::bert_forward(resumed), cfg);
  const auto rc = c.fit(sub, d.val, true);
  REQUIRE(rc.size() == 2);
  CHECK(rc[1].train_loss == ra[1].train_loss);
  CHECK(rc[1].val_loss == ra[1].val_loss);
  const auto wa = straight->state_dict(), wc = resumed->state_dict();
  std::size_t differing = 0;
  for (const auto& [name, t] : wa)
    if (t.to_vector() != wc.at(name).to_vector()) ++differing;
  CHECK(differing == 0);
  CHECK(c.optimizer().lr() == a.optimizer().lr());
  // A checkpoint of another model is refused, naming what it holds.
  auto other = cfg;
  other.model = "bert:2-32-2-64";
  auto m2 = small_bert(1);
  train::Trainer wrong(m2, models::bert_forward(m2), other);
  const auto err = error_of([&] { wrong.fit(sub, d.val, true); });
  CHECK(err.find("trained as model 'bert:1-32-2-64'") != std::string::npos);
  std::filesystem::remove_all(a.output_dir());
  std::filesystem::remove_all(c.output_dir());
}
