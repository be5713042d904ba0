// A downstream program using an installed qnum through find_package(qnum).
#include <qnum/qnum.hpp>

int main() {
  const auto f = qnum::Format::parse("integer:width=8,frac_width=4");
  const float in[2] = {0.09375f, 100.0f};
  float out[2];
  f.quantize(in, out, {2});
  return (out[0] == 0.125f && out[1] == 7.9375f) ? 0 : 1;
}
