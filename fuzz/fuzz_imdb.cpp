// IMDb TSV and CSV text (data/imdb.hpp): the first byte picks the reader. Parsed tables have
// labels 0/1 and ratings 1-10 where present.
#include "fuzz_input.hpp"
#include "qnum/data/imdb.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto text = qnum::fuzz::as_text(data + 1, size - 1);
  qnum::fuzz::expect_clean([&] {
    const auto t =
        data[0] & 1 ? qnum::data::parse_imdb_csv(text, "fuzz.csv") : qnum::data::parse_imdb_tsv(text, "fuzz.tsv");
    for (const auto& r : t.rows) {
      qnum::fuzz::check(r.label == 0 || r.label == 1, "label 0/1");
      qnum::fuzz::check(r.rating == 0 || (r.rating >= 1 && r.rating <= 10), "rating 1-10");
    }
  });
  return 0;
}
