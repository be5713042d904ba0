// log on the device against the CPU reference, bit for bit.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "elementwise.hpp"
#include "qnum/cuda/quantize/log.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::elementwise;

TEST_CASE("cuda: log quantize equals the CPU reference") {
  for (const qnum::LogSpec s : {qnum::LogSpec{8, std::nullopt}, qnum::LogSpec{4, std::nullopt}, qnum::LogSpec{6, 3}})
    for (const auto& p : policies()) check_elementwise(s, p, "log W" + std::to_string(s.width));
}

TEST_CASE("cuda: MASE log with log2 looked up equals the reference on every float32 input") {
  // The lookup tables come from the CPU's log2 (glibc); the reference kernel evaluates CUDA's
  // log2. Equal on all 2^32 inputs also shows the two log2s agree wherever it matters.
  for (const qnum::LogSpec s : {qnum::LogSpec{8, std::nullopt}, qnum::LogSpec{4, std::nullopt}, qnum::LogSpec{6, 3}})
    check_fast_path_exhaustively(s, "log mase W" + std::to_string(s.width), qnum::mase_compat);
}
