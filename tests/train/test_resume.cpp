// Determinism of the trainer: the same seed gives the same final weights to the bit at 1
// and 2 threads, and a run stopped after 2 epochs and resumed for 2 more equals a 4-epoch
// run bit for bit (weights, optimizer state, metrics except seconds) — for each optimizer
// and schedule, and with a Dropout layer (jsc-trt) whose mask counter must be restored.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/train/train.hpp"

namespace train = qnum::train;
using qnum_test::same_bits;
using qnum_test::small_jsc;
using qnum_test::TempDir;

namespace {

train::TrainConfig resume_config(const std::string& model, const TempDir& dir, int epochs) {
  train::TrainConfig c;
  c.model = model;
  c.dataset = "jsc-synthetic";
  c.max_epochs = epochs;
  c.batch_size = 100;
  c.learning_rate = 5e-3;
  c.seed = 11;
  c.output_dir = dir.path.string();
  c.progress = false;
  return c;
}

std::string metrics_without_seconds(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    j.erase("seconds");
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("train: same seed, same bits at 1 and 2 threads") {
  const auto& d = small_jsc();
  std::map<std::string, qnum::Tensor> weights[2];
  std::vector<train::EpochRecord> records[2];
  for (int threads : {1, 2}) {
    TempDir dir("threads");
    auto model = qnum::models::make_jsc_model("jsc-mlp:16-64-32-5", 5);
    auto c = resume_config("jsc-mlp:16-64-32-5", dir, 2);
    c.threads = threads;
    train::Trainer t(model, c);
    records[threads - 1] = t.fit(d.train, d.val);
#if defined(_OPENMP)
    CHECK(qnum::num_threads() == threads);
#else
    CHECK(qnum::num_threads() == 1);  // a build without OpenMP (clang without libomp) runs serially
#endif
    weights[threads - 1] = model->state_dict();
  }
  qnum::set_num_threads(2);
  CHECK(same_bits(weights[0], weights[1]));
  for (std::size_t e = 0; e < records[0].size(); ++e) {
    CHECK(records[0][e].train_loss == records[1][e].train_loss);
    CHECK(records[0][e].val_loss == records[1][e].val_loss);
  }
}

TEST_CASE("train: 2 epochs + resume 2 more == 4 epochs straight, bit for bit") {
  const auto& d = small_jsc();
  struct Case {
    std::string model, optimizer, schedule;
  };
  for (const Case& k : {Case{"jsc-tiny", "adam", "cosine"}, Case{"jsc-trt", "sgd", "linear"},
                        Case{"jsc-mlp:16-32-5", "adamw", "constant"}}) {
    CAPTURE(k.model);
    CAPTURE(k.optimizer);
    TempDir straight_dir("straight"), resumed_dir("resumed");
    auto straight_cfg = resume_config(k.model, straight_dir, 4);
    straight_cfg.optimizer = k.optimizer;
    straight_cfg.schedule = k.schedule;
    auto straight = qnum::models::make_jsc_model(k.model, 2);
    train::Trainer a(straight, straight_cfg);
    const auto full = a.fit(d.train, d.val);

    // The interrupted run: the same 4-epoch config stopped after epoch 2 (its schedule
    // horizon is still 4 epochs), then a new process: fresh model and trainer, resume.
    auto resumed_cfg = straight_cfg;
    resumed_cfg.output_dir = resumed_dir.path.string();
    {
      auto first = qnum::models::make_jsc_model(k.model, 2);
      train::Trainer b(first, resumed_cfg);
      b.on_epoch_end([](const train::EpochRecord& r) { return r.epoch < 2; });
      CHECK(b.fit(d.train, d.val).size() == 2);
    }
    // Same construction seed: the weights are overwritten by the checkpoint, but a Dropout
    // layer's mask seed is fixed when the model is built (only its counter is state).
    auto second = qnum::models::make_jsc_model(k.model, 2);
    for (auto& p : second->parameters()) p.values()[0] += 1.0f;  // the checkpoint must overwrite these
    train::Trainer c(second, resumed_cfg);
    const auto resumed = c.fit(d.train, d.val, true);
    REQUIRE(resumed.size() == 4);
    CHECK(same_bits(straight->state_dict(), second->state_dict()));
    CHECK(same_bits(a.optimizer().state_dict(), c.optimizer().state_dict()));
    CHECK(a.best_val_loss() == c.best_val_loss());
    for (std::size_t e = 0; e < 4; ++e) {
      CHECK(full[e].epoch == resumed[e].epoch);
      CHECK(full[e].train_loss == resumed[e].train_loss);
      CHECK(full[e].val_loss == resumed[e].val_loss);
      CHECK(full[e].val_accuracy == resumed[e].val_accuracy);
    }
    CHECK(metrics_without_seconds(a.metrics_file()) == metrics_without_seconds(c.metrics_file()));
    CHECK(same_bits(qnum::read_safetensors(a.best_checkpoint()).tensors,
                    qnum::read_safetensors(c.best_checkpoint()).tensors));

    // Resuming a finished run trains nothing more and returns its history.
    auto third = qnum::models::make_jsc_model(k.model, 2);
    train::Trainer done(third, resumed_cfg);
    CHECK(done.fit(d.train, d.val, true).size() == 4);
    CHECK(same_bits(third->state_dict(), straight->state_dict()));
  }
}

TEST_CASE("train: resume without a checkpoint, or of another model name, is an error") {
  const auto& d = small_jsc();
  TempDir dir("resume-missing");
  auto model = qnum::models::make_jsc_model("jsc-tiny", 1);
  train::Trainer t(model, resume_config("jsc-tiny", dir, 1));
  CHECK_THROWS_WITH_AS(t.fit(d.train, d.val, true), doctest::Contains("cannot resume: no checkpoint"), qnum::Error);
  t.fit(d.train, d.val);
  auto cfg = resume_config("jsc-tiny-renamed", dir, 2);
  train::Trainer other(qnum::models::make_jsc_model("jsc-tiny", 1), cfg);
  CHECK_THROWS_WITH_AS(other.fit(d.train, d.val, true), doctest::Contains("trained as model 'jsc-tiny'"), qnum::Error);
}
