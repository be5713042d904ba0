// The CUDA kernels outside the format families (tests/quantize/<family>.cpp): mase-cuda's
// packed MXINT8 against the CPU bit for bit, the GEMMs (fp32 sums in another order) against a
// double-precision reference within a stated bound, fused attention, argument checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compare.hpp"
#include "device_buffer.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/cuda/quantize/fixed.hpp"
#include "qnum/cuda/quantize/mx_block.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/attention.hpp"
#include "quantize/elementwise.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using qnum::cuda::test::elementwise::test_inputs;

TEST_CASE("cuda: device count is positive here (the suite skipped otherwise)") {
  CHECK(qnum::cuda::device_count() > 0);
}

TEST_CASE("cuda: mase-cuda MXINT8 quantize and dequantize equal the CPU reference for G in 8..512") {
  for (const int G : {8, 16, 32, 64, 128, 256, 512, 3}) {
    auto in = test_inputs(11, 1 << 13);
    in.resize(in.size() / G * G);
    for (std::size_t i = 0; i < static_cast<std::size_t>(G); ++i) in[i] = 0.0f;  // an all-zero group
    const auto cpu = qnum::quantize_mxint8_mase_cuda(in, G);
    DeviceBuffer<float> din(in);
    DeviceBuffer<std::int8_t> dm(in.size());
    DeviceBuffer<std::uint8_t> ds(in.size() / G);
    qnum::cuda::mxint8_mase_cuda_quantize(din.get(), in.size(), G, dm.get(), ds.get());
    CHECK_MESSAGE(dm.download() == cpu.mantissa, "G " << G << " mantissas");
    CHECK_MESSAGE(ds.download() == cpu.scale, "G " << G << " scales");
    DeviceBuffer<std::uint16_t> dout(in.size());
    qnum::cuda::mxint8_mase_cuda_dequantize_bf16(dm.get(), ds.get(), in.size(), G, dout.get());
    CHECK_MESSAGE(dout.download() == qnum::dequantize_mxint8_mase_cuda_bf16(cpu), "G " << G << " bf16");
  }
}

TEST_CASE("cuda: mase-cuda dequantize of every (mantissa, scale) pair, both kernel paths") {
  std::vector<std::int8_t> m;
  std::vector<std::uint8_t> s;
  for (int S = 0; S < 256; ++S) {
    s.push_back(static_cast<std::uint8_t>(S));
    for (int k = -128; k < 128; ++k) m.push_back(static_cast<std::int8_t>(k));
  }
  std::vector<std::uint16_t> cpu(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) cpu[i] = qnum::dequantize_mxint8_to_bf16_bits(m[i], s[i / 256]);
  DeviceBuffer<std::int8_t> dm(m);
  DeviceBuffer<std::uint8_t> ds(s);
  DeviceBuffer<std::uint16_t> dout(m.size() + 1);
  qnum::cuda::mxint8_mase_cuda_dequantize_bf16(dm.get(), ds.get(), m.size(), 256, dout.get());  // vectorised
  auto got = dout.download();
  got.pop_back();
  CHECK(got == cpu);
  qnum::cuda::mxint8_mase_cuda_dequantize_bf16(dm.get(), ds.get(), m.size(), 256, dout.get() + 1);  // misaligned
  got = dout.download();
  got.erase(got.begin());
  CHECK(got == cpu);
  // Groups of 8 (one scale per 8, all 256 mantissas under each scale): the 8-wide path.
  std::vector<std::uint8_t> s8(m.size() / 8);
  for (std::size_t g = 0; g < s8.size(); ++g) s8[g] = static_cast<std::uint8_t>(g / 32);
  DeviceBuffer<std::uint8_t> ds8(s8);
  qnum::cuda::mxint8_mase_cuda_dequantize_bf16(dm.get(), ds8.get(), m.size(), 8, dout.get());
  got = dout.download();
  got.pop_back();
  CHECK(got == cpu);
}

TEST_CASE("cuda: bad arguments are qnum::Error") {
  DeviceBuffer<float> d(64);
  DeviceBuffer<std::int8_t> m(64);
  DeviceBuffer<std::uint8_t> s(2);
  CHECK_THROWS_AS(qnum::cuda::mxint8_mase_cuda_quantize(d.get(), 60, 32, m.get(), s.get()), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::mxint8_mase_cuda_quantize(d.get(), 64, 0, m.get(), s.get()), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::mx_quantize_blocks(qnum::MXElement::integer(8), qnum::exact, d.get(), 64, 0, nullptr,
                                                 nullptr, nullptr),
                  qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::mxint8_gemm(nullptr, nullptr, nullptr, nullptr, 64, 64, 40), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(qnum::FixedSpec{0, 0, true}, qnum::exact, d.get(), d.get(), 64), qnum::Error);
  void* p = nullptr;  // an impossible allocation: the check names the call and the code
  const auto err = [&] {
    try {
      QNUM_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 62));
    } catch (const qnum::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(err.find("cudaMalloc") != std::string::npos);
  CHECK(err.find("cudaErrorMemoryAllocation") != std::string::npos);
}

TEST_CASE("cuda: MXINT8 GEMM and the cuBLAS bf16 GEMM match a double reference") {
  const int M = 128, N = 192, K = 256;
  std::mt19937 rng(23);
  std::normal_distribution<float> nd;
  std::vector<float> a(static_cast<std::size_t>(M) * K), w(static_cast<std::size_t>(N) * K);
  for (auto& v : a) v = nd(rng);
  for (auto& v : w) v = nd(rng) * 0.05f;
  std::vector<std::uint16_t> abf(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) abf[i] = qnum::detail::mx_float_to_bf16_bits(a[i]);
  const auto q = qnum::quantize_mxint8_mase_cuda(w, 32);
  const auto wbf = qnum::dequantize_mxint8_mase_cuda_bf16(q);
  DeviceBuffer<std::uint16_t> da(abf), dwbf(wbf);
  DeviceBuffer<std::int8_t> dm(q.mantissa);
  DeviceBuffer<std::uint8_t> ds(q.scale);
  DeviceBuffer<float> c1(static_cast<std::size_t>(M) * N), c2(static_cast<std::size_t>(M) * N);
  DeviceBuffer<float> c3(static_cast<std::size_t>(M) * N);
  DeviceBuffer<std::uint16_t> workspace(wbf.size());
  qnum::cuda::mxint8_gemm(da.get(), dm.get(), ds.get(), c1.get(), M, N, K);
  qnum::cuda::cublas_bf16_gemm(da.get(), dwbf.get(), c2.get(), M, N, K);
  qnum::cuda::mxint8_gemm_dequantize_cublas(da.get(), dm.get(), ds.get(), workspace.get(), c3.get(), M, N, K);
  const auto g1 = c1.download(), g2 = c2.download(), g3 = c3.download();
  CHECK(workspace.download() == wbf);  // the dequantize step wrote the CPU's bf16 bits
  int bad1 = 0, bad2 = 0, bad3 = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(qnum::detail::mx_bf16_bits_to_float(abf[i * K + k])) *
                         qnum::detail::mx_bf16_bits_to_float(wbf[j * K + k]);
        ref += p, mag += std::fabs(p);
      }
      const double tol = mag * K * 0x1p-24 + 1e-30;  // fp32 accumulation in any order
      bad1 += std::fabs(g1[i * N + j] - ref) > tol;
      bad2 += std::fabs(g2[i * N + j] - ref) > tol;
      bad3 += std::fabs(g3[i * N + j] - ref) > tol;
    }
  CHECK(bad1 == 0);
  CHECK(bad2 == 0);
  CHECK(bad3 == 0);
  CHECK_THROWS_AS(
      qnum::cuda::mxint8_gemm_dequantize_cublas(da.get(), dm.get(), ds.get(), workspace.get(), c3.get(), M, N, 40),
      qnum::Error);
}

TEST_CASE("cuda: int8 GEMM is exact against an integer reference") {
  for (const auto [M, N, K] :
       {std::array{64, 96, 128}, std::array{37, 52, 68}, std::array{1, 4, 4}, std::array{130, 256, 1024}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    std::mt19937 rng(static_cast<std::uint32_t>(M * 7 + N + K));
    std::vector<std::int8_t> a(static_cast<std::size_t>(M) * K), w(static_cast<std::size_t>(N) * K);
    for (auto& v : a) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
    for (auto& v : w) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
    a[0] = w[0] = -128;  // the extreme product
    DeviceBuffer<std::int8_t> da(a), dw(w);
    DeviceBuffer<std::int32_t> dc(static_cast<std::size_t>(M) * N);
    qnum::cuda::int8_gemm(da.get(), dw.get(), dc.get(), M, N, K);
    const auto c = dc.download();
    int bad = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        std::int64_t ref = 0;
        for (int k = 0; k < K; ++k)
          ref += std::int64_t{a[static_cast<std::size_t>(i) * K + k]} * w[static_cast<std::size_t>(j) * K + k];
        bad += c[static_cast<std::size_t>(i) * N + j] != ref;
      }
    CHECK(bad == 0);
  }
  CHECK_THROWS_AS(qnum::cuda::int8_gemm(nullptr, nullptr, nullptr, 8, 8, 6), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::int8_gemm(nullptr, nullptr, nullptr, 8, 6, 8), qnum::Error);
}

TEST_CASE("cuda: fused attention forward matches qnum::attention_naive") {
  // head_dim <= 64 takes the tiled kernel (partial query and key tiles; several key tiles at
  // SK = 200), 96 and 128 the warp-per-row kernel.
  for (const auto [d, SQ, SK] : {std::array<std::int64_t, 3>{64, 37, 53},
                                 {40, 37, 53},
                                 {64, 130, 200},
                                 {8, 65, 64},
                                 {96, 37, 53},
                                 {128, 20, 70}}) {
    CAPTURE(d);
    CAPTURE(SQ);
    CAPTURE(SK);
    const std::int64_t B = 2, H = 3;
    std::mt19937 rng(static_cast<std::uint32_t>(d + SQ));
    std::normal_distribution<float> nd;
    std::vector<float> q(B * H * SQ * d), k(B * H * SK * d), v(B * H * SK * d), mask(B * SK, 0.0f);
    for (auto* t : {&q, &k, &v})
      for (auto& x : *t) x = nd(rng);
    for (std::int64_t j = 0; j < SK; j += 3) mask[j] = -INFINITY;  // batch 0: every third key masked
    for (std::int64_t j = 0; j < SK; ++j) mask[SK + j] = j % 2 ? -1.5f : 0.0f;
    const qnum::AttentionShape s{B, H, SQ, SK, d};
    std::vector<float> cpu(q.size());
    qnum::attention_naive(q.data(), k.data(), v.data(), mask.data(), cpu.data(), s);
    DeviceBuffer<float> dq(q), dk(k), dv(v), dm(mask), dout(q.size());
    qnum::cuda::attention_fused(dq.get(), dk.get(), dv.get(), dm.get(), dout.get(), B, H, SQ, SK, d);
    const auto gpu = dout.download();
    float worst = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) worst = std::max(worst, std::fabs(gpu[i] - cpu[i]));
    CHECK_MESSAGE(worst < 1e-4f, "head_dim " << d << ": max |gpu - cpu| = " << worst);
    // No mask at all.
    qnum::attention_naive(q.data(), k.data(), v.data(), nullptr, cpu.data(), s);
    qnum::cuda::attention_fused(dq.get(), dk.get(), dv.get(), nullptr, dout.get(), B, H, SQ, SK, d);
    const auto gpu_nomask = dout.download();
    worst = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) worst = std::max(worst, std::fabs(gpu_nomask[i] - cpu[i]));
    CHECK_MESSAGE(worst < 1e-4f, "head_dim " << d << ", no mask: max |gpu - cpu| = " << worst);
    // Fully masked: zeros, as on the CPU.
    std::vector<float> all_masked(B * SK, -INFINITY);
    dm.upload(all_masked);
    qnum::cuda::attention_fused(dq.get(), dk.get(), dv.get(), dm.get(), dout.get(), B, H, SQ, SK, d);
    for (float x : dout.download()) REQUIRE(x == 0.0f);
  }
  CHECK_THROWS_AS(qnum::cuda::attention_fused(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 1, 1, 300),
                  qnum::Error);
}
