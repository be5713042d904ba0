// BERT on a device (the host reference backend standing in for CUDA): inference and a
// training step with dropout give the CPU's logits, loss and gradients, padding included.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <filesystem>
#include <string>
#include <utility>

#include "qnum/data/text.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/train/trainer.hpp"
#include "tensor/host_device_backend.hpp"

namespace {

using qnum::Device;
using qnum::Tensor;
using qnum::models::BertForSequenceClassification;

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::abs(static_cast<double>(b[i]))));
  return m;
}

}  // namespace

TEST_CASE("bert on a device: logits, loss, gradients and an AdamW step as on the CPU") {
  qnum::testing::host_device_backend();
  const auto config = qnum::models::bert_config("bert:2-32-2-64");
  BertForSequenceClassification cpu(config, 5), dev(config, 5);
  dev.to(Device::cuda());
  const std::int64_t B = 3, T = 6;
  std::vector<std::int64_t> ids(B * T), mask(B * T, 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 37 + 11) % 200);
  mask[5] = mask[4] = mask[17] = 0;  // padding in two rows
  const qnum::models::BertInput in{B, T, ids, mask, {}};
  const std::vector<std::int64_t> labels{1, 0, 1};

  for (bool training : {false, true}) {
    INFO("training " << training);
    cpu.train(training), dev.train(training);
    cpu.zero_grad(), dev.zero_grad();
    const Tensor lc = cpu.forward(in), ld = dev.forward(in);
    CHECK(ld.is_cuda());
    CHECK(max_rel_diff(ld.to_vector(), lc.to_vector()) < 1e-5);
    Tensor loss_c = qnum::cross_entropy(lc, labels), loss_d = qnum::cross_entropy(ld, labels);
    CHECK(loss_d.item() == doctest::Approx(loss_c.item()).epsilon(1e-5));
    loss_c.backward(), loss_d.backward();
    for (const auto& [name, p] : cpu.named_parameters()) {
      INFO(name);
      const Tensor pd = [&] {
        for (const auto& [n2, q] : dev.named_parameters())
          if (n2 == name) return q;
        return Tensor();
      }();
      REQUIRE(pd.defined());
      REQUIRE(pd.has_grad() == p.has_grad());
      if (p.has_grad()) CHECK(max_rel_diff(pd.grad_tensor().to_vector(), p.grad_tensor().to_vector()) < 1e-4);
    }
  }
  qnum::nn::AdamW oc(cpu.parameters(), {.lr = 1e-3}), od(dev.parameters(), {.lr = 1e-3});
  oc.step(), od.step();
  const auto sc = cpu.state_dict(), sd = dev.state_dict();
  for (const auto& [name, t] : sc) {
    INFO(name);
    CHECK(max_rel_diff(sd.at(name).to_vector(), t.to_vector()) < 1e-4);
  }
}

TEST_CASE("text trainer on a device: the CPU's run (clipping, warm-up, AdamW), host checkpoints that reload anywhere") {
  qnum::testing::host_device_backend();
  qnum::data::TextSyntheticOptions so;
  so.train = 96, so.val = 32, so.test = 32;
  const auto d = qnum::data::make_text_synthetic(so);
  auto make = [&] {
    auto c = qnum::models::bert_config("bert:1-32-2-64");
    c.vocab_size = d.tokenizer->vocab_size();
    c.max_position_embeddings = 128;
    return std::make_shared<BertForSequenceClassification>(c, 3);
  };
  auto run = [&](const std::string& device) {
    auto model = make();
    auto c = qnum::train::text_recipe();
    c.model = "bert:1-32-2-64", c.dataset = "text-synthetic";
    c.max_epochs = 2, c.batch_size = 16, c.learning_rate = 3e-3, c.progress = false;
    c.device = device;
    c.output_dir = (std::filesystem::temp_directory_path() / ("qnum-device-trainer-" + device)).string();
    std::filesystem::remove_all(c.output_dir);
    qnum::train::Trainer t(model, qnum::models::bert_forward(model), c);
    const auto records = t.fit(d.train, d.val);
    CHECK(model->device() == Device::parse(device));
    return std::pair{records, t.last_checkpoint()};
  };
  const auto [cpu, cpu_ckpt] = run("cpu");
  const auto [dev, dev_ckpt] = run("cuda");
  REQUIRE(cpu.size() == dev.size());
  for (std::size_t e = 0; e < cpu.size(); ++e) {
    CHECK(dev[e].train_loss == doctest::Approx(cpu[e].train_loss).epsilon(1e-4));
    CHECK(dev[e].val_loss == doctest::Approx(cpu[e].val_loss).epsilon(1e-4));
    CHECK(dev[e].val_accuracy == cpu[e].val_accuracy);
  }
  // The device run's checkpoint holds host values: a CPU model loads it and scores the same.
  auto reloaded = make();
  qnum::train::load_checkpoint(dev_ckpt, *reloaded, nullptr);
  const auto ev = qnum::train::evaluate(*reloaded, qnum::models::bert_forward(reloaded), d.val, 16);
  CHECK(ev.loss == doctest::Approx(dev.back().val_loss).epsilon(1e-4));
}
