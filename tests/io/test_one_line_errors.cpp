// qnum::Error escapes its whole message once, so a key, value or file excerpt quoted raw at
// any throw site cannot split the CLI's one-line error (findings of the fuzz harnesses in
// fuzz/; their inputs are also kept as seeds there).
#include <doctest/doctest.h>

#include <string>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"
#include "qnum/data/imdb.hpp"

using namespace qnum;

namespace {
std::string what_of(const std::string& message) { return Error(message).what(); }
}  // namespace

TEST_CASE("Error: control bytes of the message escaped, printable text kept") {
  CHECK(what_of("plain text: 'a\\b'") == "plain text: 'a\\b'");
  CHECK(what_of("a\nb\tc\rd\x01\x7f") == "a\\nb\\tc\\rd\\x01\\x7f");
  CHECK(what_of(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(what_of("unknown key 'x\ny\x01'") == "unknown key 'x\\ny\\x01'");
  // Valid UTF-8 stays; C1 controls, U+2028/U+2029 and bytes that are not UTF-8 are escaped.
  CHECK(what_of("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
  CHECK(what_of("nel\xc2\x85.") == "nel\\xc2\\x85.");
  CHECK(what_of("ls\xe2\x80\xa8ps\xe2\x80\xa9") == "ls\\xe2\\x80\\xa8ps\\xe2\\x80\\xa9");
  CHECK(what_of("bad \xff\xc3(\xc0\xaf") == "bad \\xff\\xc3(\\xc0\\xaf");
  CHECK(what_of("cut \xe2\x82") == "cut \\xe2\\x82");
  CHECK(what_of("surrogate \xed\xa0\x80") == "surrogate \\xed\\xa0\\x80");
  CHECK(what_of("overlong \xe0\x80\xaf, past U+10FFFF \xf4\x90\x80\x80") ==
        "overlong \\xe0\\x80\\xaf, past U+10FFFF \\xf4\\x90\\x80\\x80");
  // Escaping once: a message built from another Error's message is not escaped again.
  const std::string inner = what_of("key 'a\nb'");
  CHECK(what_of("outer: " + inner) == "outer: key 'a\\nb'");
  CHECK_THROWS_WITH_AS(detail::fail("k '", std::string("\n\x01"), "'"), "k '\\n\\x01'", Error);
}

TEST_CASE("excerpt: length capped at a character boundary") {
  CHECK(detail::excerpt("plain text") == "plain text");
  CHECK(detail::excerpt(std::string(50, 'x'), 10) == "xxxxxxxxxx...");
  CHECK(detail::excerpt("", 10).empty());
  CHECK(detail::excerpt("abcdefghi\xc3\xa9xyz", 10) == "abcdefghi...");
  CHECK(detail::excerpt("abcdefghij\xc3\xa9xyz", 10) == "abcdefghij...");
}

TEST_CASE("imdb: a quoted multi-line label is quoted on one line") {
  // fuzz_imdb: a quoted CSV field with newlines in the sentiment column.
  CHECK_THROWS_WITH_AS(data::parse_imdb_csv("review,sentiment\nok,\"pos\nitive\"\n", "f.csv"),
                       "f.csv:2: sentiment 'pos\\nitive' is not positive or negative", Error);
  CHECK_THROWS_WITH_AS(data::parse_imdb_tsv("label\ttext\n\x01\x02\tx\n", "f.tsv"),
                       "f.tsv:2: label '\\x01\\x02' is not 0 or 1", Error);
}
