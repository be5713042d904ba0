// qnum-cuda-bert-step: bert-tiny trained and run through the tensor layer on the GPU
// (Module::to(Device::cuda()), every op on DeviceBackend), checked against the CPU and timed.
//   1. agreement: the same model on the CPU and the GPU, eval logits on one batch (max
//      relative difference), then three training steps with dropout (losses side by side;
//      the dropout masks are the same on both);
//   2. timing: the training step of bench/bench_bert.cpp (forward + cross-entropy + backward
//      + grad-norm clipping 1.0 + AdamW, batch 32 × seq 128, random ids, no padding) and an
//      eval forward, median over --steps after --warmup, each synchronised.
// cuda/bench/torch_gpu.py times the same step in PyTorch eager fp32 on the same device.
//   qnum-cuda-bert-step [--json] [--steps 50] [--warmup 10] [--batch 32] [--seq 128]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/rng.hpp"
#include "qnum/cuda/backend.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/train/recipe.hpp"

namespace {

using qnum::Device;
using qnum::Tensor;
using qnum::models::BertForSequenceClassification;

struct Batch {
  std::vector<std::int64_t> ids, mask, labels;
};

Batch random_batch(std::int64_t b, std::int64_t t, std::uint64_t seed) {
  Batch x;
  const qnum::CounterRng rng(seed);
  for (std::int64_t i = 0; i < b * t; ++i)
    x.ids.push_back(1000 + static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(i)) * 29000.0f));
  x.mask.assign(static_cast<std::size_t>(b * t), 1);
  for (std::int64_t i = 0; i < b; ++i) x.labels.push_back(i % 2);
  return x;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]) / (1e-3 + std::abs(static_cast<double>(b[i]))));
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Step {
  BertForSequenceClassification& model;
  qnum::nn::AdamW& opt;
  std::vector<Tensor> params;
  float operator()(const qnum::models::BertInput& in, const std::vector<std::int64_t>& labels) {
    opt.zero_grad();
    const Tensor loss = qnum::cross_entropy(model.forward(in), labels);
    loss.backward();
    qnum::DeviceArray norm;  // the Trainer's device path: no read back mid-step
    if (params.front().is_cuda())
      qnum::train::clip_device_grad_norm(params, 1.0, norm);
    else
      qnum::train::clip_grad_norm(params, 1.0);
    opt.step();
    return loss.item();  // read after the step, as the Trainer does on a device
  }
};

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  int steps = 50, warmup = 10;
  std::int64_t B = 32, T = 128;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atol(argv[++i]) : 0L; };
    if (a == "--json") json = true;
    else if (a == "--steps") steps = static_cast<int>(next());
    else if (a == "--warmup") warmup = static_cast<int>(next());
    else if (a == "--batch") B = next();
    else if (a == "--seq") T = next();
    else {
      std::fprintf(stderr, "usage: qnum-cuda-bert-step [--json] [--steps N] [--warmup N] [--batch B] [--seq T]\n");
      return 2;
    }
  }
  try {
    if (!qnum::device_available(Device::cuda())) {
      std::fprintf(stderr, "qnum-cuda-bert-step: no CUDA device\n");
      return 77;
    }
    const auto config = qnum::models::bert_config("bert-tiny");
    const Batch batch = random_batch(B, T, 7);
    const qnum::models::BertInput in{B, T, batch.ids, batch.mask, {}};
    nlohmann::json out{{"device", qnum::device_backend(Device::cuda()).name()}, {"batch", B}, {"seq", T}};

    // 1. Agreement with the CPU.
    BertForSequenceClassification cpu(config, 0), gpu(config, 0);
    gpu.to(Device::cuda());
    {
      cpu.eval(), gpu.eval();
      qnum::autograd::NoGradGuard no_grad;
      out["eval_logits_max_rel_diff"] = max_rel_diff(gpu.forward(in).to_vector(), cpu.forward(in).to_vector());
    }
    cpu.train(), gpu.train();
    qnum::nn::AdamW oc(cpu.parameters(), {.lr = 1e-3}), og(gpu.parameters(), {.lr = 1e-3});
    Step sc{cpu, oc, cpu.parameters()}, sg{gpu, og, gpu.parameters()};
    std::vector<double> loss_cpu, loss_gpu;
    for (int s = 0; s < 3; ++s) {
      loss_cpu.push_back(sc(in, batch.labels));
      loss_gpu.push_back(sg(in, batch.labels));
    }
    out["train_losses_cpu"] = loss_cpu;
    out["train_losses_gpu"] = loss_gpu;
    {
      const auto wc = cpu.state_dict(), wg = gpu.state_dict();
      double m = 0;
      for (const auto& [name, t] : wc) m = std::max(m, max_rel_diff(wg.at(name).to_vector(), t.to_vector()));
      out["weights_after_3_steps_max_rel_diff"] = m;
    }

    // 2. Timing on the GPU.
    qnum::DeviceBackend& be = qnum::device_backend(Device::cuda());
    auto time_ms = [&](auto&& f) {
      be.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      f();
      be.synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<double> train_ms, infer_ms;
    for (int s = 0; s < warmup + steps; ++s) {
      const double ms = time_ms([&] { sg(in, batch.labels); });
      if (s >= warmup) train_ms.push_back(ms);
    }
    // Where a step's time goes: each phase synchronised on its own (so their sum exceeds the
    // step, whose phases overlap host and device work).
    {
      std::vector<double> fwd, bwd, clip, opt;
      for (int s = 0; s < std::max(steps / 2, 5); ++s) {
        og.zero_grad();
        Tensor loss;
        fwd.push_back(time_ms([&] { loss = qnum::cross_entropy(gpu.forward(in), batch.labels); }));
        bwd.push_back(time_ms([&] { loss.backward(); }));
        qnum::DeviceArray norm;
        clip.push_back(time_ms([&] { qnum::train::clip_device_grad_norm(sg.params, 1.0, norm); }));
        opt.push_back(time_ms([&] { og.step(); }));
      }
      out["phases_ms"] = {{"forward_and_loss", median(fwd)},
                          {"backward", median(bwd)},
                          {"clip", median(clip)},
                          {"adamw", median(opt)}};
    }
    gpu.eval();
    for (int s = 0; s < warmup + steps; ++s) {
      const double ms = time_ms([&] {
        qnum::autograd::NoGradGuard no_grad;
        (void)gpu.forward(in).to_vector();
      });
      if (s >= warmup) infer_ms.push_back(ms);
    }
    out["train_step_ms_median"] = median(train_ms);
    out["step_ms"] = median(train_ms);  // cuda/device_check.sh's QNUM_BERT_STEP_CMD reads this key
    out["inference_ms_median"] = median(infer_ms);
    out["steps"] = steps;
    const auto mem = be.memory_stats();
    out["peak_allocated_mb"] = static_cast<double>(mem.peak_allocated) / (1 << 20);
    if (json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%s\n", out.dump(2).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qnum-cuda-bert-step: %s\n", e.what());
    return 1;
  }
}
