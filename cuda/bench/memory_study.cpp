// qnum-cuda-memory-study (issue 8 item 3, lab 4): a BERT-base-size model's Linear weights
// (12 layers x {Q, K, V, O 768x768, FFN 3072x768, 768x3072} + biases, and the pooler) held on
// the device as fp32, then as packed mase-cuda MXINT8 (G = 32), with the device memory in use
// read by cudaMemGetInfo after each step. The MXINT8 pass dequantizes each layer to a transient
// bf16 copy (as QLinearPacked.forward does), so the peak includes the largest such copy.
// Then both again with each format's layers in one allocation (an arena), which removes the
// per-allocation page rounding from the comparison.
// Usage: qnum-cuda-memory-study [--json] [--layers N] [--hidden H] [--ffn F]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../tests/device_buffer.hpp"
#include "qnum/cuda/kernels.hpp"

using qnum::cuda::DeviceBuffer;

namespace {

double used_mb() {
  std::size_t free = 0, total = 0;
  QNUM_CUDA_CHECK(cudaDeviceSynchronize());
  QNUM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<double>(total - free) / (1 << 20);
}

struct Linear {
  std::size_t out, in;
};

}  // namespace

int main(int argc, char** argv) try {
  bool json = false;
  int layers = 12;
  std::size_t hidden = 768, ffn = 3072;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json")
      json = true;
    else if (a == "--layers" && i + 1 < argc)
      layers = std::atoi(argv[++i]);
    else if (a == "--hidden" && i + 1 < argc)
      hidden = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ffn" && i + 1 < argc)
      ffn = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: qnum-cuda-memory-study [--json] [--layers N] [--hidden H] [--ffn F]\n");
      return 2;
    }
  }
  if (qnum::cuda::device_count() == 0) {
    std::fprintf(stderr, "qnum-cuda-memory-study: no CUDA device (cudaGetDeviceCount found none)\n");
    return 1;
  }
  if (hidden % 32 || ffn % 32 || layers < 1) {
    std::fprintf(stderr, "qnum-cuda-memory-study: hidden and ffn must be multiples of 32 (G), layers >= 1\n");
    return 2;
  }
  std::vector<Linear> lin;
  for (int l = 0; l < layers; ++l)
    for (const Linear& x : {Linear{hidden, hidden}, Linear{hidden, hidden}, Linear{hidden, hidden},
                            Linear{hidden, hidden}, Linear{ffn, hidden}, Linear{hidden, ffn}})
      lin.push_back(x);
  lin.push_back({hidden, hidden});  // pooler
  std::size_t params = 0, largest = 0;
  for (const auto& x : lin) params += x.out * x.in + x.out, largest = std::max(largest, x.out * x.in + x.out);

  QNUM_CUDA_CHECK(cudaFree(nullptr));  // create the context before the baseline reading
  const double base = used_mb();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  auto host_weights = [&](const Linear& x) {
    std::vector<float> w(x.out * x.in + x.out);  // weight then bias (bias length divisible by G)
    for (auto& v : w) v = nd(rng);
    return w;
  };

  double fp32_mb = 0, mx_mb = 0, mx_peak_mb = 0;
  {  // fp32: every Linear resident
    std::vector<std::unique_ptr<DeviceBuffer<float>>> w;
    for (const auto& x : lin) w.push_back(std::make_unique<DeviceBuffer<float>>(host_weights(x)));
    fp32_mb = used_mb() - base;
  }
  {  // packed MXINT8: quantized on the device from a transient fp32 upload, fp32 freed
    std::vector<std::unique_ptr<DeviceBuffer<std::int8_t>>> m;
    std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> s;
    for (const auto& x : lin) {
      const auto h = host_weights(x);
      DeviceBuffer<float> tmp(h);
      m.push_back(std::make_unique<DeviceBuffer<std::int8_t>>(h.size()));
      s.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(h.size() / 32));
      qnum::cuda::mxint8_mase_cuda_quantize(tmp.get(), h.size(), 32, m.back()->get(), s.back()->get());
      QNUM_CUDA_CHECK(cudaDeviceSynchronize());
    }
    mx_mb = used_mb() - base;
    mx_peak_mb = mx_mb;
    for (std::size_t i = 0; i < lin.size(); ++i) {  // a forward's dequantize-on-the-fly
      DeviceBuffer<std::uint16_t> bf(m[i]->size());
      qnum::cuda::mxint8_mase_cuda_dequantize_bf16(m[i]->get(), s[i]->get(), m[i]->size(), 32, bf.get());
      mx_peak_mb = std::max(mx_peak_mb, used_mb() - base);
    }
  }
  // The same weights in one allocation each way (an arena: sub-buffers at 256-byte offsets).
  // The driver maps large allocations in 2 MiB pages, so per-layer cudaMallocs round every
  // layer up; one arena rounds once.
  const auto round256 = [](std::size_t b) { return (b + 255) / 256 * 256; };
  double fp32_arena_mb = 0, mx_arena_mb = 0;
  {
    std::size_t bytes = 0;
    for (const auto& x : lin) bytes += round256((x.out * x.in + x.out) * sizeof(float));
    DeviceBuffer<std::uint8_t> arena(bytes);
    std::size_t off = 0;
    for (const auto& x : lin) {
      const auto h = host_weights(x);
      QNUM_CUDA_CHECK(cudaMemcpy(arena.get() + off, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
      off += round256(h.size() * sizeof(float));
    }
    fp32_arena_mb = used_mb() - base;
  }
  {
    std::size_t bytes = 0, largest_fp32 = 0;
    for (const auto& x : lin) {
      const std::size_t nv = x.out * x.in + x.out;
      bytes += round256(nv) + round256(nv / 32);
      largest_fp32 = std::max(largest_fp32, nv);
    }
    DeviceBuffer<std::uint8_t> arena(bytes);
    {
      DeviceBuffer<float> tmp(largest_fp32);  // one staging buffer for the fp32 upload, freed after
      std::size_t off = 0;
      for (const auto& x : lin) {
        const auto h = host_weights(x);
        QNUM_CUDA_CHECK(cudaMemcpy(tmp.get(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
        auto* mant = reinterpret_cast<std::int8_t*>(arena.get() + off);
        off += round256(h.size());
        qnum::cuda::mxint8_mase_cuda_quantize(tmp.get(), h.size(), 32, mant, arena.get() + off);
        off += round256(h.size() / 32);
        QNUM_CUDA_CHECK(cudaDeviceSynchronize());
      }
    }
    mx_arena_mb = used_mb() - base;
  }
  const double theory = (32.0 - 8.25) / 32.0;
  const double ideal_fp32 = params * 4.0 / (1 << 20), ideal_mx = params * 8.25 / 8 / (1 << 20);
  if (json) {
    std::printf(
        "{\"params\": %zu, \"largest_linear\": %zu, \"fp32_mb\": %.1f, \"mxint8_mb\": %.1f, "
        "\"mxint8_peak_mb\": %.1f, \"ideal_fp32_mb\": %.1f, \"ideal_mxint8_mb\": %.1f, "
        "\"saving_resident\": %.4f, \"saving_peak\": %.4f, \"saving_theory\": %.4f, "
        "\"fp32_arena_mb\": %.1f, \"mxint8_arena_mb\": %.1f, \"saving_arena\": %.4f}\n",
        params, largest, fp32_mb, mx_mb, mx_peak_mb, ideal_fp32, ideal_mx, 1 - mx_mb / fp32_mb,
        1 - mx_peak_mb / fp32_mb, theory, fp32_arena_mb, mx_arena_mb, 1 - mx_arena_mb / fp32_arena_mb);
  } else {
    std::printf("Linear parameters: %zu (largest layer %zu)\n", params, largest);
    std::printf("fp32 resident:      %8.1f MB (ideal %.1f)\n", fp32_mb, ideal_fp32);
    std::printf("MXINT8 resident:    %8.1f MB (ideal %.1f)\n", mx_mb, ideal_mx);
    std::printf("MXINT8 peak:        %8.1f MB (with one transient bf16 layer)\n", mx_peak_mb);
    std::printf("one arena each:     fp32 %.1f MB, MXINT8 %.1f MB: saving %.1f%%\n", fp32_arena_mb, mx_arena_mb,
                100 * (1 - mx_arena_mb / fp32_arena_mb));
    std::printf("saving: resident %.1f%%, peak %.1f%%, theory %.1f%%\n", 100 * (1 - mx_mb / fp32_mb),
                100 * (1 - mx_peak_mb / fp32_mb), 100 * theory);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "qnum-cuda-memory-study: %s\n", e.what());
  return 1;
}
