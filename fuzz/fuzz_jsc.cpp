// JSC ARFF and CSV files (data/jsc.hpp): the first byte picks the reader, which reads the rest
// from memory (the stream overloads the path readers call). A parsed table has 16 features per
// row and labels 0-4.
#include <sstream>

#include "fuzz_input.hpp"
#include "qnum/data/jsc.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::istringstream in(std::string(qnum::fuzz::as_text(data + 1, size - 1)));
  qnum::fuzz::expect_clean([&] {
    const auto t = data[0] & 1 ? qnum::data::read_jsc_arff(in, "fuzz.arff") : qnum::data::read_jsc_csv(in, "fuzz.csv");
    qnum::fuzz::check(t.features.shape().size() == 2 && t.features.shape()[1] == qnum::data::kJscFeatures,
                      "16 features");
    qnum::fuzz::check(static_cast<std::int64_t>(t.labels.size()) == t.features.shape()[0], "one label per row");
    for (const auto y : t.labels) qnum::fuzz::check(y >= 0 && y < qnum::data::kJscClasses, "label 0-4");
  });
  return 0;
}
