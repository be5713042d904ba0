// IMDb sentiment (Maas et al. 2011; 25,000 train + 25,000 test reviews, label 1 = positive)
// in the layouts users have:
//   - gzip TSV (qnum's shared data): header "label<TAB>rating<TAB>id<TAB>text", the text being
//     the rest of the line (it may hold tabs); plain .tsv too;
//   - the aclImdb folder tree of the Stanford archive: {train,test}/{pos,neg}/<id>_<rating>.txt;
//   - Kaggle's "IMDB Dataset.csv" (review,sentiment; RFC 4180 quoting, fields may span lines;
//     positive/negative), as one file (split here, seeded) or as train.csv + test.csv.
// `imdb` is resolved under the data directories (QNUM_DATA_DIR, then the cache) with the
// bert-base-uncased vocab at <dir>/bert/vocab.txt; load_imdb tokenizes train and test and
// holds out a seeded validation part of train (test stays test).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/data/text_dataset.hpp"
#include "qnum/data/wordpiece.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/gzip.hpp"

namespace qnum::data {

namespace detail {

using qnum::detail::fail;
using qnum::detail::require;

inline std::optional<std::int64_t> parse_int(std::string_view v) {
  std::int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty()) return std::nullopt;
  return x;
}

inline std::string ascii_lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return r;
}

inline std::string_view strip_cr(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

/// A sentiment label: 1/0, positive/negative, pos/neg (any case).
inline std::optional<std::int64_t> sentiment_label(std::string_view v) {
  const auto l = ascii_lower(v);
  if (l == "1" || l == "positive" || l == "pos") return 1;
  if (l == "0" || l == "negative" || l == "neg") return 0;
  return std::nullopt;
}

}  // namespace detail

/// Limits of the IMDb readers, far above the real files (50k reviews, ~130 MB, 4 columns),
/// so that a hostile file is refused instead of exhausting memory: its bytes (checked before
/// reading or while decompressing), its columns, and its rows (a row costs ~60 bytes beyond
/// its text, so a file of tiny rows would otherwise take many times its size).
inline constexpr std::size_t kMaxImdbBytes = std::size_t{2} << 30;
inline constexpr std::size_t kMaxImdbColumns = 64;
inline constexpr std::size_t kMaxImdbRows = std::size_t{1} << 24;

/// Parses IMDb TSV text (already decompressed): a header naming the columns, text last
/// (label and text required; rating and id optional), one review per line. `what` names the
/// source in errors, which carry the 1-based line number. More than `max_rows` reviews are
/// refused.
inline TextTable parse_imdb_tsv(std::string_view data, const std::string& what, std::size_t max_rows = kMaxImdbRows) {
  TextTable t;
  t.source = what;
  std::size_t pos = 0, lineno = 0;
  std::vector<std::string> cols;
  std::size_t label_col = 0, rating_col = SIZE_MAX, id_col = SIZE_MAX;
  while (pos < data.size()) {
    auto nl = data.find('\n', pos);
    if (nl == std::string_view::npos) nl = data.size();
    const auto line = detail::strip_cr(data.substr(pos, nl - pos));
    pos = nl + 1;
    ++lineno;
    const std::string where = what + ":" + std::to_string(lineno);
    if (cols.empty()) {
      std::size_t s = 0;
      while (true) {
        const auto tab = line.find('\t', s);
        detail::require(cols.size() < kMaxImdbColumns, where, ": more than ", kMaxImdbColumns,
                        " columns in the header; refused");
        cols.push_back(detail::ascii_lower(line.substr(s, tab == std::string_view::npos ? tab : tab - s)));
        if (tab == std::string_view::npos) break;
        s = tab + 1;
      }
      auto col = [&](std::string_view n) {
        const auto it = std::find(cols.begin(), cols.end(), n);
        return it == cols.end() ? SIZE_MAX : static_cast<std::size_t>(it - cols.begin());
      };
      detail::require(col("label") != SIZE_MAX && col("text") == cols.size() - 1, where,
                      ": expected a header line with a 'label' column and 'text' as the last column (e.g. ",
                      "label<TAB>rating<TAB>id<TAB>text), got '", qnum::detail::excerpt(line, 80), "'");
      label_col = col("label");
      rating_col = col("rating");
      id_col = col("id");
      continue;
    }
    detail::require(!line.empty(), where, ": empty line (expected ", cols.size(), " tab-separated fields)");
    std::vector<std::string_view> f;
    std::size_t s = 0;
    for (std::size_t k = 0; k + 1 < cols.size(); ++k) {
      const auto tab = line.find('\t', s);
      detail::require(tab != std::string_view::npos, where, ": expected ", cols.size(), " tab-separated fields, got ",
                      k + 1);
      f.push_back(line.substr(s, tab - s));
      s = tab + 1;
    }
    f.push_back(line.substr(s));
    TextExample ex;
    const auto l = detail::sentiment_label(f[label_col]);
    detail::require(l.has_value(), where, ": label '", qnum::detail::excerpt(f[label_col]), "' is not 0 or 1");
    ex.label = *l;
    if (rating_col != SIZE_MAX) {
      const auto r = detail::parse_int(f[rating_col]);
      detail::require(r && *r >= 1 && *r <= 10, where, ": rating '", qnum::detail::excerpt(f[rating_col]),
                      "' is not an integer 1-10");
      ex.rating = static_cast<std::int32_t>(*r);
    }
    if (id_col != SIZE_MAX) {
      const auto i = detail::parse_int(f[id_col]);
      detail::require(i && *i >= 0, where, ": id '", qnum::detail::excerpt(f[id_col]),
                      "' is not a non-negative integer");
      ex.id = *i;
    }
    ex.text = std::string(f.back());
    detail::require(t.rows.size() < max_rows, where, ": more than ", max_rows, " reviews; refused");
    t.rows.push_back(std::move(ex));
  }
  detail::require(!cols.empty(), what, ": empty file (expected a header line label<TAB>rating<TAB>id<TAB>text)");
  detail::require(!t.rows.empty(), what, ": no reviews after the header");
  return t;
}

/// Reads an IMDb TSV file, gzip-compressed or not.
inline TextTable read_imdb_tsv(const std::filesystem::path& path) {
  return parse_imdb_tsv(read_maybe_gzip(path, kMaxImdbBytes), path.string());
}

/// Parses CSV text with a header naming a review column (review/text) and a sentiment
/// column (sentiment/label: positive/negative, pos/neg, 1/0). Fields follow RFC 4180:
/// quoted fields may hold commas, doubled quotes and newlines. Errors name the line on
/// which the record starts. More than `max_rows` reviews are refused.
inline TextTable parse_imdb_csv(std::string_view data, const std::string& what, std::size_t max_rows = kMaxImdbRows) {
  TextTable t;
  t.source = what;
  std::size_t pos = 0, line = 1;
  if (data.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // UTF-8 byte-order mark (Excel)
  std::vector<std::string> header;
  std::size_t review_col = SIZE_MAX, label_col = SIZE_MAX;
  std::vector<std::string> fields;
  while (pos < data.size()) {
    const std::size_t record_line = line;
    fields.clear();
    // One record: fields separated by commas up to an unquoted newline.
    while (true) {
      std::string field;
      if (pos < data.size() && data[pos] == '"') {
        const std::size_t open_line = line;
        ++pos;
        while (true) {
          const auto q = data.find('"', pos);
          detail::require(q != std::string_view::npos, what, ":", open_line,
                          ": unterminated quoted field (a '\"' opened here is never closed)");
          const auto chunk = data.substr(pos, q - pos);
          line += static_cast<std::size_t>(std::count(chunk.begin(), chunk.end(), '\n'));
          field.append(chunk);
          pos = q + 1;
          if (pos < data.size() && data[pos] == '"') {
            field.push_back('"');
            ++pos;
            continue;
          }
          break;
        }
        detail::require(pos >= data.size() || data[pos] == ',' || data[pos] == '\n' || data[pos] == '\r', what, ":",
                        line, ": unexpected character after a closing quote (quotes inside a field must be doubled)");
      } else {
        const auto stop = data.find_first_of(",\n", pos);
        const auto end = stop == std::string_view::npos ? data.size() : stop;
        auto raw = data.substr(pos, end - pos);
        if (stop == std::string_view::npos || data[stop] == '\n') raw = detail::strip_cr(raw);
        detail::require(raw.find('"') == std::string_view::npos, what, ":", line,
                        ": a '\"' inside an unquoted field (quote the field and double the quote)");
        field.assign(raw);
        pos = end;
      }
      detail::require(fields.size() < kMaxImdbColumns, what, ":", record_line, ": more than ", kMaxImdbColumns,
                      " fields; refused");
      fields.push_back(std::move(field));
      if (pos < data.size() && data[pos] == '\r') ++pos;
      if (pos >= data.size()) break;
      if (data[pos] == ',') {
        ++pos;
        continue;
      }
      ++pos;  // '\n'
      ++line;
      break;
    }
    const std::string where = what + ":" + std::to_string(record_line);
    if (header.empty()) {
      for (auto& f : fields) header.push_back(detail::ascii_lower(f));
      auto col = [&](std::initializer_list<std::string_view> names) {
        for (auto n : names)
          if (auto it = std::find(header.begin(), header.end(), n); it != header.end())
            return static_cast<std::size_t>(it - header.begin());
        return SIZE_MAX;
      };
      review_col = col({"review", "text"});
      label_col = col({"sentiment", "label"});
      detail::require(review_col != SIZE_MAX && label_col != SIZE_MAX, where,
                      ": expected a header with columns 'review' and 'sentiment' (Kaggle's IMDB Dataset.csv), got '",
                      qnum::detail::excerpt(data.substr(0, data.find('\n')), 80), "'");
      continue;
    }
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
    detail::require(fields.size() == header.size(), where, ": expected ", header.size(), " fields, got ",
                    fields.size());
    const auto l = detail::sentiment_label(fields[label_col]);
    detail::require(l.has_value(), where, ": sentiment '", qnum::detail::excerpt(fields[label_col]),
                    "' is not positive or negative");
    detail::require(t.rows.size() < max_rows, where, ": more than ", max_rows, " reviews; refused");
    t.rows.push_back({std::move(fields[review_col]), *l, 0, -1});
  }
  detail::require(!header.empty(), what, ": empty file (expected a header line review,sentiment)");
  detail::require(!t.rows.empty(), what, ": no reviews after the header");
  return t;
}

/// Reads a Kaggle-style IMDb CSV file (gzip-compressed or not).
inline TextTable read_imdb_csv(const std::filesystem::path& path) {
  return parse_imdb_csv(read_maybe_gzip(path, kMaxImdbBytes), path.string());
}

/// The id and rating of an aclImdb review's file name "<id>_<rating>.txt" (id >= 0, rating
/// 1-10, both decimal), or nothing if it is not one.
inline std::optional<std::pair<std::int64_t, std::int32_t>> parse_aclimdb_name(std::string_view file_name) {
  if (!file_name.ends_with(".txt")) return std::nullopt;
  const auto stem = file_name.substr(0, file_name.size() - 4);
  const auto us = stem.find('_');
  if (us == std::string_view::npos) return std::nullopt;
  const auto id = detail::parse_int(stem.substr(0, us));
  const auto rating = detail::parse_int(stem.substr(us + 1));
  if (!id || *id < 0 || !rating || *rating < 1 || *rating > 10) return std::nullopt;
  return std::pair{*id, static_cast<std::int32_t>(*rating)};
}

/// Reads one split of the aclImdb tree: <root>/<split>/{neg,pos}/<id>_<rating>.txt, negatives
/// first, each by id (the TSV's order). Other entries (unsup/, urls_*.txt, .feat) are ignored.
inline TextTable read_aclimdb(const std::filesystem::path& root, std::string_view split) {
  namespace fs = std::filesystem;
  TextTable t;
  t.source = (root / split).string();
  std::size_t text_bytes = 0;
  for (const auto& [dir, label] : {std::pair<const char*, std::int64_t>{"neg", 0}, {"pos", 1}}) {
    const fs::path d = root / split / dir;
    detail::require(fs::is_directory(d), "aclImdb: missing folder '", d.string(),
                    "' (expected <root>/{train,test}/{pos,neg}/<id>_<rating>.txt)");
    std::vector<std::tuple<std::int64_t, std::int32_t, fs::path>> files;  // id, rating, path
    for (const auto& e : fs::directory_iterator(d)) {
      if (!e.is_regular_file() || e.path().extension() != ".txt") continue;
      const auto name = parse_aclimdb_name(e.path().filename().string());
      detail::require(name.has_value(), "aclImdb: '", e.path().string(),
                      "': file name is not <id>_<rating>.txt with a rating 1-10");
      detail::require(files.size() < kMaxImdbRows, "aclImdb: more than ", kMaxImdbRows, " reviews in '", d.string(),
                      "'; refused");
      files.emplace_back(name->first, name->second, e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& [id, rating, p] : files) {
      TextExample ex;
      ex.text = read_file(p, kMaxImdbBytes - text_bytes);  // the split's reviews together
      text_bytes += ex.text.size();
      ex.label = label;
      ex.id = id;
      ex.rating = rating;
      t.rows.push_back(std::move(ex));
    }
  }
  detail::require(!t.rows.empty(), "aclImdb: no reviews under '", t.source, "'");
  return t;
}

/// Where the IMDb files are, in one of the layouts.
struct ImdbFiles {
  enum class Layout { tsv, aclimdb, csv_pair, csv_single } layout = Layout::tsv;
  std::filesystem::path train, test;  ///< files (tsv, csv_pair), the aclImdb root, or the single CSV (in train)
  std::string describe() const {
    switch (layout) {
      case Layout::tsv:
        return train.string() + " + " + test.string();
      case Layout::aclimdb:
        return train.string() + " (aclImdb)";
      case Layout::csv_pair:
        return train.string() + " + " + test.string();
      case Layout::csv_single:
        return train.string() + " (split into train/test here)";
    }
    return train.string();
  }
};

/// The IMDb files under `dir` (a data directory: looks in dir/imdb/ and dir/aclImdb), if any.
inline std::optional<ImdbFiles> find_imdb_in(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  using L = ImdbFiles::Layout;
  const fs::path d = dir / "imdb";
  for (const char* ext : {".tsv.gz", ".tsv"})
    if (fs::is_regular_file(d / (std::string("train") + ext)) && fs::is_regular_file(d / (std::string("test") + ext)))
      return ImdbFiles{L::tsv, d / (std::string("train") + ext), d / (std::string("test") + ext)};
  for (const fs::path& root : {d / "aclImdb", dir / "aclImdb", d})
    if (fs::is_directory(root / "train" / "pos") && fs::is_directory(root / "test" / "pos"))
      return ImdbFiles{L::aclimdb, root, root};
  if (fs::is_regular_file(d / "train.csv") && fs::is_regular_file(d / "test.csv"))
    return ImdbFiles{L::csv_pair, d / "train.csv", d / "test.csv"};
  for (const char* name : {"IMDB Dataset.csv", "imdb.csv"})
    if (fs::is_regular_file(d / name)) return ImdbFiles{L::csv_single, d / name, {}};
  return std::nullopt;
}

/// Finds IMDb over data_search_dirs(); otherwise a qnum::Error saying what to put where.
inline ImdbFiles locate_imdb() {
  const auto dirs = data_search_dirs();
  for (const auto& d : dirs)
    if (auto f = find_imdb_in(d)) return *f;
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : " or ") + (d / "imdb").string() + "/";
  if (where.empty()) where = "$QNUM_DATA_DIR/imdb/ (neither QNUM_DATA_DIR nor HOME is set)";
  qnum::detail::fail(
      "imdb: dataset not found: put train.tsv.gz and test.tsv.gz (label<TAB>rating<TAB>id<TAB>text), or the "
      "extracted aclImdb/ folder of https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz, or Kaggle's "
      "'IMDB Dataset.csv' (review,sentiment) in ",
      where, (std::getenv("QNUM_DATA_DIR") ? "" : " (or set QNUM_DATA_DIR=<dir> and use <dir>/imdb/)"),
      "; or run `qnum download imdb`; or use the offline set text-synthetic");
}

/// The BERT vocabulary: <dir>/bert/vocab.txt over data_search_dirs(), else an error.
inline std::filesystem::path locate_bert_vocab() {
  const auto dirs = data_search_dirs();
  for (const auto& d : dirs)
    if (std::filesystem::is_regular_file(d / "bert" / "vocab.txt")) return d / "bert" / "vocab.txt";
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : " or ") + (d / "bert").string() + "/";
  if (where.empty()) where = "$QNUM_DATA_DIR/bert/";
  qnum::detail::fail("imdb: BERT vocabulary not found: put bert-base-uncased's vocab.txt (30,522 tokens, from ",
                     "https://huggingface.co/bert-base-uncased/resolve/main/vocab.txt) in ", where,
                     ", or load a pretrained model that has one (--load bert-tiny downloads prajjwal1/bert-tiny)");
}

/// How IMDb is loaded.
struct ImdbOptions {
  std::int64_t max_length = 512;   ///< tokens per review incl. [CLS]/[SEP] (the tokenizer's model maximum)
  double val_fraction = 0.1;       ///< of train, held out (0 = no validation set)
  std::uint64_t seed = 42;         ///< the validation split (and a single CSV's test split)
  double csv_test_fraction = 0.5;  ///< a single Kaggle CSV is split this way (its 50,000 = 25,000 + 25,000)
  std::int64_t limit = 0;          ///< > 0: keep only the first `limit` rows of each split after shuffling (quick runs)
  ImdbFiles files{};               ///< used when `files_set`; else locate_imdb()
  bool files_set = false;
  std::filesystem::path vocab;  ///< empty: locate_bert_vocab()
};

/// Train / validation / test token sets plus what loading them met.
struct TextSplits {
  TokenDataset train, val, test;
  std::shared_ptr<const WordPieceTokenizer> tokenizer;
  std::string source;
  TextStats stats;  ///< over all three splits
  /// Rows of the source train table in val and train (ascending), for checking disjointness.
  std::vector<std::int64_t> train_rows, val_rows;

  std::string summary() const {
    std::ostringstream os;
    os << source << " -> train " << train.size() << ", val " << val.size() << ", test " << test.size();
    const auto c = train.class_counts();
    os << "; train classes";
    for (std::size_t i = 0; i < c.size(); ++i) os << (i ? ", " : " ") << i << '=' << c[i];
    if (stats.truncated) os << "; " << stats.truncated << " truncated";
    if (stats.invalid_utf8)
      os << "; " << stats.invalid_utf8 << " invalid UTF-8 sequence(s) in " << stats.texts_with_invalid
         << " text(s) replaced by U+FFFD and removed";
    return os.str();
  }
};

/// Splits a read train table into train + validation by a seeded permutation (val =
/// round(val_fraction * N) rows; rows kept in file order within each), tokenizes both and
/// the test table.
inline TextSplits prepare_text_splits(const TextTable& train_table, const TextTable& test_table,
                                      std::shared_ptr<const WordPieceTokenizer> tok, const ImdbOptions& o,
                                      std::string source) {
  qnum::detail::require(o.val_fraction >= 0 && o.val_fraction < 1, "imdb: val_fraction ", o.val_fraction,
                        " must be in [0, 1)");
  qnum::detail::require(tok != nullptr, "imdb: no tokenizer");
  TextSplits s;
  s.tokenizer = tok;
  s.source = std::move(source);
  const auto n = train_table.size();
  qnum::detail::require(n > 0, "imdb: ", train_table.source, ": empty train split");
  qnum::detail::require(test_table.size() > 0, "imdb: ", test_table.source, ": empty test split");
  const auto n_val = static_cast<std::int64_t>(o.val_fraction * static_cast<double>(n) + 0.5);
  qnum::detail::require(n - n_val > 0, "imdb: ", n, " training reviews leave nothing to train on");
  const auto perm = permutation(n, o.seed, 0x1D8);
  for (std::int64_t i = 0; i < n; ++i) (i < n_val ? s.val_rows : s.train_rows).push_back(perm[i]);
  if (o.limit > 0) {
    if (static_cast<std::int64_t>(s.train_rows.size()) > o.limit)
      s.train_rows.resize(static_cast<std::size_t>(o.limit));
    if (static_cast<std::int64_t>(s.val_rows.size()) > o.limit) s.val_rows.resize(static_cast<std::size_t>(o.limit));
  }
  std::sort(s.train_rows.begin(), s.train_rows.end());
  std::sort(s.val_rows.begin(), s.val_rows.end());
  const auto all = tokenize_table(train_table, *tok, o.max_length, &s.stats);
  s.train = all.subset(s.train_rows);
  s.val = all.subset(s.val_rows);
  if (o.limit > 0 && test_table.size() > o.limit) {
    const auto tp = permutation(test_table.size(), o.seed, 0x7E57);
    TextTable small;
    small.source = test_table.source;
    small.num_classes = test_table.num_classes;
    std::vector<std::int64_t> rows(tp.begin(), tp.begin() + o.limit);
    std::sort(rows.begin(), rows.end());
    for (auto r : rows) small.rows.push_back(test_table.rows[static_cast<std::size_t>(r)]);
    s.test = tokenize_table(small, *tok, o.max_length, &s.stats);
  } else {
    s.test = tokenize_table(test_table, *tok, o.max_length, &s.stats);
  }
  return s;
}

/// Reads the train and test tables of `files`.
inline std::pair<TextTable, TextTable> read_imdb_files(const ImdbFiles& f, const ImdbOptions& o = {}) {
  using L = ImdbFiles::Layout;
  switch (f.layout) {
    case L::tsv:
      return {read_imdb_tsv(f.train), read_imdb_tsv(f.test)};
    case L::aclimdb:
      return {read_aclimdb(f.train, "train"), read_aclimdb(f.train, "test")};
    case L::csv_pair:
      return {read_imdb_csv(f.train), read_imdb_csv(f.test)};
    case L::csv_single: {
      auto all = read_imdb_csv(f.train);
      qnum::detail::require(o.csv_test_fraction > 0 && o.csv_test_fraction < 1, "imdb: csv_test_fraction ",
                            o.csv_test_fraction, " must be in (0, 1)");
      const auto n = all.size();
      const auto n_test = static_cast<std::int64_t>(o.csv_test_fraction * static_cast<double>(n) + 0.5);
      qnum::detail::require(n_test > 0 && n_test < n, "imdb: ", f.train.string(), ": ", n,
                            " reviews are too few to split into train and test");
      const auto perm = permutation(n, o.seed, 0xC5F);
      std::vector<std::int64_t> test_rows(perm.begin(), perm.begin() + n_test),
          train_rows(perm.begin() + n_test, perm.end());
      std::sort(test_rows.begin(), test_rows.end());
      std::sort(train_rows.begin(), train_rows.end());
      TextTable train, test;
      train.source = test.source = all.source;
      for (auto r : train_rows) train.rows.push_back(std::move(all.rows[static_cast<std::size_t>(r)]));
      for (auto r : test_rows) test.rows.push_back(std::move(all.rows[static_cast<std::size_t>(r)]));
      return {std::move(train), std::move(test)};
    }
  }
  qnum::detail::fail("imdb: unknown layout");
}

/// Loads IMDb: locates (or takes o.files), reads, tokenizes with the BERT vocabulary and
/// splits. Throws qnum::Error naming the file and line of any malformed row.
inline TextSplits load_imdb(const ImdbOptions& o = {}) {
  const ImdbFiles files = o.files_set ? o.files : locate_imdb();
  const auto vocab = o.vocab.empty() ? locate_bert_vocab() : o.vocab;
  auto tok = std::make_shared<const WordPieceTokenizer>(WordPieceTokenizer::from_file(vocab));
  auto [train, test] = read_imdb_files(files, o);
  return prepare_text_splits(train, test, std::move(tok), o, "imdb: " + files.describe());
}

}  // namespace qnum::data
