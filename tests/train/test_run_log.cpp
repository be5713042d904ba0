// The run's logs (train/run_log.hpp, io/tensorboard.hpp): CRC-32C against RFC 3720's check
// values, the event encoding read back field by field, a torn record dropped and a corrupt one
// refused, and the trainer's step rows and TensorBoard scalars — every step once, with the
// values metrics.jsonl holds — on a fresh run and on a run killed mid-epoch and resumed
// (same rows and scalars as a run that was never stopped). TensorBoard's own reader reads
// the files in tests/train/test_tensorboard.sh.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "qnum/core/error.hpp"
#include "qnum/io/tensorboard.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/train/train.hpp"

namespace tb = qnum::io::tensorboard;
namespace train = qnum::train;
using qnum_test::small_jsc;
using qnum_test::TempDir;

namespace {

std::vector<nlohmann::json> jsonl(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

train::TrainConfig log_config(const TempDir& dir, const std::string& run, int epochs) {
  train::TrainConfig c;
  c.model = "jsc-tiny";
  c.dataset = "jsc-synthetic";
  c.max_epochs = epochs;
  c.batch_size = 500;  // 8 steps per epoch
  c.schedule = "linear";
  c.max_grad_norm = 0;
  c.seed = 3;
  c.output_dir = (dir.path / run).string();
  c.tensorboard_dir = (dir.path / run / "tb").string();
  c.log_every_n_steps = 3;
  c.progress = false;
  return c;
}

/// (tag, step) -> value of a log; CHECKs that no pair appears twice.
std::map<std::pair<std::string, std::int64_t>, float> by_tag_step(const std::filesystem::path& dir) {
  std::map<std::pair<std::string, std::int64_t>, float> m;
  for (const auto& s : tb::read_scalars(dir)) {
    CAPTURE(s.tag);
    CAPTURE(s.step);
    CHECK(m.emplace(std::make_pair(s.tag, s.step), s.value).second);
  }
  return m;
}

}  // namespace

TEST_CASE("tensorboard: CRC-32C check values and TFRecord framing") {
  CHECK(tb::crc32c("123456789") == 0xE3069283u);                // RFC 3720 B.4 / the CRC catalogue
  CHECK(tb::crc32c(std::string(32, '\0')) == 0x8A9136AAu);      // RFC 3720 B.4: 32 zero bytes
  CHECK(tb::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);    // 32 bytes of 0xFF
  CHECK(tb::crc32c("6789", tb::crc32c("12345")) == 0xE3069283u);  // continues
  const std::string rec = tb::detail::frame_record("abc");
  REQUIRE(rec.size() == 8 + 4 + 3 + 4);
  CHECK(rec.substr(0, 8) == std::string("\x03\0\0\0\0\0\0\0", 8));
  CHECK(rec.substr(12, 3) == "abc");
}

TEST_CASE("tensorboard: scalars written, read back, torn and corrupt files") {
  TempDir dir("tb-io");
  const auto log = dir.path / "run";
  {
    tb::EventWriter w(log);
    w.add_scalar("train/loss", 0.5f, 1, 100.25);
    w.add_scalar("train/loss", -1e-30f, 2, 101.5);
    w.add_scalar("eval/accuracy", 0.75f, 300000000000LL, 102.0);
  }
  auto s = tb::read_scalars(log);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == tb::Scalar{"train/loss", 1, 0.5f, 100.25});
  CHECK(s[1] == tb::Scalar{"train/loss", 2, -1e-30f, 101.5});
  CHECK(s[2] == tb::Scalar{"eval/accuracy", 300000000000LL, 0.75f, 102.0});

  const auto file = tb::event_files(log).at(0);
  const std::string bytes = qnum::read_file(file);
  // A torn last record (a killed writer) ends the read; the records before it stay.
  for (std::size_t cut : {std::size_t{1}, std::size_t{5}, std::size_t{15}}) {
    qnum::write_file_atomic(file, bytes.substr(0, bytes.size() - cut));
    CHECK(tb::read_scalars(log).size() == 2);
  }
  // A flipped bit inside a record is refused, naming the file.
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x10;
  qnum::write_file_atomic(file, bad);
  CHECK_THROWS_WITH_AS(tb::read_scalars(log), doctest::Contains("bad data checksum"), qnum::Error);
  qnum::write_file_atomic(file, bytes);

  // Truncation keeps steps <= the resumed point, in one file that sorts before a new writer's.
  tb::truncate_log(log, 1);
  s = tb::read_scalars(log);
  REQUIRE(s.size() == 1);
  CHECK(s[0].step == 1);
  {
    tb::EventWriter w(log);
    w.add_scalar("train/loss", 0.25f, 2);
  }
  s = tb::read_scalars(log);
  REQUIRE(s.size() == 2);
  CHECK(s[1].value == 0.25f);
  tb::clear_log(log);
  CHECK(tb::read_scalars(log).empty());

  // A log folder that is a file.
  qnum::write_file_atomic(dir.path / "file", "x");
  CHECK_THROWS_WITH_AS(tb::EventWriter(dir.path / "file"), doctest::Contains("is a file"), qnum::Error);
}

TEST_CASE("train: step rows and TensorBoard scalars, fresh and resumed after a kill mid-epoch") {
  const auto& d = small_jsc();
  TempDir dir("runlog");
  const auto straight_cfg = log_config(dir, "straight", 3);
  train::Trainer a(qnum::models::make_jsc_model("jsc-tiny", 1), straight_cfg);
  a.fit(d.train, d.val);

  // metrics.jsonl: a step row every 3 steps (8 per epoch: steps 3, 6 | 9, 12, 15 | 18, 21, 24),
  // each before the row of its epoch, with the loss, learning rate and gradient norm.
  const auto rows = jsonl(a.metrics_file());
  std::vector<std::int64_t> steps;
  std::vector<int> epochs;
  for (const auto& r : rows) {
    if (r.contains("step")) {
      steps.push_back(r["step"].get<std::int64_t>());
      CHECK(r["grad_norm"].get<double>() > 0);
      CHECK(r["learning_rate"].get<double>() > 0);
    } else {
      epochs.push_back(r["epoch"].get<int>());
      steps.push_back(-r["epoch"].get<int>());
    }
  }
  CHECK(steps == std::vector<std::int64_t>{3, 6, -1, 9, 12, 15, -2, 18, 21, 24, -3});

  // TensorBoard: the same numbers (as float32) on the same steps, each once; epoch scalars
  // at the epoch's last step.
  const auto logged = by_tag_step(straight_cfg.tensorboard_dir);
  for (const auto& r : rows) {
    if (r.contains("step")) {
      const auto s = r["step"].get<std::int64_t>();
      CHECK(logged.at({"train/loss", s}) == static_cast<float>(r["loss"].get<double>()));
      CHECK(logged.at({"train/learning_rate", s}) == static_cast<float>(r["learning_rate"].get<double>()));
      CHECK(logged.at({"train/grad_norm", s}) == static_cast<float>(r["grad_norm"].get<double>()));
    } else {
      const auto s = 8 * r["epoch"].get<std::int64_t>();
      CHECK(logged.at({"eval/loss", s}) == static_cast<float>(r["val_loss"].get<double>()));
      CHECK(logged.at({"eval/accuracy", s}) == static_cast<float>(r["val_accuracy"].get<double>()));
      CHECK(logged.at({"train/epoch_loss", s}) == static_cast<float>(r["train_loss"].get<double>()));
    }
  }
  CHECK(logged.size() == 8 * 4 + 3 * 3);  // 8 logged steps x 4 tags + 3 epochs x 3 tags
  CHECK(logged.at({"train/epoch", 12}) == 1.5f);

  // A run "killed" in epoch 3 at step 20: its checkpoint is epoch 2's; the log already has
  // steps 18 and (torn) more. Resumed, both logs equal the straight run's.
  auto killed_cfg = log_config(dir, "killed", 3);
  {
    train::Trainer b(qnum::models::make_jsc_model("jsc-tiny", 1), killed_cfg);
    b.on_step([](std::int64_t step, float) {
      if (step == 20) throw std::runtime_error("killed");
    });
    CHECK_THROWS_AS(b.fit(d.train, d.val), std::runtime_error);
  }
  {
    std::ofstream torn(std::filesystem::path(killed_cfg.output_dir) / "metrics.jsonl", std::ios::app);
    torn << "{\"step\":21,\"ep";  // a row half appended when the process died
  }
  auto before = by_tag_step(killed_cfg.tensorboard_dir);
  CHECK(before.count({"train/loss", 18}) == 1);
  train::Trainer c(qnum::models::make_jsc_model("jsc-tiny", 1), killed_cfg);
  c.fit(d.train, d.val, true);
  auto strip = [](std::vector<nlohmann::json> v) {
    for (auto& r : v) r.erase("seconds");
    return v;
  };
  CHECK(strip(jsonl(c.metrics_file())) == strip(rows));
  CHECK(by_tag_step(killed_cfg.tensorboard_dir) == logged);

  // Fresh again in the same folders: both logs start over (no rows of the earlier run).
  auto again = killed_cfg;
  again.max_epochs = 1;
  train::Trainer e(qnum::models::make_jsc_model("jsc-tiny", 1), again);
  e.fit(d.train, d.val);
  CHECK(jsonl(e.metrics_file()).size() == 3);
  CHECK(by_tag_step(again.tensorboard_dir).size() == 2 * 4 + 3);

  // A TensorBoard folder that is a file; a negative interval.
  auto bad = again;
  bad.tensorboard_dir = (dir.path / "straight" / "metrics.jsonl").string();
  CHECK_THROWS_WITH_AS(train::Trainer(qnum::models::make_jsc_model("jsc-tiny", 1), bad),
                       doctest::Contains("is a file"), qnum::Error);
  bad = again;
  bad.log_every_n_steps = -1;
  CHECK_THROWS_WITH_AS(train::Trainer(qnum::models::make_jsc_model("jsc-tiny", 1), bad),
                       doctest::Contains("log_every_n_steps must be >= 0"), qnum::Error);
}
