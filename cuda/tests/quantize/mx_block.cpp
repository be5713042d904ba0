// OCP MX elements and flat MX blocks on the device against the CPU reference, bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "elementwise.hpp"
#include "qnum/cuda/quantize/mx_block.hpp"

using qnum::cuda::DeviceBuffer;

using namespace qnum::cuda::test;
using namespace qnum::cuda::test::elementwise;

TEST_CASE("cuda: MX element quantize equals the CPU reference") {
  for (const auto e : {qnum::MXElement::integer(8), qnum::MXElement::fp(4, 3), qnum::MXElement::fp(5, 2),
                       qnum::MXElement::fp(2, 1), qnum::MXElement::fp(3, 2)})
    for (const auto& p : policies())
      if (!p.is_mase()) check_elementwise(e, p, "mx element " + e.name());
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
