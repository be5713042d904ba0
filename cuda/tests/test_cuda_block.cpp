// The block families on the device (qnum/cuda/block.hpp) against the CPU's tensor quantize,
// bit for bit (any two NaNs count as equal): block_fp, block_minifloat and block_log, both
// bundles (exact under several roundings, mase_compat), exact layouts of rank 0..5 and MASE's
// bias / weight / activation layouts, partial tiles, zero / NaN / Inf blocks, huge and tiny
// magnitudes, normals at many scales; out-of-place and in place.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compare.hpp"
#include "device_buffer.hpp"
#include "qnum/cuda/block.hpp"

using qnum::Policy;
using qnum::Role;
using qnum::Rounding;
using qnum::Shape;
using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;

namespace {

/// Inputs shaped like tensors (runs of 16 share a magnitude, 2^-30..2^30) with every hard
/// case mixed in: +-0 and runs of zeros (whole zero blocks), magnitudes over all of float32
/// (subnormals, 2^127, FLT_MAX), carry candidates (2 - 2^-k) * 2^e, MASE's |x| <= 1e-8
/// threshold, random float32 bits; with `specials`, rare NaN and +-Inf.
std::vector<float> block_inputs(std::size_t n, std::uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pick(0, 999), run_scale(-30, 30), any_scale(-149, 127), small(1, 24);
  const float fmax = std::numeric_limits<float>::max(), inf = std::numeric_limits<float>::infinity();
  const float edge[] = {fmax,  -fmax,  0x1p127f,      -0x1p127f, 1e38f, 0x1p-149f, -0x1p-149f, 0x1p-126f,
                        1e-8f, -1e-8f, 1.0000001e-8f, 9.99e-9f,  1e-9f, -1e-9f,    1.0f,       -1.0f};
  std::vector<float> x(n);
  int scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) scale = run_scale(rng);
    const int r = pick(rng);
    float v = std::ldexp(nd(rng), scale);
    if (r < 80)
      v = (r % 2 ? -0.0f : 0.0f);
    else if (r < 120)
      v = std::ldexp(nd(rng), any_scale(rng));
    else if (r < 150)
      v = (r % 2 ? -1.0f : 1.0f) * std::ldexp(2.0f - std::ldexp(1.0f, -small(rng)), scale);
    else if (r < 170)
      v = edge[static_cast<std::size_t>(rng() % std::size(edge))];
    else if (r < 190) {
      v = from_bits(static_cast<std::uint32_t>(rng()));
      if (!std::isfinite(v)) v = 1.5f;
    } else if (specials && r < 193)
      v = r == 190 ? std::numeric_limits<float>::quiet_NaN() : (r == 191 ? inf : -inf);
    x[i] = v;
  }
  if (n >= 160)  // a run of zeros covering whole blocks of most layouts
    for (std::size_t i = n / 3; i < n / 3 + 96; ++i) x[i] = (i % 5 ? 0.0f : -0.0f);
  return x;
}

std::string describe(const Shape& shape, Role role, const Policy& p) {
  std::string s = qnum::to_string(shape) + " role " + std::string(qnum::to_string(role)) + " " +
                  std::string(qnum::to_string(p.semantics)) + "/" + std::string(qnum::to_string(p.rounding));
  if (p.subnormals == qnum::Subnormals::flush) s += "/flush";
  return s;
}

/// GPU (out of place into a poisoned buffer, then in place) against the CPU's tensor quantize.
template <class Spec>
void check_blocks(const Spec& s, const Policy& p, const Shape& shape, Role role, const std::vector<float>& in,
                  const std::string& what) {
  std::vector<float> cpu(in.size());
  qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape, role);
  const std::string where = what + " " + describe(shape, role, p);
  DeviceBuffer<float> din(in), dout(std::vector<float>(in.size(), -12345.0f));
  qnum::cuda::quantize(s, p, din.get(), dout.get(), in.size(), shape, role);
  require_same_bits(dout.download(), cpu, in, where);
  qnum::cuda::quantize(s, p, din.get(), din.get(), in.size(), shape, role);
  require_same_bits(din.download(), cpu, in, where + " in place");
}

std::vector<Policy> exact_policies() {
  Policy flush = qnum::exact;
  flush.subnormals = qnum::Subnormals::flush;
  auto p = exact_roundings();
  p.push_back(flush);
  return p;
}

/// Exact layouts: rank 0..5, partial last tiles, size-1 and leading untiled dims, empty.
std::vector<Shape> exact_shapes() {
  return {{}, {1}, {1000}, {37, 50}, {3, 17, 29}, {1, 64, 1}, {2, 3, 5, 7}, {2, 2, 3, 4, 5}, {0, 16}, {5, 0}};
}

/// MASE layouts (shape, role): 1-D bias, 2-D weight (F.fold), 2-D activation (rows), 3-D
/// activation (F.fold).
std::vector<std::pair<Shape, Role>> mase_layouts() {
  return {{{100}, Role::bias},
          {{1000}, Role::weight},
          {{37, 50}, Role::weight},
          {{64, 64}, Role::weight},
          {{13, 50}, Role::activation},
          {{3, 17, 29}, Role::activation},
          {{4, 1, 40}, Role::activation},
          {{0, 16}, Role::weight}};
}

/// Every exact layout and policy, and every MASE layout, on clean and special inputs; MASE
/// also on an all-zero tensor and on zero blocks beside a NaN block (the zero-block rule).
template <class Spec>
void check_family(const Spec& s, const std::string& what) {
  std::uint32_t seed = 1;
  for (const auto& shape : exact_shapes())
    for (const bool specials : {false, true}) {
      const auto in = block_inputs(static_cast<std::size_t>(qnum::numel(shape)), seed++, specials);
      for (const auto& p : exact_policies())
        check_blocks(s, p, shape, Role::weight, in, what + (specials ? " specials" : ""));
    }
  for (const auto& [shape, role] : mase_layouts()) {
    const auto n = static_cast<std::size_t>(qnum::numel(shape));
    for (const bool specials : {false, true})
      check_blocks(s, qnum::mase_compat, shape, role, block_inputs(n, seed++, specials),
                   what + (specials ? " specials" : ""));
    check_blocks(s, qnum::mase_compat, shape, role, std::vector<float>(n, 0.0f), what + " all zero");
    auto nan_and_zeros = block_inputs(n, seed++, false);
    for (std::size_t i = 0; i < n / 2; ++i) nan_and_zeros[i] = 0.0f;
    if (n) nan_and_zeros[n - 1] = std::numeric_limits<float>::quiet_NaN();
    check_blocks(s, qnum::mase_compat, shape, role, nan_and_zeros, what + " zero blocks and a NaN block");
  }
}

}  // namespace

TEST_CASE("cuda: block_fp equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockFPSpec;
  for (const auto& s : {BlockFPSpec{8, 8, std::nullopt, {16}}, BlockFPSpec{4, 5, std::nullopt, {4, 4}},
                        BlockFPSpec{6, 4, std::nullopt, {2, 3, 5}}, BlockFPSpec{24, 8, 100, {-1}},
                        BlockFPSpec{3, 8, 140, {8}}, BlockFPSpec{2, 1, std::nullopt, {1, 7}}})
    check_family(s, "block_fp W" + std::to_string(s.width) + " E" + std::to_string(s.exponent_width) + " bias " +
                        std::to_string(s.bias()));
}

TEST_CASE("cuda: block_minifloat equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockMinifloatSpec;
  for (const auto& s :
       {BlockMinifloatSpec{8, 4, 8, {16}}, BlockMinifloatSpec{6, 2, 4, {4, 4}}, BlockMinifloatSpec{5, 3, 3, {3, -1}},
        BlockMinifloatSpec{16, 6, 8, {32}}, BlockMinifloatSpec{3, 1, 2, {2, 3, 5}}, BlockMinifloatSpec{2, 1, 1, {7}}})
    check_family(s, "block_minifloat W" + std::to_string(s.width) + " E" + std::to_string(s.exponent_width) + " bw " +
                        std::to_string(s.exponent_bias_width));
}

TEST_CASE("cuda: block_log equals the CPU's tensor quantize (exact roundings, mase_compat, all layouts)") {
  using qnum::BlockLogSpec;
  for (const auto& s : {BlockLogSpec{8, 8, {16}}, BlockLogSpec{4, 4, {4, 4}}, BlockLogSpec{9, 8, {-1}},
                        BlockLogSpec{2, 1, {3, 5}}, BlockLogSpec{6, 3, {2, 3, 5}}})
    check_family(s, "block_log W" + std::to_string(s.width) + " bw " + std::to_string(s.exponent_bias_width));
}

TEST_CASE("cuda: block families on large tensors (grid-stride over warps, long tiles, a stream)") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  // 2^22 elements in blocks of 4: 2^20 blocks, more warps than one grid launches.
  const Shape many{1024, 4096};
  const auto x = block_inputs(static_cast<std::size_t>(qnum::numel(many)), 99, true);
  // One block of 150,000 elements: each lane loops over thousands.
  const Shape one{300, 500};
  const auto y = block_inputs(static_cast<std::size_t>(qnum::numel(one)), 100, false);
  auto run = [&](const auto& s, const Policy& p, const Shape& shape, Role role, const std::vector<float>& in,
                 const std::string& what) {
    std::vector<float> cpu(in.size());
    qnum::quantize(s, p, std::span<const float>(in), std::span<float>(cpu), shape, role);
    DeviceBuffer<float> din(in), dout(in.size());
    qnum::cuda::quantize(s, p, din.get(), dout.get(), in.size(), shape, role, stream);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    require_same_bits(dout.download(), cpu, in, what + " " + describe(shape, role, p));
  };
  for (const auto& p : {qnum::exact, qnum::exact.with(Rounding::stochastic).with_seed(7), qnum::mase_compat}) {
    run(qnum::BlockFPSpec{8, 8, std::nullopt, {1, 4}}, p, many, Role::weight, x, "block_fp many blocks");
    run(qnum::BlockMinifloatSpec{8, 4, 8, {4}}, p, many, Role::weight, x, "block_minifloat many blocks");
    run(qnum::BlockLogSpec{8, 8, {2, 2}}, p, many, Role::weight, x, "block_log many blocks");
    run(qnum::BlockFPSpec{8, 8, std::nullopt, {-1, -1}}, p, one, Role::weight, y, "block_fp one block");
    run(qnum::BlockMinifloatSpec{8, 4, 8, {-1, -1}}, p, one, Role::weight, y, "block_minifloat one block");
    run(qnum::BlockLogSpec{8, 8, {-1, -1}}, p, one, Role::weight, y, "block_log one block");
  }
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("cuda: block families' bad arguments are qnum::Error") {
  DeviceBuffer<float> d(64);
  const qnum::BlockFPSpec fp{8, 8, std::nullopt, {16}};
  const qnum::BlockMinifloatSpec mf{8, 4, 8, {16}};
  const qnum::BlockLogSpec lg{8, 8, {16}};
  // n != numel(shape), negative dimension
  CHECK_THROWS_AS(qnum::cuda::quantize(fp, qnum::exact, d.get(), d.get(), 64, {8, 7}), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(mf, qnum::exact, d.get(), d.get(), 63, {64}), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(lg, qnum::exact, d.get(), d.get(), 64, {-8, -8}), qnum::Error);
  // invalid specs
  CHECK_THROWS_AS(
      qnum::cuda::quantize(qnum::BlockFPSpec{1, 8, std::nullopt, {16}}, qnum::exact, d.get(), d.get(), 64, {64}),
      qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(qnum::BlockMinifloatSpec{8, 4, 8, {0}}, qnum::exact, d.get(), d.get(), 64, {64}),
                  qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(qnum::BlockLogSpec{10, 8, {16}}, qnum::exact, d.get(), d.get(), 64, {64}),
                  qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(qnum::BlockLogSpec{8, 8, {1, 2, 3, 4}}, qnum::exact, d.get(), d.get(), 64, {64}),
                  qnum::Error);
  // layouts MASE rejects: 3-D weight, 1-D activation, 4-D
  CHECK_THROWS_AS(qnum::cuda::quantize(fp, qnum::mase_compat, d.get(), d.get(), 64, {4, 4, 4}, Role::weight),
                  qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(mf, qnum::mase_compat, d.get(), d.get(), 64, {64}, Role::activation),
                  qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(lg, qnum::mase_compat, d.get(), d.get(), 64, {2, 2, 4, 4}, Role::activation),
                  qnum::Error);
  // null pointers with n > 0; none needed for n == 0
  CHECK_THROWS_AS(qnum::cuda::quantize(fp, qnum::exact, nullptr, d.get(), 64, {64}), qnum::Error);
  CHECK_THROWS_AS(qnum::cuda::quantize(lg, qnum::mase_compat, d.get(), nullptr, 64, {64}, Role::bias), qnum::Error);
  CHECK_NOTHROW(qnum::cuda::quantize(mf, qnum::mase_compat, nullptr, nullptr, 0, {0, 16}));
  // the CPU raises the same errors
  std::vector<float> x(64), y(64);
  CHECK_THROWS_AS(
      qnum::quantize(fp, qnum::mase_compat, std::span<const float>(x), std::span<float>(y), {4, 4, 4}, Role::weight),
      qnum::Error);
  try {
    qnum::cuda::quantize(fp, qnum::exact, d.get(), d.get(), 63, {64});
    FAIL("no throw");
  } catch (const qnum::Error& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find("block_fp") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("63") != std::string::npos, msg);
  }
}
