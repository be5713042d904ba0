// Optimizers against torch.optim's update formulas evaluated by hand in double for three
// steps, Adam/AdamW against torch's own float32 steps (a fixture torch wrote), state_dict round trips that reproduce
// the next step bit for bit, argument errors, and the LR schedules at chosen steps against Hugging Face's formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "qnum/nn/optim.hpp"
#include "qnum/nn/schedule.hpp"
#include "qnum/tensor/ops.hpp"

using qnum::Tensor;
namespace nn = qnum::nn;

namespace {

const std::vector<double> kInit{0.5, -1.25, 2.0};
// The gradient of step k (loss = sum(p * g_k) gives exactly these).
const std::vector<std::vector<double>> kGrads{{0.1, -0.2, 0.3}, {-0.4, 0.05, 0.25}, {0.2, 0.3, -0.1}};

Tensor to_tensor(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor({static_cast<std::int64_t>(f.size())}, f);
}

/// Runs backward on sum(p * g_k) so p's gradient is g_k, and leaves `idle` without one.
void set_grad(Tensor& p, int k) {
  p.zero_grad();
  qnum::sum(qnum::mul(p, to_tensor(kGrads[static_cast<std::size_t>(k)]))).backward();
}

/// Takes three steps with `opt` on p and checks p after each against `expected(k, p)`, the
/// hand-computed double-precision update; also checks a parameter without gradient stays.
template <class Opt, class Expected>
void check_three_steps(Opt& opt, Tensor& p, const Tensor& idle, Expected expected) {
  std::vector<double> ref = kInit;
  const std::vector<float> idle_before = idle.to_vector();
  for (int k = 0; k < 3; ++k) {
    set_grad(p, k);
    opt.step();
    expected(k, ref);
    for (std::size_t j = 0; j < ref.size(); ++j)
      CHECK_MESSAGE(p.values()[j] == doctest::Approx(ref[j]).epsilon(1e-6), "step ", k, " element ", j);
    CHECK(idle.to_vector() == idle_before);
  }
  const auto state = opt.state_dict();
  CHECK(state.at("0.step").item() == 3.0f);
  CHECK(state.count("1.step") == 0);  // never had a gradient: no state, as PyTorch
}

}  // namespace

TEST_CASE("SGD: momentum, Nesterov and weight decay in PyTorch's order") {
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  Tensor p = to_tensor(kInit).set_requires_grad(true);
  Tensor idle = Tensor::ones({2}, true);
  nn::SGD opt({p, idle}, {.lr = lr, .momentum = mu, .weight_decay = wd, .nesterov = true});
  std::vector<double> buf(3);
  check_three_steps(opt, p, idle, [&](int k, std::vector<double>& ref) {
    for (std::size_t j = 0; j < 3; ++j) {
      double d = kGrads[static_cast<std::size_t>(k)][j] + wd * ref[j];
      buf[j] = k == 0 ? d : mu * buf[j] + d;  // dampening 0
      d = d + mu * buf[j];
      ref[j] -= lr * d;
    }
  });
  CHECK(opt.state_dict().at("0.momentum_buffer").shape() == qnum::Shape{3});

  SUBCASE("plain momentum with dampening, and no momentum") {
    Tensor q = to_tensor(kInit).set_requires_grad(true);
    nn::SGD damp({q}, {.lr = 0.05, .momentum = 0.5, .dampening = 0.3});
    std::vector<double> b(3);
    check_three_steps(damp, q, idle, [&](int k, std::vector<double>& ref) {
      for (std::size_t j = 0; j < 3; ++j) {
        const double d = kGrads[static_cast<std::size_t>(k)][j];
        b[j] = k == 0 ? d : 0.5 * b[j] + 0.7 * d;  // the first step takes the gradient undamped
        ref[j] -= 0.05 * b[j];
      }
    });
    Tensor r = to_tensor(kInit).set_requires_grad(true);
    nn::SGD plain({r}, {.lr = 0.5});
    check_three_steps(plain, r, idle, [&](int k, std::vector<double>& ref) {
      for (std::size_t j = 0; j < 3; ++j) ref[j] -= 0.5 * kGrads[static_cast<std::size_t>(k)][j];
    });
    CHECK(plain.state_dict().count("0.momentum_buffer") == 0);
  }
}

TEST_CASE("Adam and AdamW: bias correction, L2 vs decoupled weight decay") {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  auto adam_ref = [&](bool decoupled) {
    return [=, m = std::vector<double>(3), v = std::vector<double>(3)](int k, std::vector<double>& ref) mutable {
      const double t = k + 1;
      for (std::size_t j = 0; j < 3; ++j) {
        if (decoupled) ref[j] *= 1.0 - lr * wd;
        const double g = kGrads[static_cast<std::size_t>(k)][j] + (decoupled ? 0.0 : wd * ref[j]);
        m[j] = b1 * m[j] + (1 - b1) * g;
        v[j] = b2 * v[j] + (1 - b2) * g * g;
        const double mhat = m[j] / (1 - std::pow(b1, t)), vhat = v[j] / (1 - std::pow(b2, t));
        ref[j] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    };
  };
  Tensor idle = Tensor::ones({2}, true);
  SUBCASE("Adam") {
    Tensor p = to_tensor(kInit).set_requires_grad(true);
    nn::Adam opt({p, idle}, {.lr = lr, .weight_decay = wd});
    check_three_steps(opt, p, idle, adam_ref(false));
  }
  SUBCASE("AdamW") {
    Tensor p = to_tensor(kInit).set_requires_grad(true);
    nn::AdamW opt({p, idle}, {.lr = lr, .weight_decay = wd});
    check_three_steps(opt, p, idle, adam_ref(true));
  }
  SUBCASE("defaults are PyTorch's") {
    const nn::AdamW w({}, {});
    CHECK(w.options().weight_decay == 0.01);
    CHECK(w.options().beta1 == 0.9);
    CHECK(w.options().beta2 == 0.999);
    CHECK(w.options().eps == 1e-8);
    CHECK(w.lr() == 1e-3);
    CHECK(nn::Adam({}, {}).options().weight_decay == 0.0);
  }
}

namespace {

/// tests/fixtures/torch_optim/<file>: label -> hex floats (make_fixture.py wrote it).
std::map<std::string, std::vector<float>> read_torch_steps(const std::string& file = "adam_steps.txt") {
  std::ifstream in(QNUM_TEST_FIXTURES_DIR "/torch_optim/" + file);
  REQUIRE(in.good());
  std::map<std::string, std::vector<float>> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string label, word;
    ls >> label;
    while (ls >> word) rows[label].push_back(std::strtof(word.c_str(), nullptr));
  }
  return rows;
}

/// Distance in representable floats (same sign assumed: the fixture's values are far from 0).
std::int64_t ulps(float a, float b) {
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<std::int64_t>(ia) - ib);
}

}  // namespace

TEST_CASE("Adam and AdamW: torch.optim's float32 steps, against torch 2.15 on 37 parameters") {
  const auto torch = read_torch_steps();
  const std::vector<float>& init = torch.at("init");
  REQUIRE(init.size() == 37);  // two 16-lane vectors and a scalar tail
  int exact = 0, total = 0;
  for (const std::string name : {"adam", "adamw"}) {
    Tensor p = Tensor({37}, init).set_requires_grad(true);
    std::unique_ptr<nn::Optimizer> opt;
    if (name == "adam")
      opt = std::make_unique<nn::Adam>(std::vector<Tensor>{p}, nn::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
    else
      opt = std::make_unique<nn::AdamW>(std::vector<Tensor>{p}, nn::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
    bool p_was_torchs = true;  // Adam's L2 term feeds p into the moments
    for (int k = 0; k < 3; ++k) {
      const std::string step = name + std::to_string(k);
      p.zero_grad();
      const std::vector<float>& g = torch.at("grad" + std::to_string(k));
      qnum::sum(qnum::mul(p, Tensor({37}, g))).backward();  // p's gradient is exactly g
      opt->step();
      const auto state = opt->state_dict();
      // The moments involve no square root: torch's bits exactly while p was (a product
      // rounded apart from its FMA, or lerp as m + w·(g - m), fails here).
      if (name == "adamw" || p_was_torchs) {
        CHECK_MESSAGE(state.at("0.exp_avg").to_vector() == torch.at(step + ".exp_avg"), step);
        CHECK_MESSAGE(state.at("0.exp_avg_sq").to_vector() == torch.at(step + ".exp_avg_sq"), step);
      }
      // The parameters see torch's square root, MKL's (not correctly rounded): an update of
      // size ~lr off by a few ulps of itself, so p within 2 ulps or 4e-9.
      const std::vector<float> got = p.to_vector(), want = torch.at(step + ".param");
      p_was_torchs = got == want;
      for (std::size_t j = 0; j < got.size(); ++j) {
        CHECK_MESSAGE((ulps(got[j], want[j]) <= 2 || std::fabs(got[j] - want[j]) <= 4e-9f), step, " element ", j, ": ",
                      got[j], " vs torch ", want[j]);
        exact += got[j] == want[j];
        ++total;
      }
    }
  }
  CHECK(exact >= total * 9 / 10);  // mostly bit-identical: the square root's ulp rarely reaches p
  MESSAGE(exact, " of ", total, " parameter values bit-identical to torch's");
}

TEST_CASE("SGD: torch.optim's float32 steps bit for bit (plain, momentum with dampening, Nesterov; weight decay)") {
  const auto torch = read_torch_steps("sgd_steps.txt");
  const std::vector<float>& init = torch.at("init");
  REQUIRE(init.size() == 37);  // two 16-lane vectors and a scalar tail
  const std::map<std::string, nn::SGDOptions> cases = {
      {"plain", {.lr = 0.1}},
      {"momentum", {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}},
      {"nesterov", {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}}};
  for (const auto& [name, options] : cases) {
    Tensor p = Tensor({37}, init).set_requires_grad(true);
    nn::SGD opt({p}, options);
    for (int k = 0; k < 3; ++k) {
      const std::string step = name + std::to_string(k);
      p.zero_grad();
      qnum::sum(qnum::mul(p, Tensor({37}, torch.at("grad" + std::to_string(k))))).backward();  // grad exactly g
      opt.step();
      CHECK_MESSAGE(p.to_vector() == torch.at(step + ".param"), step);
      if (options.momentum != 0.0)
        CHECK_MESSAGE(opt.state_dict().at("0.momentum_buffer").to_vector() == torch.at(step + ".momentum_buffer"),
                      step);
    }
  }
}

TEST_CASE("optimizers: state_dict round trip reproduces the next step bit for bit") {
  auto run = [](auto make) {
    Tensor a = to_tensor(kInit).set_requires_grad(true);
    auto opt_a = make(a);
    for (int k = 0; k < 2; ++k) set_grad(a, k), opt_a->step();
    const auto saved = opt_a->state_dict();
    // a new optimizer over a fresh copy of the parameter, resumed from the saved state
    Tensor b = a.clone().set_requires_grad(true);
    auto opt_b = make(b);
    opt_b->load_state_dict(saved);
    set_grad(a, 2), opt_a->step();
    set_grad(b, 2), opt_b->step();
    CHECK(a.to_vector() == b.to_vector());
    CHECK(opt_b->state_dict().at("0.step").item() == 3.0f);
    // without the state the step differs (the test can see a lost state)
    Tensor c = to_tensor(kInit).set_requires_grad(true);
    auto opt_c = make(c);
    for (int k = 0; k < 2; ++k) set_grad(c, k), opt_c->step();
    auto opt_fresh = make(c);
    set_grad(c, 2), opt_fresh->step();
    CHECK(c.to_vector() != a.to_vector());
  };
  run([](Tensor p) {
    return std::make_unique<nn::SGD>(std::vector<Tensor>{p}, nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  });
  run([](Tensor p) { return std::make_unique<nn::Adam>(std::vector<Tensor>{p}, nn::AdamOptions{.lr = 0.01}); });
  run([](Tensor p) { return std::make_unique<nn::AdamW>(std::vector<Tensor>{p}, nn::AdamWOptions{.lr = 0.01}); });
}

TEST_CASE("optimizers: bad arguments and bad states are errors that say why") {
  Tensor p = to_tensor(kInit).set_requires_grad(true);
  CHECK_THROWS_WITH_AS(nn::SGD({p, p}, {}), doctest::Contains("appears twice"), qnum::Error);
  CHECK_THROWS_WITH_AS(nn::SGD({Tensor()}, {}), doctest::Contains("undefined"), qnum::Error);
  CHECK_THROWS_WITH_AS(nn::SGD({p}, {.lr = -1.0}), doctest::Contains("SGD: learning rate -1"), qnum::Error);
  CHECK_THROWS_WITH_AS(nn::SGD({p}, {.nesterov = true}), doctest::Contains("nesterov needs momentum > 0"), qnum::Error);
  CHECK_THROWS_WITH_AS(nn::Adam({p}, {.beta2 = 1.0}), doctest::Contains("betas"), qnum::Error);
  CHECK_THROWS_WITH_AS(nn::AdamW({p}, {.weight_decay = -0.1}), doctest::Contains("weight_decay"), qnum::Error);

  nn::Adam opt({p}, {});
  opt.set_lr(0.5);
  CHECK(opt.lr() == 0.5);
  CHECK_THROWS_AS(opt.set_lr(std::nan("")), qnum::Error);
  set_grad(p, 0);
  opt.step();
  const auto good = opt.state_dict();
  CHECK(good.size() == 3);
  const std::vector<float> p_after = p.to_vector();

  auto bad = good;
  bad["1.step"] = Tensor::scalar(1.0f);
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("Adam.load_state_dict: unexpected key '1.step'"),
                       qnum::Error);
  bad = good;
  bad["0.exp_avg"] = Tensor::zeros({2});
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("'0.exp_avg' has shape [2], parameter 0 has [3]"),
                       qnum::Error);
  bad = good;
  bad["0.step"] = Tensor::scalar(1.5f);
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("'0.step' must be a one-element whole number"),
                       qnum::Error);
  bad = good;
  bad.erase("0.exp_avg_sq");
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("parameter 0 has 1 of its 2 buffers"), qnum::Error);
  bad = good;
  bad.erase("0.step");
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("unexpected key '0.exp_avg'"), qnum::Error);
  // none of the failed loads touched the state
  CHECK(opt.state_dict().at("0.exp_avg").to_vector() == good.at("0.exp_avg").to_vector());
  CHECK(p.to_vector() == p_after);
  // an empty state is a fresh start
  opt.load_state_dict({});
  CHECK(opt.state_dict().empty());
}

TEST_CASE("LR schedules: Hugging Face's formulas at chosen steps") {
  CHECK(nn::constant_schedule(0) == 1.0);
  CHECK(nn::constant_schedule(1000) == 1.0);
  CHECK(nn::constant_schedule(2, 4) == 0.5);
  CHECK(nn::constant_schedule(4, 4) == 1.0);

  // linear: warm-up 10, total 100
  CHECK(nn::linear_schedule_with_warmup(0, 10, 100) == 0.0);
  CHECK(nn::linear_schedule_with_warmup(5, 10, 100) == 0.5);
  CHECK(nn::linear_schedule_with_warmup(10, 10, 100) == 1.0);
  CHECK(nn::linear_schedule_with_warmup(55, 10, 100) == 0.5);
  CHECK(nn::linear_schedule_with_warmup(91, 10, 100) == doctest::Approx(0.1));
  CHECK(nn::linear_schedule_with_warmup(100, 10, 100) == 0.0);
  CHECK(nn::linear_schedule_with_warmup(150, 10, 100) == 0.0);
  CHECK(nn::linear_schedule_with_warmup(0, 0, 100) == 1.0);  // no warm-up starts at full rate

  // cosine: warm-up 10, total 110 (100 decay steps)
  CHECK(nn::cosine_schedule_with_warmup(5, 10, 110) == 0.5);
  CHECK(nn::cosine_schedule_with_warmup(10, 10, 110) == 1.0);
  CHECK(nn::cosine_schedule_with_warmup(35, 10, 110) == doctest::Approx(0.5 * (1 + std::cos(std::numbers::pi * 0.25))));
  CHECK(nn::cosine_schedule_with_warmup(60, 10, 110) == doctest::Approx(0.5));
  CHECK(nn::cosine_schedule_with_warmup(110, 10, 110) == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(nn::cosine_schedule_with_warmup(60, 10, 110, 1.0) == doctest::Approx(0.0).epsilon(1e-12));  // full cycle

  const nn::LRSchedule s{
      .kind = nn::parse_schedule_kind("linear"), .base_lr = 0.2, .warmup_steps = 10, .total_steps = 100};
  CHECK(s.lr(55) == doctest::Approx(0.1));
  CHECK(nn::LRSchedule{.base_lr = 0.3}.lr(7) == doctest::Approx(0.3));
  CHECK(nn::to_string(nn::parse_schedule_kind("cosine")) == "cosine");

  CHECK_THROWS_WITH_AS(nn::parse_schedule_kind("step"), doctest::Contains("known: constant, linear, cosine"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(nn::linear_schedule_with_warmup(5, 10, 0), doctest::Contains("total_steps 0 must be >= 1"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(nn::cosine_schedule_with_warmup(5, 20, 10), doctest::Contains(">= warmup_steps 20"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(nn::constant_schedule(-1), doctest::Contains("step -1 must be >= 0"), qnum::Error);
  CHECK_THROWS_AS(nn::constant_schedule(0, -3), qnum::Error);
  CHECK_THROWS_AS(nn::cosine_schedule_with_warmup(0, 0, 10, -1.0), qnum::Error);
  CHECK_THROWS_AS((nn::LRSchedule{.kind = nn::ScheduleKind::cosine, .base_lr = 0.1}.lr(0)), qnum::Error);
  CHECK_THROWS_AS((nn::LRSchedule{.base_lr = -0.1}.lr(0)), qnum::Error);
}
