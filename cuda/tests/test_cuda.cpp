// Every CUDA kernel against the CPU reference, bit for bit (the GEMMs, whose fp32 sums run in
// another order, against a double-precision reference within a stated bound).
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
#include "qnum/kernel/attention.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;

namespace {

/// Inputs that reach every branch: all 2^16 bfloat16 bit patterns (every sign, exponent,
/// NaN, Inf, subnormal), random float32 bit patterns, and normals at scales 2^-20 .. 2^20.
std::vector<float> test_inputs(std::uint32_t seed, std::size_t random_count = 1 << 16) {
  std::vector<float> x;
  for (std::uint32_t b = 0; b < 65536; ++b) x.push_back(from_bits(b << 16));
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < random_count; ++i) x.push_back(from_bits(static_cast<std::uint32_t>(rng())));
  std::normal_distribution<float> nd;
  for (std::size_t i = 0; i < random_count; ++i) x.push_back(std::ldexp(nd(rng), static_cast<int>(i % 41) - 20));
  return x;
}

template <class Spec>
void check_elementwise(const Spec& s, const qnum::Policy& p, const std::string& what) {
  const auto in = test_inputs(17);
  DeviceBuffer<float> din(in), dout(in.size());
  std::vector<float> cpu(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) cpu[i] = qnum::quantize(s, p, in[i], 1000 + i);
  // The whole (aligned) buffer: 4 per thread; 16-byte aligned with a 1-3 element tail; and
  // misaligned (every element on the one-per-thread path). Element i keeps stochastic index 1000 + i.
  for (const auto& [offset, cut] : {std::pair<std::size_t, std::size_t>{0, 0}, {4, 7}, {1, 2}}) {
    const std::size_t n = in.size() - cut;
    const std::vector<float> poison(in.size(), -12345.0f);
    dout.upload(poison);
    qnum::cuda::quantize(s, p, din.get() + offset, dout.get() + offset, n - offset, 1000 + offset);
    auto got = dout.download();
    for (std::size_t i = 0; i < offset; ++i) REQUIRE(got[i] == -12345.0f);  // nothing written outside
    for (std::size_t i = n; i < in.size(); ++i) REQUIRE(got[i] == -12345.0f);
    require_same_bits({got.begin() + offset, got.begin() + n}, {cpu.begin() + offset, cpu.begin() + n},
                      {in.begin() + offset, in.begin() + n}, what + " offset " + std::to_string(offset));
  }
}

std::vector<qnum::Policy> policies() {
  auto p = exact_roundings();
  p.push_back(qnum::mase_compat);
  return p;
}

}  // namespace

TEST_CASE("cuda: device count is positive here (the suite skipped otherwise)") {
  CHECK(qnum::cuda::device_count() > 0);
}

TEST_CASE("cuda: fixed point quantize equals the CPU reference") {
  for (const qnum::FixedSpec s : {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{4, 0, false},
                                  qnum::FixedSpec{16, 10, true}, qnum::FixedSpec{32, 8, true}})
    for (const auto& p : policies()) {
      check_elementwise(s, p, "integer " + std::to_string(s.width) + "/" + std::to_string(s.frac_width));
      if (!p.is_mase()) check_elementwise(s, p.with(qnum::Overflow::wrap), "integer wrap");
    }
}

TEST_CASE("cuda: minifloat_ieee (OCP FP8 included) quantize equals the CPU reference") {
  const qnum::MinifloatSpec specs[] = {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
                                       qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
                                       qnum::MinifloatSpec{4, 2, std::nullopt, qnum::Specials::none},
                                       qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee}};
  for (const auto& s : specs)
    for (const auto& p : policies()) {
      if (p.is_mase() && s.specials != qnum::Specials::none) continue;  // MASE's grid has no specials
      check_elementwise(s, p, "minifloat E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width));
      if (s.specials == qnum::Specials::ieee && !p.is_mase())
        check_elementwise(s, p.with(qnum::Overflow::infinity), "minifloat overflow=infinity");
    }
}

/// The float32-bit fast paths (fixed point and minifloat_ieee under `exact`) against the
/// reference kernel on every one of the 2^32 float32 inputs, compared on the device.
template <class Spec>
void check_fast_path_exhaustively(const Spec& s, const std::string& what, const qnum::Policy& p = qnum::exact) {
  constexpr std::size_t chunk = std::size_t{1} << 28;
  DeviceBuffer<float> in(chunk), fast(chunk), ref(chunk);
  unsigned long long bad = 0;
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += chunk) {
    qnum::cuda::testing::fill_float_bits(in.get(), chunk, static_cast<std::uint32_t>(start));
    qnum::cuda::quantize(s, p, in.get(), fast.get(), chunk);
    qnum::cuda::quantize_reference(s, p, in.get(), ref.get(), chunk);
    const auto m = qnum::cuda::testing::bit_mismatches(fast.get(), ref.get(), chunk);
    if (m.count && !bad) {
      const auto x = static_cast<std::uint32_t>(start + m.first);
      const float xf = from_bits(x);
      FAIL_CHECK(what << ": input 0x" << std::hex << x << std::dec << " (" << xf << "): reference "
                      << qnum::quantize(s, p, xf) << " (CPU)");
    }
    bad += m.count;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of 2^32 inputs differ");
}

TEST_CASE("cuda: fast exact paths equal the reference on every float32 input") {
  for (const qnum::FixedSpec s :
       {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{4, 0, false}, qnum::FixedSpec{16, 10, true},
        qnum::FixedSpec{24, 12, true}, qnum::FixedSpec{8, -3, true}, qnum::FixedSpec{24, 0, false},
        qnum::FixedSpec{1, 0, true}, qnum::FixedSpec{12, 60, true}, qnum::FixedSpec{8, -64, true}})
    check_fast_path_exhaustively(s, "integer " + std::to_string(s.width) + "/" + std::to_string(s.frac_width) +
                                        (s.is_signed ? "" : " unsigned"));
  for (const auto& s :
       {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
        qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{4, 2, std::nullopt, qnum::Specials::none},
        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{16, 8, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{6, 3, std::nullopt, qnum::Specials::fn},
        qnum::MinifloatSpec{8, 4, -2, qnum::Specials::none}, qnum::MinifloatSpec{8, 5, 30, qnum::Specials::ieee}})
    check_fast_path_exhaustively(s, "minifloat E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width) +
                                        " bias " + std::to_string(s.bias()));
}

TEST_CASE("cuda: MASE minifloat and log with log2 looked up equal the reference on every float32 input") {
  // The lookup tables come from the CPU's log2 (glibc); the reference kernel evaluates CUDA's
  // log2. Equal on all 2^32 inputs also shows the two log2s agree wherever it matters.
  for (const auto& s : {qnum::MinifloatSpec{8, 4, std::nullopt, qnum::Specials::none},
                        qnum::MinifloatSpec{8, 3, std::nullopt, qnum::Specials::none},
                        qnum::MinifloatSpec{6, 2, 5, qnum::Specials::none},
                        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::none}})
    check_fast_path_exhaustively(
        s, "minifloat mase E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width), qnum::mase_compat);
  for (const qnum::LogSpec s : {qnum::LogSpec{8, std::nullopt}, qnum::LogSpec{4, std::nullopt}, qnum::LogSpec{6, 3}})
    check_fast_path_exhaustively(s, "log mase W" + std::to_string(s.width), qnum::mase_compat);
}

TEST_CASE("cuda: minifloat_denorm quantize equals the CPU reference") {
  for (const qnum::MinifloatDenormSpec s :
       {qnum::MinifloatDenormSpec{8, 4, std::nullopt}, qnum::MinifloatDenormSpec{6, 3, 2},
        qnum::MinifloatDenormSpec{16, 5, std::nullopt}})
    for (const auto& p : policies())
      check_elementwise(s, p, "minifloat_denorm E" + std::to_string(s.exponent_width) + " W" + std::to_string(s.width));
}

TEST_CASE("cuda: log quantize equals the CPU reference") {
  for (const qnum::LogSpec s : {qnum::LogSpec{8, std::nullopt}, qnum::LogSpec{4, std::nullopt}, qnum::LogSpec{6, 3}})
    for (const auto& p : policies()) check_elementwise(s, p, "log W" + std::to_string(s.width));
}

TEST_CASE("cuda: MX element quantize equals the CPU reference") {
  for (const auto e : {qnum::MXElement::integer(8), qnum::MXElement::fp(4, 3), qnum::MXElement::fp(5, 2),
                       qnum::MXElement::fp(2, 1), qnum::MXElement::fp(3, 2)})
    for (const auto& p : policies())
      if (!p.is_mase()) check_elementwise(e, p, "mx element " + e.name());
}

TEST_CASE("cuda: every code of <= 16-bit formats decodes as on the CPU") {
  for (const auto& s :
       {qnum::MinifloatSpec::fp8_e4m3(), qnum::MinifloatSpec::fp8_e5m2(),
        qnum::MinifloatSpec{16, 5, std::nullopt, qnum::Specials::ieee},
        qnum::MinifloatSpec{16, 8, 128,
                            qnum::Specials::none}}) {  // bias 128: 8 exponent bits without specials stay in float32
    const std::uint32_t n = 1u << s.width;
    DeviceBuffer<float> d(n);
    qnum::cuda::decode_codes(s, d.get(), n);
    std::vector<float> cpu(n), codes(n);
    for (std::uint32_t c = 0; c < n; ++c) cpu[c] = qnum::decode(s, c), codes[c] = static_cast<float>(c);
    require_same_bits(d.download(), cpu, codes, "minifloat decode W" + std::to_string(s.width));
  }
  for (const qnum::MinifloatDenormSpec s :
       {qnum::MinifloatDenormSpec{8, 4, std::nullopt}, qnum::MinifloatDenormSpec{16, 5, std::nullopt}}) {
    const std::uint32_t n = 1u << s.width;
    DeviceBuffer<float> d(n);
    qnum::cuda::decode_codes(s, d.get(), n);
    std::vector<float> cpu(n), codes(n);
    for (std::uint32_t c = 0; c < n; ++c) cpu[c] = qnum::decode(s, c), codes[c] = static_cast<float>(c);
    require_same_bits(d.download(), cpu, codes, "minifloat_denorm decode W" + std::to_string(s.width));
  }
  for (const qnum::FixedSpec s : {qnum::FixedSpec{8, 4, true}, qnum::FixedSpec{16, 3, false}}) {
    const std::uint32_t n = 1u << s.width;
    DeviceBuffer<float> d(n);
    qnum::cuda::decode_codes(s, d.get(), n);
    std::vector<float> cpu(n), codes(n);
    for (std::uint32_t c = 0; c < n; ++c) cpu[c] = qnum::decode(s, c), codes[c] = static_cast<float>(c);
    require_same_bits(d.download(), cpu, codes, "fixed decode W" + std::to_string(s.width));
  }
}

TEST_CASE("cuda: OCP MX blocks (MXINT8, MXFP8, MXFP4) equal detail::mx_exact_block") {
  auto in = test_inputs(5, 1 << 14);
  in.resize(in.size() - 7);  // a short last block
  std::mt19937 rng(3);
  for (auto& v : in)  // keep most blocks finite so scales vary; the bf16 sweep still has NaN/Inf blocks
    if (!std::isfinite(v) && rng() % 8 != 0) v = 1.5f;
  for (const auto e :
       {qnum::MXElement::integer(8), qnum::MXElement::fp(4, 3), qnum::MXElement::fp(5, 2), qnum::MXElement::fp(2, 1)})
    for (const auto& p : {qnum::exact, qnum::exact.with(qnum::Rounding::stochastic).with_seed(9)})
      for (const int bs : {32, 16}) {
        const std::size_t n = in.size(), nb = (n + bs - 1) / bs;
        DeviceBuffer<float> din(in), dv(n);
        DeviceBuffer<std::uint8_t> ds(nb);
        DeviceBuffer<std::uint16_t> dc(n);
        qnum::cuda::mx_quantize_blocks(e, p, din.get(), n, bs, dv.get(), ds.get(), dc.get());
        std::vector<float> cv(n);
        std::vector<std::uint8_t> cs(nb);
        std::vector<std::uint16_t> cc(n);
        for (std::size_t b = 0; b < nb; ++b) {
          const std::size_t start = b * bs, len = std::min<std::size_t>(bs, n - start);
          std::vector<std::int64_t> idx(len);
          for (std::size_t i = 0; i < len; ++i) idx[i] = static_cast<std::int64_t>(start + i);
          cs[b] = qnum::detail::mx_exact_block(e, 8, false, p, std::span<const float>(in.data() + start, len), idx,
                                               cv.data() + start, cc.data() + start);
        }
        const std::string what = "mx block " + e.name() + " bs " + std::to_string(bs);
        require_same_bits(dv.download(), cv, in, what + " values");
        CHECK_MESSAGE(ds.download() == cs, what << " scales");
        CHECK_MESSAGE(dc.download() == cc, what << " codes");
      }
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
