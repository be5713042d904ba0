// IMDb readers on small fixtures in the three layouts (gzip TSV, aclImdb tree, Kaggle CSV;
// fixtures/make_imdb_fixtures.py), malformed rows named by file and line, dataset location
// and its missing-data message, seeded disjoint validation split, dynamic padding, the
// synthetic set, and (with QNUM_DATA_DIR) the real data.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "env_guard.hpp"
#include "data/helpers.hpp"
#include "error_of.hpp"
#include "qnum/data/text.hpp"

using namespace qnum;
using namespace qnum::data;

using qnum_test::EnvGuard;
using qnum_test::error_of;
using qnum_test::kDatasetFixtures;
using qnum_test::write_temp;

namespace {

namespace fs = std::filesystem;
std::vector<std::string> texts(const TextTable& t) {
  std::vector<std::string> v;
  for (const auto& r : t.rows) v.push_back(r.text);
  return v;
}
std::vector<std::int64_t> labels(const TextTable& t) {
  std::vector<std::int64_t> v;
  for (const auto& r : t.rows) v.push_back(r.label);
  return v;
}

const std::vector<std::int64_t> kTrainLabels{0, 0, 0, 0, 1, 1, 1, 1};

}  // namespace

TEST_CASE("imdb: gzip TSV, aclImdb tree and Kaggle CSV read the same reviews") {
  const auto tsv = read_imdb_tsv(kDatasetFixtures / "imdb_small" / "train.tsv.gz");
  const auto acl = read_aclimdb(kDatasetFixtures / "aclImdb", "train");
  const auto csv = read_imdb_csv(kDatasetFixtures / "imdb_small.csv");
  REQUIRE(tsv.size() == 8);
  CHECK(labels(tsv) == kTrainLabels);
  CHECK(texts(tsv) == texts(acl));
  CHECK(labels(acl) == kTrainLabels);
  // TSV: the text is the rest of the line, tabs included; rating and id kept.
  CHECK(tsv.rows[1].text == "Dull,\tslow and predictable.<br /><br />Skip it.");
  CHECK(tsv.rows[2].text == "Bad acting, worse script \xFF (sic).");  // bytes kept; the tokenizer counts them
  CHECK(tsv.rows[4].rating == 10);
  CHECK(tsv.rows[7].id == 11);
  CHECK(acl.rows[3].id == 10);  // aclImdb sorted by numeric id (10 after 7), negatives first
  CHECK(acl.rows[3].rating == 4);
  // CSV: 12 reviews (train + test); quoted commas, doubled quotes, a newline in a field, CRLF.
  REQUIRE(csv.size() == 12);
  CHECK(csv.rows[1].text == "Dull,\tslow and\npredictable.<br /><br />Skip it.");
  CHECK(csv.rows[3].text == "Not awful, just \"meh\".");
  CHECK(csv.rows[4].text == "A masterpiece. Café scenes are naïve but lovely.");
  CHECK(csv.rows[0].label == 0);
  CHECK(csv.rows[4].label == 1);
  CHECK(read_aclimdb(kDatasetFixtures / "aclImdb", "test").size() == 4);
}

TEST_CASE("imdb: malformed TSV and CSV name the file and line") {
  const std::string h = "label\trating\tid\ttext\n";
  auto tsv_error = [&](const std::string& body) {
    const auto p = write_temp("qnum_imdb_bad.tsv", body);
    return error_of([&] { read_imdb_tsv(p); });
  };
  CHECK(tsv_error(h + "1\t8\t0\tfine\n2\t8\t1\tbad label\n").find("qnum_imdb_bad.tsv:3: label '2' is not 0 or 1") !=
        std::string::npos);
  CHECK(tsv_error(h + "1\t8\t0\tfine\n0\t8\n").find(":3: expected 4 tab-separated fields, got 2") != std::string::npos);
  CHECK(tsv_error(h + "1\t11\t0\tx\n").find(":2: rating '11' is not an integer 1-10") != std::string::npos);
  CHECK(tsv_error(h + "1\t8\tx7\tx\n").find(":2: id 'x7' is not a non-negative integer") != std::string::npos);
  CHECK(tsv_error(h + "1\t8\t0\tx\n\n1\t8\t1\ty\n").find(":3: empty line") != std::string::npos);
  CHECK(tsv_error("text\tlabel\n").find(":1: expected a header line") != std::string::npos);
  CHECK(tsv_error(h).find("no reviews after the header") != std::string::npos);
  CHECK(tsv_error("").find("empty file") != std::string::npos);
  // A two-column TSV (label, text) is fine; so is a plain .tsv with CRLF line ends.
  const auto two = write_temp("qnum_imdb_two.tsv", "label\ttext\r\n1\tgood\tstill text\r\n0\tbad\r\n");
  const auto t = read_imdb_tsv(two);
  CHECK(texts(t) == std::vector<std::string>{"good\tstill text", "bad"});
  // Corrupt and truncated gzip.
  const auto gz = read_file(kDatasetFixtures / "imdb_small" / "train.tsv.gz");
  const auto cut = write_temp("qnum_imdb_cut.tsv.gz", gz.substr(0, gz.size() / 2));
  CHECK(error_of([&] { read_imdb_tsv(cut); }).find("truncated file") != std::string::npos);
  std::string corrupt = gz;
  for (std::size_t i = 20; i < 40; ++i) corrupt[i] = static_cast<char>(0xAA);
  const auto bad_gz = write_temp("qnum_imdb_corrupt.tsv.gz", corrupt);
  CHECK(error_of([&] { read_imdb_tsv(bad_gz); }).find("gzip: " + bad_gz.string()) != std::string::npos);

  auto csv_error = [&](const std::string& body) {
    const auto p = write_temp("qnum_imdb_bad.csv", body);
    return error_of([&] { read_imdb_csv(p); });
  };
  CHECK(csv_error("review,sentiment\n\"a\nb\",positive\nx,maybe\n").find("qnum_imdb_bad.csv:4: sentiment 'maybe'") !=
        std::string::npos);
  CHECK(csv_error("review,sentiment\nok,positive\n\"never closed,negative\n").find(":3: unterminated quoted field") !=
        std::string::npos);
  CHECK(csv_error("review,sentiment\na,b,positive\n").find(":2: expected 2 fields, got 3") != std::string::npos);
  CHECK(csv_error("review,sentiment\nsay \"hi\",positive\n").find(":2: a '\"' inside an unquoted field") !=
        std::string::npos);
  CHECK(csv_error("text,stars\n").find(":1: expected a header with columns 'review' and 'sentiment'") !=
        std::string::npos);
  CHECK(csv_error("review,sentiment\n").find("no reviews after the header") != std::string::npos);
  // Column order and label spellings are free; a BOM is skipped.
  const auto swapped = write_temp("qnum_imdb_swapped.csv", "\xEF\xBB\xBFsentiment,review\n1,\"a, b\"\nneg,c\n");
  const auto s = read_imdb_csv(swapped);
  CHECK(texts(s) == std::vector<std::string>{"a, b", "c"});
  CHECK(labels(s) == std::vector<std::int64_t>{1, 0});

  // aclImdb: a bad file name and a missing folder.
  const auto root = fs::temp_directory_path() / "qnum_acl_bad";
  fs::remove_all(root);
  fs::create_directories(root / "train" / "pos");
  fs::create_directories(root / "train" / "neg");
  std::ofstream(root / "train" / "pos" / "3.txt") << "x";
  CHECK(error_of([&] { read_aclimdb(root, "train"); }).find("3.txt': file name is not <id>_<rating>.txt") !=
        std::string::npos);
  CHECK(error_of([&] { read_aclimdb(root, "test"); }).find("missing folder") != std::string::npos);
  fs::remove(root / "train" / "pos" / "3.txt");
  CHECK(error_of([&] { read_aclimdb(root, "train"); }).find("no reviews") != std::string::npos);
  fs::remove_all(root);
}

TEST_CASE("imdb: located under QNUM_DATA_DIR in each layout; a clear message otherwise") {
  const auto root = fs::temp_directory_path() / "qnum_imdb_locate";
  fs::remove_all(root);
  fs::create_directories(root / "imdb");
  EnvGuard data("QNUM_DATA_DIR", root.c_str());
  EnvGuard cache("XDG_CACHE_HOME", (root / "cache").c_str());
  const auto msg = error_of([] { locate_imdb(); });
  CHECK(msg.find("imdb: dataset not found") != std::string::npos);
  CHECK(msg.find((root / "imdb").string()) != std::string::npos);
  CHECK(msg.find("aclImdb_v1.tar.gz") != std::string::npos);
  CHECK(msg.find("text-synthetic") != std::string::npos);
  CHECK(error_of([] { locate_bert_vocab(); }).find("vocab.txt") != std::string::npos);

  fs::copy(kDatasetFixtures / "imdb_small.csv", root / "imdb" / "IMDB Dataset.csv");
  CHECK(locate_imdb().layout == ImdbFiles::Layout::csv_single);
  fs::copy(kDatasetFixtures / "aclImdb", root / "aclImdb", fs::copy_options::recursive);
  CHECK(locate_imdb().layout == ImdbFiles::Layout::aclimdb);
  fs::copy(kDatasetFixtures / "imdb_small" / "train.tsv.gz", root / "imdb" / "train.tsv.gz");
  CHECK(locate_imdb().layout == ImdbFiles::Layout::aclimdb);  // TSV needs both files
  fs::copy(kDatasetFixtures / "imdb_small" / "test.tsv.gz", root / "imdb" / "test.tsv.gz");
  CHECK(locate_imdb().layout == ImdbFiles::Layout::tsv);

  fs::create_directories(root / "bert");
  fs::copy(kDatasetFixtures / "wordpiece_vocab_small.txt", root / "bert" / "vocab.txt");
  ImdbOptions o;
  o.val_fraction = 0.25;
  o.max_length = 16;
  const auto s = load_text_dataset("imdb", o);
  CHECK(s.train.size() == 6);
  CHECK(s.val.size() == 2);
  CHECK(s.test.size() == 4);
  CHECK(s.stats.invalid_utf8 == 1);  // the \xFF in train row 2
  CHECK(s.stats.texts_with_invalid == 1);
  CHECK(s.train.max_length() <= 16);
  CHECK(s.summary().find("1 invalid UTF-8 sequence(s) in 1 text(s)") != std::string::npos);
  CHECK(error_of([] { load_text_dataset("imdb-full"); }).find("unknown text dataset 'imdb-full'") != std::string::npos);

  // Every layout gives the same token sets (the single CSV is split here instead).
  const auto tok = std::make_shared<const WordPieceTokenizer>(
      WordPieceTokenizer::from_file(kDatasetFixtures / "wordpiece_vocab_small.txt"));
  ImdbFiles acl{ImdbFiles::Layout::aclimdb, kDatasetFixtures / "aclImdb", kDatasetFixtures / "aclImdb"};
  auto [atrain, atest] = read_imdb_files(acl);
  const auto sa = prepare_text_splits(atrain, atest, tok, o, "acl");
  CHECK(sa.train.tokens == s.train.tokens);
  CHECK(sa.test.tokens == s.test.tokens);
  o.files = ImdbFiles{ImdbFiles::Layout::csv_single, root / "imdb" / "IMDB Dataset.csv", {}};
  o.files_set = true;
  auto [ctrain, ctest] = read_imdb_files(o.files, o);
  CHECK(ctrain.size() == 6);
  CHECK(ctest.size() == 6);
  fs::remove_all(root);
}

TEST_CASE("imdb: validation split is seeded, disjoint and taken from train only") {
  TextTable train, test;
  for (int i = 0; i < 200; ++i) train.rows.push_back({"review " + std::to_string(i), i % 2, 0, i});
  for (int i = 0; i < 50; ++i) test.rows.push_back({"test " + std::to_string(i), i % 2, 0, i});
  const auto tok = std::make_shared<const WordPieceTokenizer>(
      WordPieceTokenizer::from_file(kDatasetFixtures / "wordpiece_vocab_small.txt"));
  ImdbOptions o;
  o.val_fraction = 0.1;
  const auto a = prepare_text_splits(train, test, tok, o, "t");
  const auto b = prepare_text_splits(train, test, tok, o, "t");
  CHECK(a.val_rows.size() == 20);
  CHECK(a.train_rows.size() == 180);
  CHECK(a.val_rows == b.val_rows);
  std::set<std::int64_t> all(a.train_rows.begin(), a.train_rows.end());
  for (auto r : a.val_rows) CHECK(all.insert(r).second);  // disjoint
  CHECK(all.size() == 200);                               // and covering
  CHECK(a.test.size() == 50);                             // test stays test
  o.seed = 7;
  CHECK(prepare_text_splits(train, test, tok, o, "t").val_rows != a.val_rows);
  o.limit = 30;
  const auto l = prepare_text_splits(train, test, tok, o, "t");
  CHECK(l.train.size() == 30);
  CHECK(l.val.size() == 20);
  CHECK(l.test.size() == 30);
  o.val_fraction = 1.0;
  CHECK(error_of([&] { prepare_text_splits(train, test, tok, o, "t"); }).find("val_fraction 1") != std::string::npos);
  o.val_fraction = 0.1;
  CHECK(error_of([&] {
          prepare_text_splits(TextTable{{}, "empty.tsv"}, test, tok, o, "t");
        }).find("empty.tsv: empty train split") != std::string::npos);
}

TEST_CASE("text batches: dynamic padding, multiple of 8, masks, seeded order") {
  TokenDataset d;
  d.add(std::vector<std::int32_t>{2, 10, 11, 3}, 1);
  d.add(std::vector<std::int32_t>{2, 12, 3}, 0);
  d.add(std::vector<std::int32_t>{2, 13, 14, 15, 16, 17, 3}, 1);
  d.add(std::vector<std::int32_t>{2, 3}, 0);
  d.add(std::vector<std::int32_t>{2, 18, 19, 20, 21, 22, 23, 24, 25, 3}, 1);
  BatchOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  const auto it = batches(d, o);
  REQUIRE(it.size() == 3);
  const auto b0 = it[0];
  CHECK(b0.seq_len == 4);  // the longest of rows 0, 1
  CHECK(b0.input_ids == std::vector<std::int64_t>{2, 10, 11, 3, 2, 12, 3, 0});
  CHECK(b0.attention_mask == std::vector<std::int64_t>{1, 1, 1, 1, 1, 1, 1, 0});
  CHECK(b0.token_type_ids == std::vector<std::int64_t>(8, 0));
  CHECK(b0.labels == std::vector<std::int64_t>{1, 0});
  CHECK(b0.attention_mask_float() == std::vector<float>{1, 1, 1, 1, 1, 1, 1, 0});
  CHECK(it[1].seq_len == 7);
  CHECK(it[2].batch_size == 1);
  CHECK(it[2].seq_len == 10);
  o.pad_to_multiple_of = 8;
  o.pad_id = 99;
  const auto it8 = batches(d, o);
  CHECK(it8[0].seq_len == 8);
  CHECK(it8[2].seq_len == 16);
  CHECK(it8[0].input_ids[4] == 99);
  const auto b2 = it8[2];
  CHECK(std::count(b2.attention_mask.begin(), b2.attention_mask.end(), 1) == 10);
  o.drop_last = true;
  CHECK(batches(d, o).size() == 2);
  // Shuffled: each epoch a permutation, the same for the same (seed, epoch).
  o.shuffle = true;
  o.drop_last = false;
  o.seed = 3;
  std::vector<std::int64_t> e0, e0b, e1;
  for (const auto& b : batches(d, o, 0)) e0.insert(e0.end(), b.indices.begin(), b.indices.end());
  for (const auto& b : batches(d, o, 0)) e0b.insert(e0b.end(), b.indices.begin(), b.indices.end());
  for (const auto& b : batches(d, o, 1)) e1.insert(e1.end(), b.indices.begin(), b.indices.end());
  CHECK(e0 == e0b);
  CHECK(std::is_permutation(e0.begin(), e0.end(), std::vector<std::int64_t>{0, 1, 2, 3, 4}.begin()));
  CHECK(e0 != e1);
  o.batch_size = 0;
  CHECK(error_of([&] { batches(d, o); }).find("batch_size must be positive") != std::string::npos);
  o.batch_size = 2;
  o.pad_to_multiple_of = 0;
  CHECK(error_of([&] { batches(d, o); }).find("pad_to_multiple_of must be >= 1") != std::string::npos);
}

TEST_CASE("text-synthetic: seeded, balanced, nothing unknown or truncated, and not bag-of-words trivial") {
  const auto a = load_text_dataset("text-synthetic");
  const auto b = make_text_synthetic();
  CHECK(a.train.tokens == b.train.tokens);
  CHECK(a.train.size() == 4000);
  CHECK(a.val.size() == 500);
  CHECK(a.test.size() == 1000);
  CHECK(a.stats.truncated == 0);
  const auto unk = a.tokenizer->unk_id();
  CHECK(std::count(a.train.tokens.begin(), a.train.tokens.end(), unk) == 0);
  const auto c = a.train.class_counts();
  CHECK(c[0] > 1800);
  CHECK(c[1] > 1800);
  CHECK(a.tokenizer->vocab_size() < 100);
  TextSyntheticOptions o;
  o.seed = 1;
  CHECK(make_text_synthetic(o).train.tokens != a.train.tokens);
  CHECK(load_text_dataset("imdb-synthetic").test.tokens == a.test.tokens);
  // "##" pieces occur (suffixed words), and negators do.
  const auto cont = *a.tokenizer->id("##ly");
  const auto neg = *a.tokenizer->id("not");
  CHECK(std::count(a.train.tokens.begin(), a.train.tokens.end(), cont) > 50);
  CHECK(std::count(a.train.tokens.begin(), a.train.tokens.end(), neg) > 200);
  // Counting positive minus negative words (ignoring order) must be clearly wrong sometimes.
  std::set<std::int32_t> pos, negw;
  for (auto w : {"good", "great", "excellent", "wonderful", "brilliant", "enjoyable", "fun", "beautiful", "moving",
                 "superb", "loved", "charming"})
    pos.insert(*a.tokenizer->id(w));
  for (auto w :
       {"bad", "boring", "awful", "terrible", "dull", "poor", "weak", "stupid", "mess", "hated", "bland", "tedious"})
    negw.insert(*a.tokenizer->id(w));
  int right = 0;
  for (std::int64_t i = 0; i < a.train.size(); ++i) {
    int score = 0;
    for (auto t : a.train.example(i)) score += pos.count(t) - negw.count(t);
    right += (score > 0 ? 1 : 0) == a.train.labels[static_cast<std::size_t>(i)];
  }
  const double acc = static_cast<double>(right) / static_cast<double>(a.train.size());
  CHECK(acc > 0.6);   // the words carry signal...
  CHECK(acc < 0.85);  // ...but order (negation) matters
  const auto text = text_synthetic_table(3, 0, 0);
  CHECK(text.rows[0].text == text_synthetic_table(3, 0, 0).rows[0].text);
}

TEST_CASE("imdb: the real data (QNUM_DATA_DIR) loads with the expected counts") {
  const char* d = std::getenv("QNUM_DATA_DIR");
  if (!d || !*d || !find_imdb_in(d)) {
    MESSAGE("skipped: set QNUM_DATA_DIR to a folder with imdb/ and bert/vocab.txt");
    return;
  }
  ImdbOptions o;
  o.max_length = 128;
  const auto s = load_imdb(o);
  CHECK(s.train.size() == 22500);
  CHECK(s.val.size() == 2500);
  CHECK(s.test.size() == 25000);
  CHECK(s.train.class_counts()[0] + s.val.class_counts()[0] == 12500);
  CHECK(s.test.class_counts() == std::vector<std::int64_t>{12500, 12500});
  CHECK(s.stats.invalid_utf8 == 0);
  CHECK(s.train.max_length() == 128);
  CHECK(s.train.example(0).front() == 101);
  CHECK(s.train.example(0).back() == 102);
  MESSAGE(s.summary());
}
