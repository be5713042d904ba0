// The NVFP4 kernel (qnum/cuda/quantize/nvfp4.hpp) against the CPU's quantize(NVFP4Spec, ...), bit for
// bit (any two NaNs count as equal), over ranks 0..3, short last blocks, in place, and inputs
// with zeros, NaN, Inf, subnormals and magnitudes across the float range.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../compare.hpp"
#include "../device_buffer.hpp"
#include "qnum/cuda/quantize/nvfp4.hpp"
#include "qnum/format/format.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;

TEST_CASE("cuda nvfp4: bit-identical to the CPU reference") {
  std::mt19937 rng(20261127);
  std::normal_distribution<float> nd;
  const std::vector<qnum::Shape> shapes{{}, {1}, {17}, {3, 16}, {5, 40}, {2, 3, 33}, {64, 256}};
  for (const auto& shape : shapes)
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> x(static_cast<std::size_t>(qnum::numel(shape)));
      for (auto& v : x) v = std::ldexp(nd(rng), static_cast<int>(rng() % 61) - 30);
      if (kind == 1 && !x.empty()) x[rng() % x.size()] = qnum::detail::kInf;
      if (kind == 2 && !x.empty()) x[rng() % x.size()] = from_bits(0x7FC00000u);
      if (kind == 3)
        for (auto& v : x) v = from_bits(static_cast<std::uint32_t>(rng()) & 0x807FFFFFu);  // subnormals and zeros
      CAPTURE(qnum::to_string(shape));
      CAPTURE(kind);
      const auto cpu = qnum::Format::parse("nvfp4").quantize(x, shape);
      DeviceBuffer<float> in(x), out(x.size());
      qnum::cuda::quantize(qnum::NVFP4Spec{}, qnum::exact, in.get(), out.get(), shape);
      require_same_bits(out.download(), cpu, x, "nvfp4");
      qnum::cuda::quantize(qnum::NVFP4Spec{}, qnum::exact, in.get(), in.get(), shape);  // in place
      require_same_bits(in.download(), cpu, x, "nvfp4 in place");
    }
}

TEST_CASE("cuda nvfp4: bad arguments give the CPU's messages") {
  DeviceBuffer<float> buf(4);
  CHECK_THROWS_WITH_AS(qnum::cuda::quantize(qnum::NVFP4Spec{}, qnum::mase_compat, buf.get(), buf.get(), {4}),
                       "nvfp4: nvfp4 has no MASE counterpart; use mode=exact", qnum::Error);
}
