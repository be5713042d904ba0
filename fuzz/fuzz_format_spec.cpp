// Format spec text (format/format.hpp): `name:key=value,...` parses or is refused; a parsed
// format's to_string() parses back to an equal format; it then quantizes a small tensor
// (shape from the first input bytes) without a sanitizer report.
#include <algorithm>
#include <vector>

#include "fuzz_input.hpp"
#include "qnum/format/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const qnum::Shape shape{1 + data[0] % 4, 1 + data[1] % 40};
  const auto text = qnum::fuzz::as_text(data + 2, size - 2);
  qnum::fuzz::expect_clean([&] {
    for (const auto base : {qnum::exact, qnum::mase_compat}) {
      qnum::Format f;
      try {
        f = qnum::Format::parse(text, base);
      } catch (const qnum::Error&) {
        continue;
      }
      const auto again = qnum::Format::parse(f.to_string());
      qnum::fuzz::check(again == f, "parse(to_string()) == format");
      std::vector<float> in(static_cast<std::size_t>(qnum::numel(shape)));
      for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = (static_cast<float>(i % 13) - 6.0f) * (i % 3 == 0 ? 1e-3f : 0.37f) * (i % 7 == 0 ? 1e30f : 1.0f);
      for (const auto role : {qnum::Role::weight, qnum::Role::activation}) {
        try {
          const auto out = f.quantize(in, shape, role);
          qnum::fuzz::check(static_cast<std::int64_t>(out.size()) == qnum::numel(f.output_shape(shape)),
                            "quantize output size");
        } catch (const qnum::Error&) {
          // e.g. a block shape that does not tile this tensor: refused by name, fine
        }
      }
    }
  });
  return 0;
}
