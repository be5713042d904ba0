// BERT on a device (the host reference backend standing in for CUDA): inference and a
// training step with dropout give the CPU's logits, loss and gradients, padding included.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "qnum/models/bert.hpp"
#include "qnum/nn/optim.hpp"
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
