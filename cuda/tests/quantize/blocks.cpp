// The block walk every block family shares (cuda/src/quantize/blocks.cuh): large tensors and
// the argument checks, against the CPU.
#include <doctest/doctest.h>

#include "blocks.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::blocks;

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
