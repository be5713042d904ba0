// A downstream program linking the installed compiled library qnum::kernels (run-time ISA
// dispatch) through find_package(qnum).
#include <qnum/kernel/dispatch.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
  namespace dispatch = qnum::kernel::dispatch;
  const auto f = qnum::Format::parse("fp8_e4m3");
  std::vector<float> in{0.3f, 1000.0f, -1.0f}, out(3);
  dispatch::quantize(f, in, out, {3});
  std::printf("quantized on %s\n", std::string(dispatch::to_string(dispatch::selected_isa())).c_str());
  return out == f.quantize(in, {3}) && out[1] == 448.0f ? 0 : 1;
}
