// qnum-cuda-bench: achieved GB/s of the dequantize and fake-quantize kernels against the
// device's peak memory bandwidth, and MXINT8 GEMM TFLOP/s against cuBLAS bf16 GEMM of the same
// shape, measured in the same run. Usage: qnum-cuda-bench [--json] [--mb N] [--gemm N] [--reps N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../tests/device_buffer.hpp"
#include "qnum/cuda/kernels.hpp"
#include "qnum/cuda/quantize.hpp"
#include "qnum/format/mx_packed.hpp"

using qnum::cuda::DeviceBuffer;

namespace {

/// Median milliseconds of `reps` timed runs of f (after one warm-up), by CUDA events.
double time_ms(const std::function<void()>& f, int reps) {
  f();
  QNUM_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  QNUM_CUDA_CHECK(cudaEventCreate(&a));
  QNUM_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    QNUM_CUDA_CHECK(cudaEventRecord(a));
    f();
    QNUM_CUDA_CHECK(cudaEventRecord(b));
    QNUM_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    QNUM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  std::string name;
  double ms, value, ref;
  std::string unit;
};

}  // namespace

int main(int argc, char** argv) try {
  bool json = false;
  std::size_t mb = 256;
  int gemm = 4096, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json")
      json = true;
    else if (a == "--mb" && i + 1 < argc)
      mb = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--gemm" && i + 1 < argc)
      gemm = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: qnum-cuda-bench [--json] [--mb N] [--gemm N] [--reps N]\n");
      return 2;
    }
  }
  if (qnum::cuda::device_count() == 0) {
    std::fprintf(stderr, "qnum-cuda-bench: no CUDA device (cudaGetDeviceCount found none); nothing to measure\n");
    return 1;
  }
  int dev = 0, clock_khz = 0, bus_bits = 0;
  QNUM_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  QNUM_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  QNUM_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev));
  QNUM_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  const double peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // DDR: two transfers per clock

  std::vector<Row> rows;
  {  // the measured ceiling: a device-to-device copy of `mb` MB (bytes read + written)
    const std::size_t bytes = mb * (1u << 20);
    DeviceBuffer<std::uint8_t> src(bytes), dst(bytes);
    QNUM_CUDA_CHECK(cudaMemset(src.get(), 0x5a, bytes));
    const double ms =
        time_ms([&] { QNUM_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice)); }, reps);
    rows.push_back({"memcpy device-to-device", ms, 2.0 * bytes / ms / 1e6, peak_gbs, "GB/s"});
  }
  // Dequantize: `mb` MB of bf16 output from int8 mantissas + one scale per 32.
  const std::size_t n = mb * (1u << 20) / 2;
  {
    std::vector<std::int8_t> m(n);
    std::vector<std::uint8_t> s(n / 32);
    std::mt19937 rng(1);
    for (auto& v : m) v = static_cast<std::int8_t>(rng() % 255 - 127);
    for (auto& v : s) v = static_cast<std::uint8_t>(100 + rng() % 50);
    DeviceBuffer<std::int8_t> dm(m);
    DeviceBuffer<std::uint8_t> ds(s);
    DeviceBuffer<std::uint16_t> out(n);
    const double ms =
        time_ms([&] { qnum::cuda::mxint8_mase_cuda_dequantize_bf16(dm.get(), ds.get(), n, 32, out.get()); }, reps);
    const double bytes = static_cast<double>(n) * 3 + static_cast<double>(n) / 32;
    rows.push_back({"mxint8_dequantize_bf16 G=32", ms, bytes / ms / 1e6, peak_gbs, "GB/s"});
  }
  {  // fake-quantize float32 -> OCP FP8 E4M3 values, `mb` MB in and out
    const std::size_t nf = mb * (1u << 20) / 4;
    std::vector<float> x(nf);
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    DeviceBuffer<float> in(x), out(nf);
    const auto spec = qnum::MinifloatSpec::fp8_e4m3();
    const double ms = time_ms([&] { qnum::cuda::quantize(spec, qnum::exact, in.get(), out.get(), nf); }, reps);
    rows.push_back({"fake_quantize fp8_e4m3 (exact)", ms, 8.0 * nf / ms / 1e6, peak_gbs, "GB/s"});
    const double ms2 = time_ms(
        [&] {
          qnum::cuda::quantize(qnum::FixedSpec{8, 4, true}, qnum::exact, in.get(), out.get(), nf);
        },
        reps);
    rows.push_back({"fake_quantize integer 8/4 (exact)", ms2, 8.0 * nf / ms2 / 1e6, peak_gbs, "GB/s"});
    const auto row = [&](const std::string& name, const auto& spec, const qnum::Policy& p) {
      const double t = time_ms([&] { qnum::cuda::quantize(spec, p, in.get(), out.get(), nf); }, reps);
      rows.push_back({"fake_quantize " + name, t, 8.0 * nf / t / 1e6, peak_gbs, "GB/s"});
    };
    const auto ref_row = [&](const std::string& name, const auto& spec) {
      const double t =
          time_ms([&] { qnum::cuda::quantize_reference(spec, qnum::exact, in.get(), out.get(), nf); }, reps);
      rows.push_back({"fake_quantize " + name + " (exact, reference kernel)", t, 8.0 * nf / t / 1e6, peak_gbs, "GB/s"});
    };
    ref_row("fp8_e4m3", spec);
    ref_row("integer 8/4", qnum::FixedSpec{8, 4, true});
    row("integer 8/4 (mase)", qnum::FixedSpec{8, 4, true}, qnum::mase_compat);
    row("minifloat E4M3 no specials (mase)", qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
        qnum::mase_compat);
    row("log W8 (exact)", qnum::LogSpec{8, std::nullopt}, qnum::exact);
    row("log W8 (mase)", qnum::LogSpec{8, std::nullopt}, qnum::mase_compat);
    {
      const double t = time_ms(
          [&] {
            qnum::cuda::quantize_reference(qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
                                           qnum::mase_compat, in.get(), out.get(), nf);
          },
          reps);
      rows.push_back(
          {"fake_quantize minifloat E4M3 (mase, reference kernel)", t, 8.0 * nf / t / 1e6, peak_gbs, "GB/s"});
      const double t2 = time_ms(
          [&] {
            qnum::cuda::quantize_reference(qnum::LogSpec{8, std::nullopt}, qnum::mase_compat, in.get(), out.get(), nf);
          },
          reps);
      rows.push_back({"fake_quantize log W8 (mase, reference kernel)", t2, 8.0 * nf / t2 / 1e6, peak_gbs, "GB/s"});
    }
    row("integer 8/4 stochastic", qnum::FixedSpec{8, 4, true}, qnum::exact.with(qnum::Rounding::stochastic));
  }
  {  // the other families on a [rows, 4096] weight-like tensor of `mb` MB (untuned kernels; block tiles 1 x 16)
    const std::int64_t cols = 4096, rows_n = static_cast<std::int64_t>(mb * (1u << 20) / 4 / cols);
    const std::size_t nf = static_cast<std::size_t>(rows_n * cols);
    const qnum::Shape shape{rows_n, cols};
    std::vector<float> x(nf);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    DeviceBuffer<float> in(x), out(nf);
    const auto row = [&](const std::string& name, const std::function<void()>& f) {
      const double t = time_ms(f, reps);
      rows.push_back({name, t, 8.0 * nf / t / 1e6, peak_gbs, "GB/s"});
    };
    for (const auto& [p, tag] : {std::pair{qnum::exact, " (exact)"}, std::pair{qnum::mase_compat, " (mase)"}}) {
      row(std::string("block_fp W8 E8 block 16") + tag, [&, p = p] {
        qnum::cuda::quantize(qnum::BlockFPSpec{8, 8, std::nullopt, {1, 16}}, p, in.get(), out.get(), nf, shape);
      });
      row(std::string("block_minifloat W8 E4 bw8 block 16") + tag, [&, p = p] {
        qnum::cuda::quantize(qnum::BlockMinifloatSpec{8, 4, 8, {1, 16}}, p, in.get(), out.get(), nf, shape);
      });
      row(std::string("block_log W8 bw8 block 16") + tag, [&, p = p] {
        qnum::cuda::quantize(qnum::BlockLogSpec{8, 8, {1, 16}}, p, in.get(), out.get(), nf, shape);
      });
      row(std::string("mxint8 block 32") + tag, [&, p = p] {
        qnum::cuda::quantize(qnum::MXIntSpec{8, 32, -1, 8, false}, p, in.get(), out.get(), shape);
      });
      row(std::string("scale_integer 8") + tag, [&, p = p] {
        qnum::cuda::quantize(qnum::ScaleIntegerSpec{8, true, std::nullopt}, p, in.get(), out.get(), shape);
      });
    }
    row("binary bipolar (exact)",
        [&] { qnum::cuda::quantize(qnum::BinarySpec{}, qnum::exact, in.get(), out.get(), shape); });
    row("ternary per channel (exact)",
        [&] { qnum::cuda::quantize(qnum::TernarySpec{}, qnum::exact, in.get(), out.get(), shape); });
  }
  {  // GEMM M = N = K = gemm: MXINT8 dequantize-on-load vs cuBLAS bf16 (W already bf16)
    const int M = gemm, N = gemm, K = gemm;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<std::uint16_t> a(static_cast<std::size_t>(M) * K);
    for (auto& v : a) v = qnum::detail::mx_float_to_bf16_bits(nd(rng));
    std::vector<float> w(static_cast<std::size_t>(N) * K);
    for (auto& v : w) v = nd(rng) * 0.05f;
    const auto q = qnum::quantize_mxint8_mase_cuda(w, 32);
    DeviceBuffer<std::uint16_t> da(a), dw(qnum::dequantize_mxint8_mase_cuda_bf16(q));
    DeviceBuffer<std::int8_t> dm(q.mantissa);
    DeviceBuffer<std::uint8_t> ds(q.scale);
    DeviceBuffer<float> c(static_cast<std::size_t>(M) * N);
    const double flop = 2.0 * M * N * K;
    const double t_cublas = time_ms([&] { qnum::cuda::cublas_bf16_gemm(da.get(), dw.get(), c.get(), M, N, K); }, reps);
    const double t_mx = time_ms([&] { qnum::cuda::mxint8_gemm(da.get(), dm.get(), ds.get(), c.get(), M, N, K); }, reps);
    DeviceBuffer<std::uint16_t> workspace(static_cast<std::size_t>(N) * K);
    const double t_dq = time_ms(
        [&] {
          qnum::cuda::mxint8_gemm_dequantize_cublas(da.get(), dm.get(), ds.get(), workspace.get(), c.get(), M, N, K);
        },
        reps);
    const double tf_cublas = flop / t_cublas / 1e9, tf_mx = flop / t_mx / 1e9, tf_dq = flop / t_dq / 1e9;
    const std::string shape = " " + std::to_string(gemm) + "^3";
    rows.push_back({"gemm cublas bf16" + shape, t_cublas, tf_cublas, tf_cublas, "TFLOP/s"});
    rows.push_back({"gemm mxint8 wmma dequantize-on-load" + shape, t_mx, tf_mx, tf_cublas, "TFLOP/s"});
    rows.push_back({"gemm mxint8 dequantize + cublas bf16" + shape, t_dq, tf_dq, tf_cublas, "TFLOP/s"});
    // int8 x int8 -> int32 on the integer tensor cores (TOPS against bf16's TFLOP/s)
    std::vector<std::int8_t> ai(static_cast<std::size_t>(M) * K), wi(static_cast<std::size_t>(N) * K);
    for (auto& v : ai) v = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
    for (auto& v : wi) v = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
    DeviceBuffer<std::int8_t> dai(ai), dwi(wi);
    DeviceBuffer<std::int32_t> ci(static_cast<std::size_t>(M) * N);
    const double t_i8 = time_ms([&] { qnum::cuda::int8_gemm(dai.get(), dwi.get(), ci.get(), M, N, K); }, reps);
    rows.push_back({"gemm int8 cublas (TOPS)" + shape, t_i8, flop / t_i8 / 1e9, tf_cublas, "TFLOP/s"});
  }
  // fused attention forward, BERT-base-like heads (batch 8, 12 heads, seq 512): head dim 64
  // takes the tiled kernel, 128 the warp-per-row one; TFLOP/s counts QK^T and PV (4 S^2 D).
  for (const std::int64_t D : {64, 128}) {
    const std::int64_t B = 8, H = 12, S = 512;
    std::vector<float> x(static_cast<std::size_t>(B * H * S * D));
    std::mt19937 rng(4);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    DeviceBuffer<float> q(x), k(x), v(x), o(x.size());
    const double ms =
        time_ms([&] { qnum::cuda::attention_fused(q.get(), k.get(), v.get(), nullptr, o.get(), B, H, S, S, D); }, reps);
    const double tflops = 4.0 * B * H * S * S * D / ms / 1e9;
    rows.push_back({"attention fused fp32 b8 h12 s512 d" + std::to_string(D) + (D <= 64 ? " (tiled)" : " (warp/row)"),
                    ms, tflops, tflops, "TFLOP/s"});
  }

  if (json) {
    std::printf("{\"device\": \"%s\", \"peak_bandwidth_gbs\": %.1f, \"results\": [", prop.name, peak_gbs);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::printf(
          "%s{\"name\": \"%s\", \"ms\": %.4f, \"value\": %.2f, \"unit\": \"%s\", \"reference\": %.2f, "
          "\"fraction\": %.3f}",
          i ? ", " : "", rows[i].name.c_str(), rows[i].ms, rows[i].value, rows[i].unit.c_str(), rows[i].ref,
          rows[i].value / rows[i].ref);
    std::printf("]}\n");
  } else {
    std::printf("device: %s, peak memory bandwidth %.1f GB/s\n", prop.name, peak_gbs);
    for (const auto& r : rows)
      std::printf("%-36s %9.4f ms %10.2f %-8s (%.1f%% of %.2f)\n", r.name.c_str(), r.ms, r.value, r.unit.c_str(),
                  100.0 * r.value / r.ref, r.ref);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "qnum-cuda-bench: %s\n", e.what());
  return 1;
}
