// WordPiece tokenizer against Hugging Face's BertTokenizer (transformers 5, the Rust
// tokenizers pipeline): hand-checked sentences (accents, punctuation, CJK, emoji, control
// characters, unknown and 100/101-character words, ## pieces, special tokens in the text,
// canonical ordering of marks), encodings with truncation, padding and pairs, invalid UTF-8
// (replaced, removed, counted), vocabulary errors. Expected values come from
// fixtures/make_wordpiece_fixtures.py: with a committed 3,000-token subset of
// bert-base-uncased's vocab always, and with the real vocab and all 50,000 IMDb reviews when
// QNUM_DATA_DIR is set.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/helpers.hpp"
#include "error_of.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/data/unicode.hpp"
#include "qnum/data/wordpiece.hpp"

using namespace qnum;
using namespace qnum::data;
using qnum_test::error_of;
using qnum_test::kDatasetFixtures;
using qnum_test::write_temp;

namespace {

nlohmann::json load_json(const std::filesystem::path& p) { return nlohmann::json::parse(read_file(p)); }

const WordPieceTokenizer& small_tokenizer() {
  static const WordPieceTokenizer t = WordPieceTokenizer::from_file(kDatasetFixtures / "wordpiece_vocab_small.txt");
  return t;
}

std::vector<std::int64_t> widen(const std::vector<std::int32_t>& v) { return {v.begin(), v.end()}; }

std::string from_hex(const std::string& h) {
  std::string s;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    s.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return s;
}

std::optional<std::filesystem::path> real_data_dir() {
  const char* d = std::getenv("QNUM_DATA_DIR");
  if (!d || !*d || !std::filesystem::is_regular_file(std::filesystem::path(d) / "bert" / "vocab.txt"))
    return std::nullopt;
  return std::filesystem::path(d);
}

/// FNV-1a 64 over the decimal ids joined by spaces (the fixture script's hash).
struct Fnv {
  std::uint64_t h = 0xCBF29CE484222325ull;
  bool first = true;
  void add(std::int64_t v) {
    std::string s = (first ? "" : " ") + std::to_string(v);
    first = false;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

}  // namespace

TEST_CASE("wordpiece: hand-checked sentences match Hugging Face (small vocab)") {
  const auto j = load_json(kDatasetFixtures / "wordpiece_cases.json");
  const auto& tok = small_tokenizer();
  REQUIRE(tok.vocab_size() == j["small_vocab_size"].get<std::int64_t>());
  for (const auto& c : j["cases"]) {
    const auto name = c["name"].get<std::string>();
    const auto text = c["text"].get<std::string>();
    CAPTURE(name);
    CHECK(tok.tokenize(text) == c["tokens_small"].get<std::vector<std::string>>());
    CHECK(widen(tok.ids(text)) == c["ids_small"].get<std::vector<std::int64_t>>());
    if (!c["words"].is_null()) CHECK(tok.basic_tokenize(text) == c["words"].get<std::vector<std::string>>());
  }
}

TEST_CASE("wordpiece: what the sentences show, spelled out") {
  const auto& tok = small_tokenizer();
  using V = std::vector<std::string>;
  CHECK(tok.tokenize("Café naïve") == V{"cafe", "naive"});                             // NFD + Mn removed, lower-cased
  CHECK(tok.tokenize("Wait...what?!") == V{"wait", ".", ".", ".", "what", "?", "!"});  // each punctuation alone
  CHECK(tok.basic_tokenize("日本語 abc") == V{"日", "本", "語", "abc"});               // CJK ideographs split
  CHECK(tok.tokenize("emoji 😀") == V{"em", "##oj", "##i", "[UNK]"});                   // emoji: unknown word
  CHECK(tok.basic_tokenize("a\x01"
                           "b\tc\u200B"
                           "d") == V{"ab", "cd"});           // control removed, tab splits
  CHECK(tok.tokenize(std::string(101, 'a')) == V{"[UNK]"});  // > 100 characters
  CHECK(tok.tokenize(std::string(100, 'b')).size() == 50);   // 100: "bb" + 49 "##bb"
  CHECK(tok.tokenize("hello [SEP] x[UNK]y") == V{"hello", "[SEP]", "x", "[UNK]", "y"});
  CHECK(tok.basic_tokenize("ΣΑΣ") == V{"σασ"});  // per-character lower-casing: no final sigma (as HF fast)
  // Canonical ordering: U+1D16D (class 226) before U+1D165 (216) swaps, as NFD does.
  CHECK(tok.basic_tokenize("x\U0001D16D\U0001D165y") == V{"x\U0001D165\U0001D16Dy"});
}

TEST_CASE("wordpiece: encodings (truncation, padding, pairs, masks) match Hugging Face") {
  const auto j = load_json(kDatasetFixtures / "wordpiece_cases.json");
  const auto& tok = small_tokenizer();
  for (const auto& c : j["encodes"]) {
    CAPTURE(c["name"].get<std::string>());
    EncodeOptions o;
    o.max_length = c["max_length"].get<std::int64_t>();
    o.pad_to_max_length = c["pad"].get<bool>();
    const auto e = c["pair"].is_null() ? tok.encode(c["text"].get<std::string>(), o)
                                       : tok.encode_pair(c["text"].get<std::string>(), c["pair"].get<std::string>(), o);
    CHECK(e.input_ids == c["input_ids"].get<std::vector<std::int64_t>>());
    CHECK(e.attention_mask == c["attention_mask"].get<std::vector<std::int64_t>>());
    CHECK(e.token_type_ids == c["token_type_ids"].get<std::vector<std::int64_t>>());
  }
  SUBCASE("truncation is counted; no truncation keeps everything") {
    TextStats st;
    EncodeOptions o;
    o.max_length = 4;
    const std::string text = "one two three four five";
    const auto n = static_cast<std::int64_t>(tok.ids(text).size());
    const auto e = tok.encode(text, o, &st);
    CHECK(e.input_ids.size() == 4);
    CHECK(e.truncated_tokens == n - 2);
    CHECK(st.truncated == 1);
    o.truncation = false;
    CHECK(static_cast<std::int64_t>(tok.encode(text, o).input_ids.size()) == n + 2);
    o.max_length = 1;
    o.truncation = true;
    CHECK(error_of([&] { tok.encode("x", o); }).find("max_length 1 is shorter than the 2 special tokens") !=
          std::string::npos);
  }
}

TEST_CASE("wordpiece: invalid UTF-8 is replaced by U+FFFD, removed and counted") {
  const auto j = load_json(kDatasetFixtures / "wordpiece_cases.json");
  const auto& tok = small_tokenizer();
  TextStats total;
  for (const auto& c : j["invalid_utf8"]) {
    CAPTURE(c["name"].get<std::string>());
    TextStats st;
    CHECK(widen(tok.ids(from_hex(c["hex"].get<std::string>()), &st)) ==
          c["ids_small"].get<std::vector<std::int64_t>>());
    CHECK(st.invalid_utf8 == c["replacements"].get<std::int64_t>());
    CHECK(st.texts_with_invalid == 1);
    tok.ids(from_hex(c["hex"].get<std::string>()), &total);
  }
  CHECK(total.texts_with_invalid == static_cast<std::int64_t>(j["invalid_utf8"].size()));
  TextStats st;
  tok.ids("valid \xEF\xBF\xBD text", &st);  // a literal U+FFFD is removed but is not invalid input
  CHECK(st.invalid_utf8 == 0);
  CHECK(tok.basic_tokenize("ab\x80\x80"
                           "cd") == std::vector<std::string>{"abcd"});  // removal joins the word
}

TEST_CASE("wordpiece: UTF-8 decoder follows the maximal-subpart rule") {
  auto count = [](std::string_view s) {
    std::vector<std::pair<char32_t, int>> out;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* e = p + s.size();
    while (p < e) {
      const auto c = qnum::data::detail::decode_utf8(p, e);
      out.emplace_back(c.cp, c.length);
      p += c.length;
    }
    return out;
  };
  using R = std::vector<std::pair<char32_t, int>>;
  CHECK(count("\xE2\x82\xAC") == R{{0x20AC, 3}});
  CHECK(count("\xF0\x9F\x98\x80") == R{{0x1F600, 4}});
  CHECK(count("\xE2\x82") == R{{0xFFFD, 2}});                                // truncated: one replacement
  CHECK(count("\xE0\x80\x80") == R{{0xFFFD, 1}, {0xFFFD, 1}, {0xFFFD, 1}});  // overlong: each byte
  CHECK(count("\xF4\x90\x80\x80") == R{{0xFFFD, 1}, {0xFFFD, 1}, {0xFFFD, 1}, {0xFFFD, 1}});  // > U+10FFFF
  std::string out;
  for (char32_t cp : {U'a', U'é', U'€', U'😀'}) qnum::data::detail::append_utf8(out, cp);
  CHECK(out == "aé€😀");
}

TEST_CASE("wordpiece: vocabulary errors name the token and the file") {
  const auto no_cls = write_temp("qnum_vocab_no_cls.txt", "[PAD]\n[UNK]\n[SEP]\nhello\n");
  const auto msg = error_of([&] { WordPieceTokenizer::from_file(no_cls); });
  CHECK(msg.find("[CLS]") != std::string::npos);
  CHECK(msg.find(no_cls.string()) != std::string::npos);
  for (const std::string missing : {"[SEP]", "[UNK]", "[PAD]"}) {
    std::string v;
    for (std::string t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]"})
      if (t != missing) v += t + "\n";
    const auto p = write_temp("qnum_vocab_missing.txt", v);
    CHECK(error_of([&] { WordPieceTokenizer::from_file(p); }).find("no " + missing + " token") != std::string::npos);
  }
  CHECK(error_of([&] {
          WordPieceTokenizer::from_file("/nonexistent/vocab.txt");
        }).find("cannot open vocabulary file '/nonexistent/vocab.txt'") != std::string::npos);
  const auto bad = write_temp("qnum_vocab_bad_utf8.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nca\xFF\n");
  CHECK(error_of([&] { WordPieceTokenizer::from_file(bad); }).find(":5: invalid UTF-8") != std::string::npos);
  // CRLF line ends and trailing blanks are trimmed; ids are line indices.
  const auto crlf = write_temp("qnum_vocab_crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS] \r\n[SEP]\r\nfoo\r\n##bar\r\n");
  const auto t = WordPieceTokenizer::from_file(crlf);
  CHECK(t.vocab_size() == 6);
  CHECK(t.cls_id() == 2);
  CHECK(t.ids("foobar") == std::vector<std::int32_t>{4, 5});
  CHECK(t.token(5) == "##bar");
  CHECK(error_of([&] { t.token(6); }).find("id 6 outside the vocabulary of 6") != std::string::npos);
}

TEST_CASE("wordpiece: copies are independent and options are honoured") {
  auto copy = std::make_optional(small_tokenizer());
  const WordPieceTokenizer moved = std::move(*copy);
  copy.reset();
  CHECK(moved.tokenize("x [SEP] y") == std::vector<std::string>{"x", "[SEP]", "y"});
  WordPieceOptions o;
  o.match_special_tokens = false;
  o.max_input_chars_per_word = 3;
  const WordPieceTokenizer t({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[", "]", "sep", "ab", "##c", "é"}, o);
  CHECK(t.tokenize("[SEP] abc abcd") == std::vector<std::string>{"[", "sep", "]", "ab", "##c", "[UNK]"});
  WordPieceOptions cased;
  cased.lower_case = false;  // strip_accents follows: no NFD, no lower-casing
  const WordPieceTokenizer c({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "é", "E"}, cased);
  CHECK(c.tokenize("é e E") == std::vector<std::string>{"é", "[UNK]", "E"});
  CHECK(t.fingerprint() != c.fingerprint());
}

TEST_CASE("wordpiece: real vocab matches Hugging Face on the sentences and all 50,000 IMDb reviews") {
  const auto dir = real_data_dir();
  if (!dir) {
    MESSAGE("skipped: set QNUM_DATA_DIR to a folder with bert/vocab.txt and imdb/{train,test}.tsv.gz");
    return;
  }
  const auto tok = WordPieceTokenizer::from_file(*dir / "bert" / "vocab.txt");
  REQUIRE(tok.vocab_size() == 30522);
  CHECK(tok.cls_id() == 101);
  CHECK(tok.sep_id() == 102);
  CHECK(tok.unk_id() == 100);
  CHECK(tok.pad_id() == 0);
  const auto cases = load_json(kDatasetFixtures / "wordpiece_cases.json");
  for (const auto& c : cases["cases"]) {
    CAPTURE(c["name"].get<std::string>());
    CHECK(widen(tok.ids(c["text"].get<std::string>())) == c["ids_full"].get<std::vector<std::int64_t>>());
  }
  const auto ref = load_json(kDatasetFixtures / "wordpiece_imdb_hf.json");
  for (const std::string split : {"train", "test"}) {
    if (!std::filesystem::is_regular_file(*dir / "imdb" / (split + ".tsv.gz"))) continue;
    CAPTURE(split);
    const auto table = read_imdb_tsv(*dir / "imdb" / (split + ".tsv.gz"));
    const auto& r = ref["splits"][split];
    REQUIRE(table.size() == r["reviews"].get<std::int64_t>());
    std::vector<std::vector<std::int32_t>> ids(table.rows.size());
    TextStats st;
    for (std::size_t i = 0; i < ids.size(); ++i) tok.append_ids(table.rows[i].text, ids[i], &st);
    CHECK(st.invalid_utf8 == 0);
    for (std::size_t i = 0; i < 3; ++i) CHECK(widen(ids[i]) == r["first_ids"][i].get<std::vector<std::int64_t>>());
    int bad_rows = 0;
    for (const auto& row : r["rows"]) {
      const auto i = row["row"].get<std::size_t>();
      Fnv h;
      for (auto v : ids[i]) h.add(v);
      if (h.hex() != row["hash"].get<std::string>() || ids[i].size() != row["n"].get<std::size_t>()) {
        if (++bad_rows <= 3) MESSAGE("row ", i, " differs: ", table.rows[i].text.substr(0, 120));
      }
    }
    CHECK(bad_rows == 0);
    Fnv all;
    std::int64_t tokens = 0;
    for (const auto& v : ids) all.add(static_cast<std::int64_t>(v.size()));
    for (const auto& v : ids)
      for (auto x : v) all.add(x), ++tokens;
    CHECK(tokens == r["tokens"].get<std::int64_t>());
    CHECK(all.hex() == r["hash_all"].get<std::string>());
  }
}
