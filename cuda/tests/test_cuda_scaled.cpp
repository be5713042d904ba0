// The scaled-integer and MX block kernels (qnum/cuda/scaled.hpp) against the CPU's tensor
// quantize overloads, bit for bit (any two NaNs count as equal), over ranks 1..3, both policy
// bundles and inputs with zeros, all-zero rows / blocks, NaN (several payloads), Inf,
// subnormals, huge magnitudes and normals at many scales.
#include <doctest/doctest.h>

#include <algorithm>
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
#include "qnum/cuda/scaled.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;

namespace {

/// n inputs in runs of 16 (so rows, tiles and blocks see every kind): normals at scales
/// 2^-40..2^40 (most runs), all zeros (+0 and -0), one NaN of several payloads, one +-Inf,
/// huge and tiny (subnormal) magnitudes, random float32 bit patterns, flushed subnormals only,
/// one outlier among normals.
std::vector<float> mixed_inputs(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const float nans[] = {from_bits(0x7FC00000u), from_bits(0xFFC00000u), from_bits(0x7FA12345u), from_bits(0xFFFFFFFFu)};
  std::vector<float> x(n);
  for (std::size_t start = 0; start < n; start += 16) {
    const std::size_t end = std::min(n, start + 16);
    const unsigned kind = rng() % 20;
    const int scale = static_cast<int>(rng() % 81) - 40;
    for (std::size_t i = start; i < end; ++i) {
      float v = std::ldexp(nd(rng), scale);
      if (kind == 0) v = (rng() % 2) ? 0.0f : -0.0f;
      if (kind == 1) v = std::ldexp(nd(rng), 100 + static_cast<int>(rng() % 28));     // near float max
      if (kind == 2) v = from_bits(static_cast<std::uint32_t>(rng()) & 0x807FFFFFu);  // subnormal or zero
      if (kind == 3) v = from_bits(static_cast<std::uint32_t>(rng()));
      if (kind == 4) v = std::ldexp(nd(rng), -140);
      x[i] = v;
    }
    if (kind == 5) x[start + rng() % (end - start)] = nans[rng() % 4];
    if (kind == 6) x[start + rng() % (end - start)] = (rng() % 2) ? qnum::detail::kInf : -qnum::detail::kInf;
    if (kind == 7) x[start + rng() % (end - start)] *= 1024.0f;  // an outlier: the clip search clips it
  }
  return x;
}

qnum::ScaleIntegerSpec si(int width, bool is_signed) {
  qnum::ScaleIntegerSpec s;
  s.width = width;
  s.is_signed = is_signed;
  return s;
}

std::string shape_text(const qnum::Shape& s) { return "shape [" + qnum::to_string(s) + "]"; }

/// GPU (out of place, then in place) against the CPU's tensor quantize on the same input.
template <class Spec>
void check_tensor(const Spec& s, const qnum::Policy& p, const std::vector<float>& in, const qnum::Shape& shape,
                  const std::string& what) {
  REQUIRE(static_cast<std::int64_t>(in.size()) == qnum::numel(shape));
  std::vector<float> cpu(in.size());
  qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape);
  const std::string label = what + " " + std::string(qnum::to_string(p.semantics)) + " " + shape_text(shape);
  DeviceBuffer<float> din(in), dout(in.size());
  qnum::cuda::quantize(s, p, din.get(), dout.get(), shape);
  require_same_bits(dout.download(), cpu, in, label);
  qnum::cuda::quantize(s, p, din.get(), din.get(), shape);
  require_same_bits(din.download(), cpu, in, label + " in place");
}

template <class Spec>
void check_shapes(const Spec& s, const qnum::Policy& p, const std::vector<qnum::Shape>& shapes, const std::string& what,
                  std::uint32_t seed) {
  for (const auto& shape : shapes)
    check_tensor(s, p, mixed_inputs(static_cast<std::size_t>(qnum::numel(shape)), seed++), shape, what);
}

std::string rounding_text(const qnum::Policy& p) { return std::string(qnum::to_string(p.rounding)); }

}  // namespace

TEST_CASE("cuda: scale_integer rows equal the CPU reference (exact roundings and mase_compat)") {
  using qnum::Rounding;
  const std::vector<qnum::Policy> policies = {qnum::exact, qnum::exact.with(Rounding::floor),
                                              qnum::exact.with(Rounding::nearest_away),
                                              qnum::exact.with(Rounding::stochastic).with_seed(7), qnum::mase_compat};
  // rank 0..3; a 9000-long row is split over three warps (atomicMax merge); one whole-tensor row
  const std::vector<qnum::Shape> shapes = {{}, {1}, {37}, {1000}, {7, 33}, {3, 5, 17}, {2, 9000}, {100003}};
  for (const auto& s : {si(8, true), si(4, true), si(8, false), si(2, true), si(16, true), si(24, false)})
    for (const auto& p : policies)
      check_shapes(
          s, p, shapes,
          "scale_integer W" + std::to_string(s.width) + (s.is_signed ? " signed " : " unsigned ") + rounding_text(p),
          static_cast<std::uint32_t>(s.width));
}

TEST_CASE("cuda: scale_integer special rows: all zero, NaN, Inf, one element, empty") {
  std::vector<float> in(6 * 8, 0.0f);
  for (std::size_t i = 0; i < 8; ++i) in[i] = (i % 2) ? -0.0f : 0.0f;       // row 0: signed zeros
  for (std::size_t i = 8; i < 48; ++i) in[i] = static_cast<float>(i) - 20;  // rows 1..5: ramps
  in[17] = qnum::detail::kNaN;                                              // row 2
  in[26] = -qnum::detail::kInf;                                             // row 3
  in[33] = 3e38f;                                                           // row 4: huge
  in[40] = 1e-45f;                                                          // row 5: tiny beside
  for (const auto& s : {si(8, true), si(8, false)})
    for (const auto& p : {qnum::exact, qnum::mase_compat}) {
      check_tensor(s, p, in, {6, 8}, "scale_integer special rows");
      check_tensor(s, p, in, {48, 1}, "scale_integer one-element rows");
      check_tensor(s, p, {}, {3, 0}, "scale_integer empty rows");
      check_tensor(s, p, {}, {0, 4}, "scale_integer no rows");
    }
}

TEST_CASE("cuda: MASE mxint blocks equal mase_mxint_quantize (and the exact bundle the OCP path)") {
  struct Case {
    qnum::MXIntSpec s;
    std::vector<qnum::Shape> shapes;
  };
  const std::vector<Case> cases = {
      {{8, 32, -1, 8}, {{64}, {4, 96}, {3, 4, 32}, {2048}}},
      {{4, 16, -1, 8}, {{6, 7, 16}, {160}}},
      {{8, 16, 1, 8}, {{6, 7, 16}, {4, 12}}},  // blocks along a middle axis, straddling fibers in MASE
      {{6, 32, 0, 5}, {{32, 3}, {64, 2, 3}}},  // 5-bit scale, blocks along the first axis
      {{8, 7, -1, 8}, {{5, 14}, {2, 3, 21}}},  // a block size that is no power of two
      {{3, 1, -1, 8}, {{9}, {2, 5}}},          // one element per block
      {{16, 128, -1, 8}, {{4, 256}}},          // four warp strides per block
  };
  std::uint32_t seed = 100;
  for (const auto& c : cases) {
    const std::string what = "mxint W" + std::to_string(c.s.width) + " B" + std::to_string(c.s.block_size) + " dim " +
                             std::to_string(c.s.block_dim) + " sbits " + std::to_string(c.s.scale_bits);
    check_shapes(c.s, qnum::mase_compat, c.shapes, what, seed);
    check_shapes(c.s, qnum::exact, c.shapes, what, seed);
    seed += 10;
  }
}

TEST_CASE("cuda: MASE mxfp blocks equal mase_mxfp_quantize for every element type (E1M2 included)") {
  const int em[][2] = {{4, 3}, {5, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 2}};
  std::uint32_t seed = 200;
  for (const auto& [E, M] : em)
    for (const int B : {32, 16, 8})
      for (const int dim : {-1, 0}) {
        qnum::MXFPSpec s;
        s.exponent_width = E;
        s.frac_width = M;
        s.block_size = B;
        s.block_dim = dim;
        const std::string what = "mase mxfp E" + std::to_string(E) + "M" + std::to_string(M) + " B" +
                                 std::to_string(B) + " dim " + std::to_string(dim);
        check_shapes(s, qnum::mase_compat, {{256}, {6, 32}, {4, 3, 16}, {2048}}, what, seed++);
      }
}

TEST_CASE("cuda: MASE mxfp blocks holding Inf or NaN payloads equal the CPU (x86 NaN division)") {
  // Inf / 2^128 and NaN inputs reach MASE's codec, which reads the NaN's mantissa bits.
  const float specials[] = {qnum::detail::kInf,     -qnum::detail::kInf,    from_bits(0x7FC00000u),
                            from_bits(0xFFC00000u), from_bits(0x7FA12345u), from_bits(0xFF800001u),
                            from_bits(0x7FFFFFFFu), from_bits(0x7FE00000u)};
  std::vector<float> in;
  for (const float sp : specials)
    for (int b = 0; b < 4; ++b) {  // each special among zeros, among normals, alone, twice
      for (int j = 0; j < 8; ++j) in.push_back(b == 0 ? 0.0f : (b == 1 ? 1.5f * static_cast<float>(j - 4) : sp));
      in[in.size() - 8 + static_cast<std::size_t>(b + 1)] = sp;
    }
  const int em[][2] = {{4, 3}, {5, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 2}};
  for (const auto& [E, M] : em) {
    qnum::MXFPSpec s;
    s.exponent_width = E;
    s.frac_width = M;
    s.block_size = 8;
    check_tensor(s, qnum::mase_compat, in, {static_cast<std::int64_t>(in.size())},
                 "mase mxfp specials E" + std::to_string(E) + "M" + std::to_string(M));
  }
  qnum::MXIntSpec si;
  si.block_size = 8;
  check_tensor(si, qnum::mase_compat, in, {static_cast<std::int64_t>(in.size())}, "mase mxint specials");
}

TEST_CASE("cuda: OCP MX tensors (exact bundle) along any block_dim equal mx_exact_quantize") {
  using qnum::Rounding;
  const std::vector<qnum::Policy> policies = {qnum::exact, qnum::exact.with(Rounding::floor),
                                              qnum::exact.with(Rounding::stochastic).with_seed(5)};
  // fibers whose length is no multiple of the block size: each fiber's last block is short
  const std::vector<qnum::Shape> shapes = {{}, {100}, {3, 45}, {2, 5, 37}, {33, 4}, {7, 9, 2}};
  std::uint32_t seed = 300;
  for (const int dim : {-1, 0, 1})
    for (const auto& p : policies) {
      std::vector<qnum::Shape> ok;  // block_dim 1 needs rank >= 2
      for (const auto& sh : shapes)
        if (dim < 1 || sh.size() >= 2) ok.push_back(sh);
      for (const auto& [E, M] : {std::pair{4, 3}, std::pair{5, 2}, std::pair{2, 1}, std::pair{3, 2}}) {
        qnum::MXFPSpec s;
        s.exponent_width = E;
        s.frac_width = M;
        s.block_size = 16;
        s.block_dim = dim;
        check_shapes(s, p, ok,
                     "ocp mxfp E" + std::to_string(E) + "M" + std::to_string(M) + " dim " + std::to_string(dim) + " " +
                         rounding_text(p),
                     seed++);
      }
      for (const auto& s : {qnum::MXIntSpec{8, 32, dim, 8}, qnum::MXIntSpec{4, 16, dim, 6}})
        check_shapes(s, p, ok,
                     "ocp mxint W" + std::to_string(s.width) + " dim " + std::to_string(dim) + " " + rounding_text(p),
                     seed++);
    }
}

TEST_CASE("cuda: MX clip search (quantile_search) equals the CPU under mase_compat and exact") {
  std::uint32_t seed = 500;
  const std::vector<qnum::Shape> mase_shapes = {{128}, {4, 96}, {6, 7, 16}, {2, 3, 32}};
  const std::vector<qnum::Shape> exact_shapes = {{100}, {3, 45}, {2, 5, 37}, {1}};
  for (const int dim : {-1, 0, 1})
    for (const auto& s : {qnum::MXIntSpec{8, 32, dim, 8, true}, qnum::MXIntSpec{4, 16, dim, 8, true},
                          qnum::MXIntSpec{6, 8, dim, 5, true}}) {
      const std::string what = "mxint search W" + std::to_string(s.width) + " B" + std::to_string(s.block_size) +
                               " dim " + std::to_string(dim);
      std::vector<qnum::Shape> ms, es;  // block_dim 1 needs rank >= 2; mase needs numel % B == 0
      for (const auto& sh : mase_shapes)
        if ((dim < 1 || sh.size() >= 2) && qnum::numel(sh) % s.block_size == 0) ms.push_back(sh);
      for (const auto& sh : exact_shapes)
        if (dim < 1 || sh.size() >= 2) es.push_back(sh);
      check_shapes(s, qnum::mase_compat, ms, what, seed++);
      check_shapes(s, qnum::exact, es, what, seed++);
      check_shapes(s, qnum::exact.with(qnum::Rounding::stochastic).with_seed(3), es, what + " stochastic", seed++);
    }
  const int em[][2] = {{4, 3}, {5, 2}, {2, 1}, {1, 2}};
  for (const auto& [E, M] : em)
    for (const int B : {32, 16}) {
      qnum::MXFPSpec s;
      s.exponent_width = E;
      s.frac_width = M;
      s.block_size = B;
      s.block_dim = E == 2 ? 0 : -1;
      s.quantile_search = true;
      const std::string what = "mxfp search E" + std::to_string(E) + "M" + std::to_string(M) + " B" + std::to_string(B);
      check_shapes(s, qnum::mase_compat, {{128}, {4, 96}, {2, 3, 32}}, what, seed++);
      if (E != 1) check_shapes(s, qnum::exact, {{100}, {3, 45}, {2, 5, 37}}, what, seed++);
    }
}

TEST_CASE("cuda: mxint_hardware tiles equal the CPU reference") {
  std::uint32_t seed = 400;
  const auto check = [&](int width, int ew, std::vector<int> parallelism, const std::vector<qnum::Shape>& shapes) {
    qnum::MXIntHardwareSpec s;
    s.width = width;
    s.exponent_width = ew;
    s.parallelism = std::move(parallelism);
    for (const auto& p : {qnum::mase_compat, qnum::exact})
      check_shapes(s, p, shapes, "mxint_hardware W" + std::to_string(width) + " ew" + std::to_string(ew), seed++);
  };
  check(8, 4, {1, 16}, {{64}, {4, 32}, {3, 8, 16}});
  check(4, 3, {2, 8}, {{4, 16}, {3, 6, 24}});
  check(12, 8, {16}, {{160}, {2, 5, 48}});
  check(8, 2, {4, 4}, {{8, 8}, {2, 4, 12}});
  check(24, 8, {8, 64}, {{16, 128}});  // 512-element tiles: sixteen lanes' strides
  check(2, 1, {1, 1}, {{5, 3}});
}

TEST_CASE("cuda: scaled formats' bad arguments are qnum::Error") {
  DeviceBuffer<float> d(64);
  float* p = d.get();
  using qnum::cuda::quantize;
  // invalid specs
  CHECK_THROWS_AS(quantize(si(1, true), qnum::exact, p, p, {64}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXIntSpec{17, 32}, qnum::exact, p, p, {64}), qnum::Error);
  qnum::MXFPSpec e3m3;
  e3m3.exponent_width = 3;
  e3m3.frac_width = 3;
  CHECK_THROWS_AS(quantize(e3m3, qnum::mase_compat, p, p, {64}), qnum::Error);
  qnum::MXFPSpec e1m2;
  e1m2.exponent_width = 1;
  e1m2.frac_width = 2;
  CHECK_THROWS_AS(quantize(e1m2, qnum::exact, p, p, {64}), qnum::Error);  // MASE-only element
  CHECK_NOTHROW(quantize(e1m2, qnum::mase_compat, p, p, {64}));
  CHECK_THROWS_AS(quantize(qnum::MXIntHardwareSpec{8, 4, {}}, qnum::mase_compat, p, p, {64}), qnum::Error);
  // shapes the CPU refuses
  CHECK_THROWS_AS(quantize(qnum::ScaleIntegerSpec{}, qnum::exact, p, p, {-1, 4}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXIntSpec{}, qnum::mase_compat, p, p, {60}), qnum::Error);      // 60 % 32
  CHECK_THROWS_AS(quantize(qnum::MXIntSpec{}, qnum::mase_compat, p, p, {}), qnum::Error);        // rank 0
  CHECK_THROWS_AS(quantize(qnum::MXIntSpec{8, 32, 2}, qnum::exact, p, p, {8, 8}), qnum::Error);  // block_dim
  CHECK_THROWS_AS(quantize(qnum::MXIntHardwareSpec{8, 4, {1, 16}}, qnum::mase_compat, p, p, {4, 12}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXIntHardwareSpec{}, qnum::mase_compat, p, p, {}), qnum::Error);
  // null device pointers with elements; none without
  CHECK_THROWS_AS(quantize(qnum::ScaleIntegerSpec{}, qnum::exact, nullptr, p, {64}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXFPSpec{}, qnum::mase_compat, p, nullptr, {64}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXIntHardwareSpec{}, qnum::mase_compat, nullptr, nullptr, {16}), qnum::Error);
  CHECK_THROWS_AS(quantize(qnum::MXIntSpec{}, qnum::exact, nullptr, nullptr, {16}), qnum::Error);
  CHECK_NOTHROW(quantize(qnum::ScaleIntegerSpec{}, qnum::exact, nullptr, nullptr, {0, 8}));
  CHECK_NOTHROW(quantize(qnum::MXIntSpec{}, qnum::exact, nullptr, nullptr, {0}));
  QNUM_CUDA_CHECK(cudaDeviceSynchronize());  // nothing above left a failed launch behind
}
