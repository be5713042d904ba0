// A downstream program using an installed qnum through find_package(qnum); it also keeps
// the README's library example compiling.
#include <qnum/qnum.hpp>

#include <vector>

int main() {
  const auto f = qnum::Format::parse("integer:width=8,frac_width=4");
  const float in[2] = {0.09375f, 100.0f};
  float out[2];
  f.quantize(in, out, {2});
  if (out[0] != 0.125f || out[1] != 7.9375f) return 1;

  // README example
  std::vector<float> x(64, 0.3f);
  auto g = qnum::Format::parse("mxfp4_e2m1");
  std::vector<float> q = g.quantize(x, {2, 32});
  float y = qnum::quantize(qnum::MinifloatSpec::fp8_e4m3(), qnum::exact, 300.0f);
  using Q = qnum::Fixed<8, 4>;
  Q a = 1.5f;
  if (q[0] != 0.25f || y != 288.0f || qnum::to_binary(a) != "0b0001.1000") return 2;
  const auto block = qnum::MXInt8::from_floats(std::vector<float>(32, 1.0f));
  if (block.to_floats()[0] != 1.0f || sizeof(block) != 33) return 3;
  if (float(qnum::FP8E4M3(1000.0f)) != 448.0f) return 4;
  return 0;
}
