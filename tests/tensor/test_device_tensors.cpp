// Device tensors through the host reference backend (host_device_backend.hpp): every op a
// model uses gives the CPU's values and gradients when its inputs live on the "device",
// copies are explicit, and mixing devices is a clear error.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "qnum/format/format.hpp"
#include "qnum/nn/layers.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/tensor/ops.hpp"
#include "tensor/host_device_backend.hpp"

namespace {

using qnum::Device;
using qnum::Tensor;

const Device kDev = Device::cuda();

void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(static_cast<double>(got[i]) - want[i]) <= tol * (1.0 + std::abs(static_cast<double>(want[i]))));
  }
}

/// Runs f on CPU leaves and on their device copies; compares f's values and the gradient of
/// Σ out·r (r fixed random) for every input.
void compare_op(const std::vector<Tensor>& inputs, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                double tol = 1e-5) {
  qnum::testing::host_device_backend();
  std::vector<Tensor> cpu, dev;
  for (const Tensor& t : inputs) {
    cpu.push_back(t.clone().set_requires_grad(true));
    Tensor d = t.to(kDev);
    d.set_requires_grad(true);
    dev.push_back(d);
  }
  const Tensor yc = f(cpu), yd = f(dev);
  REQUIRE(yd.is_cuda());
  REQUIRE(yd.shape() == yc.shape());
  check_close(yd.to_vector(), yc.to_vector(), tol, "values");
  const Tensor r = Tensor::randn(yc.shape(), 99);
  qnum::sum(qnum::mul(yc, r)).backward();
  qnum::sum(qnum::mul(yd, r.to(kDev))).backward();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(dev[i].has_grad() == cpu[i].has_grad());
    if (cpu[i].has_grad()) check_close(dev[i].grad_tensor().to_vector(), cpu[i].grad_tensor().to_vector(), tol, "grad");
  }
}

}  // namespace

TEST_CASE("device tensors: explicit copies, clear errors") {
  auto& be = qnum::testing::host_device_backend();
  const Tensor a = Tensor::randn({3, 4}, 1);
  const Tensor d = a.to(kDev);
  CHECK(d.is_cuda());
  CHECK(d.device() == kDev);
  CHECK(d.to(kDev).id() == d.id());  // already there: no copy
  CHECK(d.to(Device::cpu()).to_vector() == a.to_vector());
  CHECK_THROWS_WITH_AS(static_cast<void>(d.values()), doctest::Contains("to(Device::cpu())"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::add(a, d), doctest::Contains("move them to one device"), qnum::Error);
  CHECK(Device::parse("cuda:0") == kDev);
  CHECK_THROWS_AS(Device::parse("tpu"), qnum::Error);
  const auto downloads = be.downloads;
  CHECK(qnum::sum(d).item() == doctest::Approx(qnum::sum(a).item()));
  CHECK(be.downloads == downloads + 1);  // item(): one read back
}

TEST_CASE("device ops: values and gradients as the CPU's") {
  const Tensor x = Tensor::randn({2, 5, 8}, 2), w = Tensor::randn({6, 8}, 3), b = Tensor::randn({6}, 4);
  compare_op({x, w, b}, [](const auto& t) { return qnum::linear(t[0], t[1], t[2]); });
  compare_op({x, w}, [](const auto& t) { return qnum::linear(t[0], t[1]); });
  compare_op({x, Tensor::randn({8, 3}, 5)}, [](const auto& t) { return qnum::matmul(t[0], t[1]); });
  compare_op({x, Tensor::randn({2, 8, 3}, 6)}, [](const auto& t) { return qnum::matmul(t[0], t[1]); });
  compare_op({x, Tensor::randn({8}, 7)}, [](const auto& t) { return qnum::add(t[0], t[1]); });
  compare_op({x, Tensor::randn({8}, 7)}, [](const auto& t) { return qnum::add(t[1], t[0]); });
  compare_op({x, Tensor::randn({2, 5, 8}, 8)}, [](const auto& t) { return qnum::sub(t[0], t[1]); });
  compare_op({x, Tensor::randn({5, 8}, 9)}, [](const auto& t) { return qnum::mul(t[0], t[1]); });
  compare_op({x, qnum::add_scalar(Tensor::uniform({8}, 10, 0.5f, 2.0f), 0.0f)},
             [](const auto& t) { return qnum::div(t[0], t[1]); });
  compare_op({x}, [](const auto& t) { return qnum::mul_scalar(qnum::add_scalar(t[0], 0.5f), 3.0f); });
  compare_op({x}, [](const auto& t) { return qnum::gelu(t[0]); }, 1e-5);
  compare_op({x}, [](const auto& t) { return qnum::tanh(t[0]); });
  compare_op({x}, [](const auto& t) { return qnum::exp(t[0]); });
  compare_op({x}, [](const auto& t) { return qnum::sigmoid(t[0]); });
  compare_op({x}, [](const auto& t) { return qnum::relu(t[0]); });
  compare_op({x}, [](const auto& t) { return qnum::softmax(t[0], -1); });
  compare_op({x}, [](const auto& t) { return qnum::log_softmax(t[0], -1); });
  compare_op({x, Tensor::randn({8}, 11), Tensor::randn({8}, 12)},
             [](const auto& t) { return qnum::layer_norm(t[0], t[1], t[2], 1e-12f); }, 1e-4);
  compare_op({x}, [](const auto& t) { return qnum::permute(t[0], {1, 0, 2}); });
  compare_op({x}, [](const auto& t) { return qnum::transpose(t[0], 1, 2); });
  compare_op({x}, [](const auto& t) { return qnum::narrow(t[0], 1, 1, 3); });
  compare_op({x}, [](const auto& t) { return qnum::reshape(t[0], {10, 8}); });
  compare_op({x}, [](const auto& t) { return qnum::mean(t[0]); });
  compare_op({x}, [](const auto& t) { return qnum::dropout(t[0], 0.3f, true, 42); });  // the CPU's mask
  compare_op({Tensor::randn({7, 3}, 13)}, [](const auto& t) {
    const std::vector<std::int64_t> targets{0, 2, 1, -100, 2, 0, 1};
    return qnum::cross_entropy(t[0], targets);
  });
  compare_op({Tensor::randn({11, 4}, 14)}, [](const auto& t) {
    const std::vector<std::int64_t> ids{3, 1, 4, 1, 5, 9, 2, 6};
    return qnum::embedding(ids, {2, 4}, t[0]);
  });
  const qnum::Format f = qnum::Format::parse("integer:width=6,frac_width=3");
  compare_op({x}, [f](const auto& t) { return qnum::fake_quantize(t[0], f); });
}

TEST_CASE("device ops: attention with mask and dropout as the CPU's") {
  const std::int64_t B = 2, T = 5, H = 2, D = 4;
  const Tensor q = Tensor::randn({B, T, H * D}, 20), k = Tensor::randn({B, T, H * D}, 21),
               v = Tensor::randn({B, T, H * D}, 22);
  Tensor mask = Tensor::zeros({B, 1, 1, T});
  mask.values()[4] = std::numeric_limits<float>::lowest();
  for (float p : {0.0f, 0.25f}) {
    compare_op({q, k, v, mask}, [p](const auto& t) {
      return qnum::scaled_dot_product_attention(t[0], t[1], t[2], t[3].detach(), 2, 0.5f, p, 7);
    }, 1e-5);
  }
}

TEST_CASE("Module::to and AdamW on the device follow the CPU") {
  qnum::testing::host_device_backend();
  auto make = [] {
    auto m = std::make_shared<qnum::nn::Linear>(6, 3);
    m->weight.values()[0] = 0.5f;
    return m;
  };
  auto cpu = make(), dev = make();
  dev->load_state_dict(cpu->state_dict());
  dev->to(kDev);
  CHECK(dev->weight.is_cuda());
  CHECK(dev->device() == kDev);
  qnum::nn::AdamW oc(cpu->parameters(), {.lr = 0.01}), od(dev->parameters(), {.lr = 0.01});
  const Tensor x = Tensor::randn({4, 6}, 30);
  const std::vector<std::int64_t> y{0, 1, 2, 1};
  for (int step = 0; step < 3; ++step) {
    oc.zero_grad(), od.zero_grad();
    qnum::cross_entropy((*cpu)(x), y).backward();
    qnum::cross_entropy((*dev)(x.to(kDev)), y).backward();
    oc.step(), od.step();
  }
  const auto sc = cpu->state_dict(), sd = dev->state_dict();  // host copies from the device
  for (const auto& [name, t] : sc) check_close(sd.at(name).to_vector(), t.to_vector(), 1e-5, name.c_str());
  const auto oc_state = oc.state_dict(), od_state = od.state_dict();
  CHECK(oc_state.size() == od_state.size());
  for (const auto& [name, t] : oc_state) check_close(od_state.at(name).to_vector(), t.to_vector(), 1e-5, name.c_str());
  // Back to the host: the values come along, and so do AdamW's moments (the next step agrees).
  dev->to(Device::cpu());
  CHECK(!dev->weight.is_cuda());
  check_close(dev->weight.to_vector(), cpu->weight.to_vector(), 1e-5, "weight after to(cpu)");
  oc.zero_grad(), od.zero_grad();
  qnum::cross_entropy((*cpu)(x), y).backward();
  qnum::cross_entropy((*dev)(x), y).backward();
  oc.step(), od.step();
  check_close(dev->weight.to_vector(), cpu->weight.to_vector(), 1e-5, "weight after a step back on the cpu");
}
