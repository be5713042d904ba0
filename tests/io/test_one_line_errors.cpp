// Bytes of a file quoted in an error are escaped and cut, so the CLI's error stays one line
// (findings of the fuzz harnesses in fuzz/; their inputs are also kept as seeds there).
#include <doctest/doctest.h>

#include <string>

#include "qnum/core/printable.hpp"
#include "qnum/data/imdb.hpp"

using namespace qnum;

TEST_CASE("printable: control bytes escaped, length capped") {
  CHECK(detail::printable("plain text") == "plain text");
  CHECK(detail::printable("a\nb\tc\rd\x01\x7f") == "a\\nb\\tc\\rd\\x01\\x7f");
  CHECK(detail::printable(std::string(50, 'x'), 10) == "xxxxxxxxxx...");
  CHECK(detail::printable("", 10).empty());
}

TEST_CASE("imdb: a quoted multi-line label is quoted on one line") {
  // fuzz_imdb: a quoted CSV field with newlines in the sentiment column.
  CHECK_THROWS_WITH_AS(data::parse_imdb_csv("review,sentiment\nok,\"pos\nitive\"\n", "f.csv"),
                       "f.csv:2: sentiment 'pos\\nitive' is not positive or negative", Error);
  CHECK_THROWS_WITH_AS(data::parse_imdb_tsv("label\ttext\n\x01\x02\tx\n", "f.tsv"),
                       "f.tsv:2: label '\\x01\\x02' is not 0 or 1", Error);
}
