// `--mode mase` takes MASE's quantizer signature defaults for every key left out, family by
// family (spec/formats.md; DeepWok/mase src/chop/nn/quantizers/*.py), while exact mode keeps
// qnum's; a key given in the text always wins. One test case per family pins its defaults.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "qnum/format/format.hpp"

using namespace qnum;

namespace {

template <class S>
S mase_spec(const char* text) {
  return std::get<S>(Format::parse(text, mase_compat).spec);
}
template <class S>
S exact_spec(const char* text) {
  return std::get<S>(Format::parse(text).spec);
}

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i * 37 % 101) - 50.0f) / 97.0f;  // not dyadic
  return v;
}

}  // namespace

TEST_CASE("mase defaults: block_fp takes width 12 (block_fp_quantizer), exact keeps 8") {
  const auto m = mase_spec<BlockFPSpec>("block_fp");
  CHECK(m.width == 12);
  CHECK(m.exponent_width == 8);
  CHECK(!m.exponent_bias);
  CHECK(m.block_size == std::vector<int>{16});
  CHECK(exact_spec<BlockFPSpec>("block_fp").width == 8);
  CHECK(Format::parse("block_fp:mode=mase").spec == Format::parse("block_fp", mase_compat).spec);
  CHECK(mase_spec<BlockFPSpec>("block_fp:width=8").width == 8);  // given keys win
  // Every element then equals MASE's width=12 output, not qnum's width-8 default.
  const auto x = ramp(64);
  const auto left_out = Format::parse("block_fp", mase_compat).quantize(x, {4, 16});
  const auto given = Format::parse("block_fp:width=12", mase_compat).quantize(x, {4, 16});
  const auto width8 = Format::parse("block_fp:width=8", mase_compat).quantize(x, {4, 16});
  CHECK(left_out == given);
  CHECK(left_out != width8);
  // The text form names the width, so it reads back the same in either mode.
  const auto f = Format::parse("block_fp", mase_compat);
  CHECK(Format::parse(f.to_string()) == f);
}

TEST_CASE("mase defaults: binary is unipolar and deterministic (binary_quantizer)") {
  const auto m = mase_spec<BinarySpec>("binary");
  CHECK(!m.bipolar);
  CHECK(!m.stochastic);
  CHECK(exact_spec<BinarySpec>("binary").bipolar);
  CHECK(mase_spec<BinarySpec>("binary:bipolar=true").bipolar);
  // MASE's bipolar=False path needs a 4-D tensor (MASE issue 261), so a 2-D one is refused.
  const std::vector<float> x(8, 0.5f);
  CHECK(qnum_test::error_of([&] {
          (void)Format::parse("binary", mase_compat).quantize(x, {2, 4});
        }).find("bipolar=False") != std::string::npos);
  const auto q = Format::parse("binary", mase_compat).quantize(x, {1, 2, 2, 2});
  for (float v : q) CHECK(v == 0.5f);  // {0, alpha}, alpha = mean|x|
}

TEST_CASE("mase defaults: mxint_hardware takes width 12, exponent_width 6 (mxint_quant_block)") {
  const auto m = mase_spec<MXIntHardwareSpec>("mxint_hardware");
  CHECK(m.width == 12);
  CHECK(m.exponent_width == 6);
  CHECK(m.parallelism == std::vector<int>{1, 16});  // MASE requires it; qnum's default
  CHECK(mase_spec<MXIntHardwareSpec>("mxint_hardware:width=8,exponent_width=4").width == 8);
}

TEST_CASE("mase defaults: integer frac_width is width // 2 (_integer_quantize)") {
  CHECK(mase_spec<FixedSpec>("integer:width=6").frac_width == 3);
  CHECK(mase_spec<FixedSpec>("integer:width=7").frac_width == 3);
  CHECK(mase_spec<FixedSpec>("integer").is_signed);
  CHECK(Format::parse("integer_floor:width=8", mase_compat).policy.rounding == Rounding::floor);
}

TEST_CASE("mase defaults: minifloat_denorm and minifloat_ieee bias 2^(E-1)-1") {
  CHECK(!mase_spec<MinifloatDenormSpec>("minifloat_denorm:width=8,exponent_width=4").exponent_bias);
  CHECK(mase_spec<MinifloatDenormSpec>("minifloat_denorm:width=8,exponent_width=4").bias() == 7);
  CHECK(!mase_spec<MinifloatSpec>("minifloat_ieee:width=8,exponent_width=5").exponent_bias);
  CHECK(mase_spec<MinifloatSpec>("minifloat_ieee:width=8,exponent_width=5").bias() == 15);
}

TEST_CASE("mase defaults: log bias 2^(W-2)-1 (log_quantizer requires width)") {
  const auto m = mase_spec<LogSpec>("log:width=6");
  CHECK(!m.exponent_bias);
  CHECK(m == exact_spec<LogSpec>("log:width=6"));
}

TEST_CASE("mase defaults: block_minifloat and block_log block_size [16]") {
  CHECK(mase_spec<BlockMinifloatSpec>("block_minifloat:width=8,exponent_width=4,exponent_bias_width=4").block_size ==
        std::vector<int>{16});
  CHECK(mase_spec<BlockLogSpec>("block_log:width=8,exponent_bias_width=4").block_size == std::vector<int>{16});
}

TEST_CASE("mase defaults: ternary without scaling, statistics none (ternary_quantizer)") {
  const auto m = mase_spec<TernarySpec>("ternary");
  CHECK(!m.scaling_factor);
  CHECK(!m.threshold);
  CHECK(!m.mean);
  CHECK(!m.median);
  CHECK(!m.maximum);
}

TEST_CASE("mase defaults: scale_integer signed (scale_integer_quantizer)") {
  CHECK(mase_spec<ScaleIntegerSpec>("scale_integer:width=8").is_signed);
}

TEST_CASE("mase defaults: mxint and mxfp block_dim -1, 8 scale bits, no quantile search") {
  const auto i = mase_spec<MXIntSpec>("mxint:width=8,block_size=32");
  CHECK(i.block_dim == -1);
  CHECK(i.scale_bits == 8);
  CHECK(!i.quantile_search);
  const auto f = mase_spec<MXFPSpec>("mxfp:exponent_width=4,frac_width=3,block_size=32");
  CHECK(f.block_dim == -1);
  CHECK(f.scale_exp_bits == 8);
  CHECK(!f.quantile_search);
  // A default is looked up under every alias: MASE's scale_bits spelling counts as given (no
  // "unknown key" for it beside the default).
  CHECK(mase_spec<MXFPSpec>("mxfp:exponent_width=4,frac_width=3,block_size=32,scale_bits=8").scale_exp_bits == 8);
  CHECK(mase_spec<MXIntSpec>("mxint:element_bits=6,block_size=32").width == 6);
}

TEST_CASE("mase defaults: residual_sign and binarize take qnum's (levels 2)") {
  CHECK(mase_spec<ResidualSignSpec>("residual_sign").levels == 2);
  CHECK(Format::parse("binarize", mase_compat).spec == Format::parse("binarize").spec);
}

TEST_CASE("mase defaults: qnum formats names each MASE default that differs") {
  for (const auto& fam : format_families()) {
    if (fam.name != "block_fp") continue;
    CHECK(fam.keys.at(0).key == "width");
    CHECK(fam.keys.at(0).help.find("(--mode mase: 12)") != std::string::npos);
    CHECK(fam.keys.at(1).help.find("--mode mase") == std::string::npos);  // exponent_width: 8 either way
  }
}
