// scale_integer, mxint_hardware and the MX specs together: the argument checks.
#include <doctest/doctest.h>

#include "scaled.hpp"

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::scaled;

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
