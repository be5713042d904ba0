// Checkpoints and bad input: save/load round trips (model, optimizer, Dropout counters,
// metadata), a checkpoint of another model is an error naming the tensor and changes
// nothing, NaN/Inf losses stop the run and keep the last good checkpoint, and unknown
// optimizer or schedule names list the known ones.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/train/train.hpp"

namespace train = qnum::train;
namespace nn = qnum::nn;
using qnum_test::same_bits;
using qnum_test::small_jsc;
using qnum_test::TempDir;

namespace {

train::TrainConfig checkpoint_config(const std::string& model, const TempDir& dir, int epochs) {
  train::TrainConfig c;
  c.model = model;
  c.dataset = "jsc-synthetic";
  c.max_epochs = epochs;
  c.batch_size = 200;
  c.learning_rate = 5e-3;
  c.output_dir = dir.path.string();
  c.progress = false;
  return c;
}

/// A few Adam steps on jsc-trt (which has a Dropout layer) so every piece of state is set.
void train_a_little(nn::Module& model, nn::Optimizer& opt) {
  const auto& d = small_jsc();
  model.train();
  for (const auto& b : qnum::data::batches(d.train, {500, true, false, 3})) {
    opt.zero_grad();
    qnum::cross_entropy(model.forward(b.features), b.labels).backward();
    opt.step();
  }
}

std::uint64_t dropout_calls(nn::Module& m) {
  for (auto& [name, mod] : m.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(mod)) return d->calls();
  return 0;
}

}  // namespace

TEST_CASE("checkpoint: model, optimizer state, Dropout counters and metadata round-trip") {
  TempDir dir("ckpt");
  auto model = qnum::models::make_jsc_model("jsc-trt", 4);
  auto opt = train::make_optimizer("adam", model->parameters(), 1e-3, 0.0);
  train_a_little(*model, *opt);
  REQUIRE(dropout_calls(*model) == 8);
  const auto path = train::save_checkpoint(dir.path / "sub", "ck", *model, opt.get(), {{"model", "jsc-trt"}, {"x", 1}});
  CHECK(path == dir.path / "sub" / "ck.safetensors");
  CHECK(std::filesystem::exists(dir.path / "sub" / "ck.json"));
  const auto st = qnum::read_safetensors(path);
  CHECK(st.tensors.count("2.weight") == 1);
  CHECK(st.tensors.count("optimizer.0.exp_avg") == 1);
  CHECK(st.tensors.count("optimizer.0.step") == 1);

  auto fresh = qnum::models::make_jsc_model("jsc-trt", 9);
  auto fresh_opt = train::make_optimizer("adam", fresh->parameters(), 1e-3, 0.0);
  for (auto p : {path, dir.path / "sub" / "ck", dir.path / "sub" / "ck.json"}) {
    const auto meta = train::load_checkpoint(p, *fresh, fresh_opt.get());
    CHECK(meta["x"] == 1);
    CHECK(meta["format"] == train::kCheckpointFormat);
    CHECK(meta["optimizer"] == "Adam");
  }
  CHECK(same_bits(fresh->state_dict(), model->state_dict()));
  CHECK(same_bits(fresh_opt->state_dict(), opt->state_dict()));
  CHECK(dropout_calls(*fresh) == 8);

  // Without an optimizer the optimizer state is ignored; an optimizer of another type or a
  // checkpoint saved without one is an error.
  auto plain = qnum::models::make_jsc_model("jsc-trt", 9);
  train::load_checkpoint(path, *plain, nullptr);
  CHECK(same_bits(plain->state_dict(), model->state_dict()));
  auto sgd = train::make_optimizer("sgd", plain->parameters(), 1e-3, 0.0);
  CHECK_THROWS_WITH_AS(train::load_checkpoint(path, *plain, sgd.get()), doctest::Contains("holds Adam state, not SGD"),
                       qnum::Error);
  train::save_checkpoint(dir.path, "noopt", *model, nullptr, {});
  CHECK_THROWS_WITH_AS(train::load_checkpoint(dir.path / "noopt", *plain, sgd.get()),
                       doctest::Contains("no optimizer state"), qnum::Error);
  CHECK_THROWS_WITH_AS(train::load_checkpoint(dir.path / "missing", *plain, nullptr),
                       doctest::Contains("missing.safetensors' not found"), qnum::Error);
}

TEST_CASE("checkpoint: another model's checkpoint is an error naming the tensor; nothing changes") {
  TempDir dir("ckpt-other");
  auto a = qnum::models::make_jsc_model("jsc-mlp:16-64-5", 1);
  train::save_checkpoint(dir.path, "a", *a, nullptr, {});
  auto b = qnum::models::make_jsc_model("jsc-mlp:16-32-5", 2);
  const auto before = b->state_dict();
  CHECK_THROWS_WITH_AS(train::load_checkpoint(dir.path / "a", *b, nullptr),
                       doctest::Contains("2.weight (checkpoint [64, 16], model [32, 16])"), qnum::Error);
  CHECK(same_bits(b->state_dict(), before));

  auto tiny = qnum::models::make_jsc_model("jsc-tiny", 1);
  train::save_checkpoint(dir.path, "tiny", *tiny, nullptr, {});
  auto s = qnum::models::make_jsc_model("jsc-s", 1);
  CHECK_THROWS_WITH_AS(train::load_checkpoint(dir.path / "tiny", *s, nullptr), doctest::Contains("missing keys: "),
                       qnum::Error);
  // A rejected optimizer state leaves the model as it was too.
  auto opt = train::make_optimizer("adam", a->parameters(), 1e-3, 0.0);
  train_a_little(*a, *opt);
  train::save_checkpoint(dir.path, "a2", *a, opt.get(), {});
  auto a_again = qnum::models::make_jsc_model("jsc-mlp:16-64-5", 5);
  const auto a_before = a_again->state_dict();
  auto wrong = train::make_optimizer("adam", {a_again->parameters()[0]}, 1e-3, 0.0);  // other parameter list
  CHECK_THROWS_AS(train::load_checkpoint(dir.path / "a2", *a_again, wrong.get()), qnum::Error);
  CHECK(same_bits(a_again->state_dict(), a_before));
}

TEST_CASE("train: a NaN loss stops the run and keeps the last good checkpoint") {
  const auto& d = small_jsc();
  TempDir dir("nan");
  auto cfg = checkpoint_config("jsc-tiny", dir, 4);
  cfg.optimizer = "sgd";  // its weight decay (MASE's 5e-4) times lr 1e30 overflows at once
  {
    train::Trainer t(qnum::models::make_jsc_model("jsc-tiny", 1), cfg);
    t.on_epoch_end([](const train::EpochRecord& r) { return r.epoch < 2; });
    t.fit(d.train, d.val);
  }
  const auto last = qnum::read_file(dir.path / "last.safetensors");
  const auto best = qnum::read_file(dir.path / "best.safetensors");
  const auto metrics = qnum::read_file(dir.path / "metrics.jsonl");

  // Resumed with an absurd learning rate the weights overflow within epoch 3.
  cfg.learning_rate = 1e30;
  train::Trainer t(qnum::models::make_jsc_model("jsc-tiny", 1), cfg);
  const std::string where = "; the last good checkpoint is " + (dir.path / "last.safetensors").string();
  try {
    t.fit(d.train, d.val, true);
    FAIL("no error");
  } catch (const qnum::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("loss became ") != std::string::npos);
    CHECK(msg.find(" at epoch 3") != std::string::npos);
    CHECK(msg.find(where) != std::string::npos);
  }
  CHECK(qnum::read_file(dir.path / "last.safetensors") == last);
  CHECK(qnum::read_file(dir.path / "best.safetensors") == best);
  CHECK(qnum::read_file(dir.path / "metrics.jsonl") == metrics);

  // NaN features in a fresh run: no epoch finished, no checkpoint written. (A plain Linear:
  // the JSC models start with BatchNorm + ReLU, and ReLU maps NaN to 0.)
  TempDir fresh_dir("nan-fresh");
  auto bad = d.train.subset(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  bad.features.data()[5 * 16 + 3] = std::numeric_limits<float>::quiet_NaN();
  auto fresh_cfg = checkpoint_config("jsc-tiny", fresh_dir, 2);
  fresh_cfg.batch_size = 4;
  train::Trainer f(std::make_shared<nn::Linear>(16, 5, true, 1), fresh_cfg);
  CHECK_THROWS_WITH_AS(f.fit(bad, d.val), doctest::Contains("loss became NaN at epoch 1 batch "), qnum::Error);
  CHECK_THROWS_WITH_AS(f.fit(bad, d.val), doctest::Contains("; the last good checkpoint is none"), qnum::Error);
  CHECK_FALSE(std::filesystem::exists(fresh_dir.path / "last.safetensors"));
  CHECK_FALSE(std::filesystem::exists(fresh_dir.path / "best.safetensors"));
}

TEST_CASE("train: unknown optimizer or schedule names and bad settings are errors") {
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  train::TrainConfig c;
  c.progress = false;
  c.optimizer = "lamb";
  CHECK_THROWS_WITH_AS(train::Trainer(model, c), "optimizer: unknown name 'lamb' (known: adam, adamw, sgd)",
                       qnum::Error);
  c.optimizer = "adam";
  c.schedule = "step";
  CHECK_THROWS_WITH_AS(train::Trainer(model, c), "schedule: unknown name 'step' (known: constant, linear, cosine)",
                       qnum::Error);
  c.schedule = "cosine";
  c.max_epochs = 0;
  CHECK_THROWS_WITH_AS(train::Trainer(model, c), doctest::Contains("max_epochs must be >= 1"), qnum::Error);
  c.max_epochs = 1;
  c.batch_size = 0;
  CHECK_THROWS_WITH_AS(train::Trainer(model, c), doctest::Contains("batch_size must be >= 1"), qnum::Error);
  CHECK_THROWS_WITH_AS(train::make_optimizer("rmsprop", model->parameters(), 1e-3, 0),
                       doctest::Contains("known: adam, adamw, sgd"), qnum::Error);
}

TEST_CASE("train: output_dir placeholders and the per-epoch schedules") {
  train::TrainConfig c;
  c.model = "jsc-s";
  c.dataset = "jsc";
  CHECK(train::resolve_output_dir(c) == std::filesystem::path("qnum-runs/jsc-s_jsc"));
  c.output_dir = "";
  CHECK(train::resolve_output_dir(c) == std::filesystem::path("qnum-runs/jsc-s_jsc"));
  // MASE's CosineAnnealingLR(T_max = max_epochs, eta_min = 1e-6), stepped per epoch.
  CHECK(train::epoch_learning_rate("cosine", 1e-3, 0, 10) == 1e-3);
  CHECK(train::epoch_learning_rate("cosine", 1e-3, 5, 10) == doctest::Approx(1e-6 + (1e-3 - 1e-6) / 2));
  CHECK(train::epoch_learning_rate("cosine", 1e-3, 10, 10) == doctest::Approx(1e-6));
  CHECK(train::epoch_learning_rate("linear", 1e-3, 5, 10) == doctest::Approx(5e-4));
  CHECK(train::epoch_learning_rate("constant", 1e-3, 7, 10) == 1e-3);
  // MASE's t_max / eta_min: the cosine's half period and floor (here 4 epochs, down to 1e-4).
  CHECK(train::epoch_learning_rate("cosine", 1e-3, 4, 10, 4, 1e-4) == doctest::Approx(1e-4));
  CHECK(train::epoch_learning_rate("cosine", 1e-3, 2, 10, 4, 1e-4) == doctest::Approx(1e-4 + (1e-3 - 1e-4) / 2));
  c.max_steps = 0;
  CHECK_THROWS_WITH_AS(train::validate(c), doctest::Contains("max_steps must be >= 1"), qnum::Error);
  c.max_steps = -1;
  c.eta_min = -1;
  CHECK_THROWS_WITH_AS(train::validate(c), doctest::Contains("eta_min"), qnum::Error);
}

TEST_CASE("evaluate: loss and accuracy over all rows, mode restored") {
  const auto& d = small_jsc();
  auto model = qnum::models::make_jsc_model("jsc-mlp:16-32-5", 1);
  model->train();
  const auto a = train::evaluate(*model, d.val, 64);
  const auto b = train::evaluate(*model, d.val, 1000);
  CHECK(model->is_training());
  CHECK(a.count == 1000);
  CHECK(a.loss == doctest::Approx(b.loss).epsilon(1e-12));
  CHECK(a.accuracy == b.accuracy);
  // The loss is the full-batch cross_entropy.
  model->eval();
  const float ce = qnum::cross_entropy(model->forward(d.val.features), d.val.labels).item();
  CHECK(a.loss == doctest::Approx(ce).epsilon(1e-6));
  const auto empty = train::evaluate(*model, d.val.subset(std::vector<std::int64_t>{}), 8);
  CHECK(empty.count == 0);
}
