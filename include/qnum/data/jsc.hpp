// JSC, the jet-substructure classification set of the MASE labs (hls4ml LHC jets, OpenML
// 42468 "hls4ml_lhc_jets_hlf"): 16 high-level jet features, 5 classes. Reads the files users
// download (OpenML's ARFF, or a CSV with the 16 named feature columns and a class column, or
// one-hot j_g..j_t columns as in the hls4ml HDF5 table), prepares it as MASE does — drop
// duplicate rows, fit a StandardScaler on the training part only — but with a validation set
// that is really held out (MASE validates on its training set), and makes `jsc-synthetic`,
// a seeded JSC-like set for tests and offline runs.
//
// Class indices follow MASE's one-hot column order j_g, j_q, j_w, j_z, j_t: g=0, q=1, w=2,
// z=3, t=4 (the hls4ml tutorial's LabelEncoder would give alphabetical g, q, t, w, z).
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum::data {

inline constexpr std::int64_t kJscFeatures = 16;
inline constexpr std::int64_t kJscClasses = 5;

/// The 16 input features, in MASE's order (the column order of every JSC tensor).
inline constexpr std::array<std::string_view, 16> kJscFeatureNames{
    "j_zlogz",      "j_c1_b0_mmdt", "j_c1_b1_mmdt",    "j_c1_b2_mmdt",    "j_c2_b1_mmdt", "j_c2_b2_mmdt",
    "j_d2_b1_mmdt", "j_d2_b2_mmdt", "j_d2_a1_b1_mmdt", "j_d2_a1_b2_mmdt", "j_m2_b1_mmdt", "j_m2_b2_mmdt",
    "j_n2_b1_mmdt", "j_n2_b2_mmdt", "j_mass_mmdt",     "j_multiplicity"};

/// Class names by index (MASE's one-hot order): gluon, light quark, W, Z, top.
inline constexpr std::array<std::string_view, 5> kJscClassNames{"g", "q", "w", "z", "t"};

/// File names looked for under <dir>/jsc/, in order.
inline constexpr std::array<std::string_view, 2> kJscFileNames{"hls4ml_lhc_jets_hlf.arff", "hls4ml_lhc_jets_hlf.csv"};

/// A JSC file as read: features [N, 16] in kJscFeatureNames order, labels 0..4.
struct JscTable {
  Tensor features;
  std::vector<std::int64_t> labels;
};

/// Train / validation / test sets plus what preparing them did.
struct JscSplits {
  Dataset train, val, test;
  Standardizer scaler;         ///< fitted on train, applied to all three
  std::string source;          ///< the file read, or "jsc-synthetic(seed=S)"
  std::int64_t rows_read = 0;  ///< rows in the file (or generated)
  std::int64_t duplicates_dropped = 0;
  /// Row indices into the file (0 = first data row) of each split, ascending; empty for
  /// jsc-synthetic.
  std::vector<std::int64_t> train_rows, val_rows, test_rows;

  /// One line for logs: source, counts, class balance of train.
  std::string summary() const {
    std::ostringstream os;
    os << "jsc: " << source << ": " << rows_read << " rows";
    if (duplicates_dropped) os << " (" << duplicates_dropped << " duplicates dropped)";
    os << " -> train " << train.size() << ", val " << val.size() << ", test " << test.size() << "; train classes";
    const auto c = train.class_counts();
    for (std::size_t i = 0; i < c.size(); ++i) os << (i ? ", " : " ") << kJscClassNames[i] << '=' << c[i];
    return os.str();
  }
};

/// How the real set is split (fractions of the rows left after dropping duplicates).
struct JscOptions {
  double val_fraction = 0.1;
  double test_fraction = 0.2;  ///< MASE's test_size
  std::uint64_t seed = 42;     ///< MASE's random_state (the permutation itself is qnum's)
  bool drop_duplicates = true;
  std::filesystem::path file;  ///< read this file instead of searching the data directories
};

/// Sizes and seed of jsc-synthetic.
struct JscSyntheticOptions {
  std::int64_t train = 20000, val = 5000, test = 5000;
  std::uint64_t seed = 0;
};

namespace detail {

using qnum::detail::fail;
using qnum::detail::require;

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline std::string_view unquote(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// Comma-separated fields (no embedded commas: JSC files have none).
inline std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const auto pos = line.find(',', start);
    out.push_back(unquote(line.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

/// A class label: a name (g, q, w, z, t, any case) or an index 0..4 in MASE's order.
inline std::optional<std::int64_t> jsc_label(std::string_view v) {
  const std::string l = lower(v);
  for (std::size_t i = 0; i < kJscClassNames.size(); ++i)
    if (l == kJscClassNames[i]) return static_cast<std::int64_t>(i);
  if (l.size() == 1 && l[0] >= '0' && l[0] <= '4') return l[0] - '0';
  if (l.size() == 3 && l[0] >= '0' && l[0] <= '4' && l.substr(1) == ".0") return l[0] - '0';
  return std::nullopt;
}

inline std::optional<double> parse_number(std::string_view v) {
  double d = 0;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return d;
}

/// Which columns hold the features and the label.
struct JscColumns {
  std::array<std::size_t, 16> feature{};
  std::size_t label = 0;             ///< a class column, when one_hot is empty
  std::vector<std::size_t> one_hot;  ///< j_g, j_q, j_w, j_z, j_t
  std::size_t count = 0;
};

inline JscColumns jsc_columns(const std::vector<std::string>& names, std::string_view what) {
  JscColumns c;
  c.count = names.size();
  auto find = [&](std::string_view n) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (lower(names[i]) == n) return i;
    return std::nullopt;
  };
  std::string missing;
  for (std::size_t f = 0; f < kJscFeatureNames.size(); ++f) {
    const auto i = find(kJscFeatureNames[f]);
    if (i)
      c.feature[f] = *i;
    else
      missing += (missing.empty() ? "" : ", ") + std::string(kJscFeatureNames[f]);
  }
  require(missing.empty(), what, ": missing feature column(s) ", missing, " (JSC needs the 16 columns ",
          kJscFeatureNames.front(), " ... ", kJscFeatureNames.back(), ")");
  for (std::string_view n : {"class", "jet_type", "label", "target"})
    if (const auto i = find(n)) {
      c.label = *i;
      return c;
    }
  for (std::string_view n : {"j_g", "j_q", "j_w", "j_z", "j_t"})
    if (const auto i = find(n)) c.one_hot.push_back(*i);
  require(c.one_hot.size() == 5, what,
          ": no label column (expected 'class', 'jet_type', 'label' or 'target' with g/q/w/z/t, or the one-hot "
          "columns j_g, j_q, j_w, j_z, j_t)");
  return c;
}

/// Reads one data row into the table; `where` is "file:line".
inline void jsc_row(const std::vector<std::string_view>& fields, const JscColumns& c, const std::string& where,
                    std::vector<float>& x, std::vector<std::int64_t>& y) {
  require(fields.size() == c.count, where, ": expected ", c.count, " fields, got ", fields.size());
  for (std::size_t f = 0; f < 16; ++f) {
    const auto v = fields[c.feature[f]];
    require(v != "?", where, ": missing value for ", kJscFeatureNames[f]);
    const auto d = parse_number(v);
    require(d.has_value(), where, ": ", kJscFeatureNames[f], " = '", v, "' is not a number");
    require(std::isfinite(static_cast<float>(*d)), where, ": ", kJscFeatureNames[f], " = '", v, "' is not finite");
    x.push_back(static_cast<float>(*d));
  }
  if (c.one_hot.empty()) {
    const auto l = jsc_label(fields[c.label]);
    require(l.has_value(), where, ": class '", fields[c.label], "' is not one of g, q, w, z, t (or 0-4)");
    y.push_back(*l);
    return;
  }
  std::int64_t best = 0;
  double best_v = -1;
  for (std::size_t k = 0; k < 5; ++k) {  // argmax, first maximum wins (numpy's argmax)
    const auto d = parse_number(fields[c.one_hot[k]]);
    require(d.has_value(), where, ": one-hot value '", fields[c.one_hot[k]], "' is not a number");
    if (*d > best_v) best_v = *d, best = static_cast<std::int64_t>(k);
  }
  y.push_back(best);
}

// A JSC row is ~200 bytes: a longer line is not JSC data, and is refused after this many
// bytes instead of being read whole (a 1 GB line would otherwise be held, then split).
inline constexpr std::size_t kMaxJscLineBytes = std::size_t{1} << 20;

inline JscTable jsc_table(std::vector<float> x, std::vector<std::int64_t> y, std::string_view what) {
  require(!y.empty(), what, ": no data rows");
  const auto n = static_cast<std::int64_t>(y.size());
  return {Tensor({n, kJscFeatures}, std::move(x)), std::move(y)};
}

}  // namespace detail

/// Reads a JSC CSV: a header line naming the columns (any order, extra columns ignored),
/// the 16 features, and a label column (class / jet_type / label / target holding g, q,
/// w, z, t or 0-4 in that order) or the one-hot columns j_g, j_q, j_w, j_z, j_t.
/// `in` is read to its end; `what` names it in errors (a path, or "<memory>").
inline JscTable read_jsc_csv(std::istream& in, const std::string& what) {
  std::string line;
  std::size_t lineno = 0;
  std::optional<detail::JscColumns> cols;
  std::vector<float> x;
  std::vector<std::int64_t> y;
  while (read_line(in, line, detail::kMaxJscLineBytes, what + ":" + std::to_string(lineno + 1))) {
    ++lineno;
    if (detail::trim(line).empty()) continue;
    const auto fields = detail::split_commas(line);
    if (!cols) {
      std::vector<std::string> names(fields.begin(), fields.end());
      cols = detail::jsc_columns(names, what);
      continue;
    }
    detail::jsc_row(fields, *cols, what + ":" + std::to_string(lineno), x, y);
  }
  detail::require(cols.has_value(), what, ": empty file (expected a CSV header line)");
  return detail::jsc_table(std::move(x), std::move(y), what);
}

/// Reads a JSC ARFF file as OpenML serves it (dense @data; numeric features, a nominal
/// class attribute).
inline JscTable read_jsc_arff(std::istream& in, const std::string& what) {
  std::string line;
  std::size_t lineno = 0;
  std::vector<std::string> names;
  std::optional<detail::JscColumns> cols;
  std::vector<float> x;
  std::vector<std::int64_t> y;
  while (read_line(in, line, detail::kMaxJscLineBytes, what + ":" + std::to_string(lineno + 1))) {
    ++lineno;
    const auto t = detail::trim(line);
    if (t.empty() || t.front() == '%') continue;
    const std::string where = what + ":" + std::to_string(lineno);
    if (!cols) {
      detail::require(t.front() == '@', where, ": expected an ARFF @relation, @attribute or @data line");
      const std::string kw = detail::lower(t.substr(0, t.find_first_of(" \t")));
      if (kw == "@attribute") {
        auto rest = detail::trim(t.substr(10));
        std::string_view name;
        if (!rest.empty() && (rest.front() == '\'' || rest.front() == '"')) {
          const auto close = rest.find(rest.front(), 1);
          detail::require(close != std::string_view::npos, where, ": unterminated attribute name");
          name = rest.substr(1, close - 1);
        } else {
          name = rest.substr(0, rest.find_first_of(" \t"));
        }
        names.emplace_back(name);
      } else if (kw == "@data") {
        cols = detail::jsc_columns(names, what);
      } else {
        detail::require(kw == "@relation", where, ": unknown ARFF keyword ", kw);
      }
      continue;
    }
    detail::require(t.front() != '{', where, ": sparse ARFF rows are not supported");
    detail::jsc_row(detail::split_commas(t), *cols, where, x, y);
  }
  detail::require(cols.has_value(), what, ": no @data section (is this an ARFF file?)");
  return detail::jsc_table(std::move(x), std::move(y), what);
}

namespace detail {
inline std::ifstream open_jsc(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "cannot open '", path.string(), "'");
  return in;
}
}  // namespace detail

inline JscTable read_jsc_csv(const std::filesystem::path& path) {
  auto in = detail::open_jsc(path);
  return read_jsc_csv(in, path.string());
}

inline JscTable read_jsc_arff(const std::filesystem::path& path) {
  auto in = detail::open_jsc(path);
  return read_jsc_arff(in, path.string());
}

/// Reads a JSC file by extension: .arff, else CSV.
inline JscTable read_jsc_file(const std::filesystem::path& path) {
  return detail::lower(path.extension().string()) == ".arff" ? read_jsc_arff(path) : read_jsc_csv(path);
}

/// The JSC file: the first of <dir>/jsc/{hls4ml_lhc_jets_hlf.arff, .csv} over
/// data_search_dirs(); otherwise a qnum::Error saying what to put where and where to get it.
inline std::filesystem::path locate_jsc() {
  const auto dirs = data_search_dirs();
  for (const auto& d : dirs)
    for (auto name : kJscFileNames)
      if (std::filesystem::is_regular_file(d / "jsc" / name)) return d / "jsc" / name;
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : " or ") + (d / "jsc").string() + "/";
  if (where.empty()) where = "$QNUM_DATA_DIR/jsc/ (neither QNUM_DATA_DIR nor HOME is set)";
  detail::fail("jsc: dataset file not found: put hls4ml_lhc_jets_hlf.arff (or hls4ml_lhc_jets_hlf.csv with the 16 ",
               "feature columns and a class column) in ", where,
               (std::getenv("QNUM_DATA_DIR") ? "" : " (or set QNUM_DATA_DIR=<dir> and use <dir>/jsc/)"),
               "; download the ARFF of OpenML dataset 42468 'hls4ml_lhc_jets_hlf' from https://www.openml.org/d/42468",
               " (or in Python: sklearn.datasets.fetch_openml('hls4ml_lhc_jets_hlf', version=1, as_frame=True)",
               ".frame.to_csv('hls4ml_lhc_jets_hlf.csv', index=False)); or use the offline set jsc-synthetic");
}

namespace detail {

/// Row indices without exact duplicates (features and label; -0 equals +0), first kept.
inline std::vector<std::int64_t> unique_rows(const JscTable& t) {
  const auto n = static_cast<std::int64_t>(t.labels.size());
  const float* x = t.features.data();
  auto key_less = [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t j = 0; j < kJscFeatures; ++j) {
      const float u = x[a * kJscFeatures + j], v = x[b * kJscFeatures + j];
      if (u != v) return u < v;
    }
    return t.labels[a] < t.labels[b];
  };
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), key_less);
  std::vector<std::int64_t> keep;
  for (std::size_t i = 0; i < idx.size(); ++i)
    if (i == 0 || key_less(idx[i - 1], idx[i])) keep.push_back(idx[i]);  // first of each run (stable: lowest index)
  std::sort(keep.begin(), keep.end());
  return keep;
}

inline void standardize(JscSplits& s) {
  s.scaler = Standardizer::fit(s.train.features);
  s.scaler.apply(s.train.features);
  s.scaler.apply(s.val.features);
  s.scaler.apply(s.test.features);
}

}  // namespace detail

/// Prepares a read table: drops duplicate rows, splits into disjoint train/val/test by a
/// seeded permutation (test = ceil(test_fraction·N), val = ceil(val_fraction·N), rows kept in
/// file order within each split) and standardises all three with statistics of train.
inline JscSplits prepare_jsc(const JscTable& table, const JscOptions& o, std::string source = "") {
  detail::require(o.val_fraction >= 0 && o.test_fraction >= 0 && o.val_fraction + o.test_fraction < 1,
                  "jsc: ", "val_fraction ", o.val_fraction, " and test_fraction ", o.test_fraction,
                  " must be >= 0 and sum to less than 1");
  std::vector<std::int64_t> rows(table.labels.size());
  std::iota(rows.begin(), rows.end(), 0);
  if (o.drop_duplicates) rows = detail::unique_rows(table);
  const auto n = static_cast<std::int64_t>(rows.size());
  const auto n_test = static_cast<std::int64_t>(std::ceil(o.test_fraction * static_cast<double>(n)));
  const auto n_val = static_cast<std::int64_t>(std::ceil(o.val_fraction * static_cast<double>(n)));
  detail::require(n - n_test - n_val > 0, "jsc: ", n, " rows leave nothing to train on");
  const auto perm = permutation(n, o.seed);
  std::vector<std::int64_t> test, val, train;
  for (std::int64_t i = 0; i < n; ++i) (i < n_test ? test : i < n_test + n_val ? val : train).push_back(rows[perm[i]]);
  for (auto* v : {&test, &val, &train}) std::sort(v->begin(), v->end());

  const Dataset all{table.features, table.labels, kJscClasses};
  JscSplits s{all.subset(train),
              all.subset(val),
              all.subset(test),
              {},
              std::move(source),
              static_cast<std::int64_t>(table.labels.size()),
              static_cast<std::int64_t>(table.labels.size()) - n,
              train,
              val,
              test};
  detail::standardize(s);
  return s;
}

/// Loads real JSC: o.file if set, else locate_jsc(); then read and prepare_jsc.
inline JscSplits load_jsc(const JscOptions& o = {}) {
  const auto path = o.file.empty() ? locate_jsc() : o.file;
  return prepare_jsc(read_jsc_file(path), o, path.string());
}

namespace detail {

/// One synthetic split: class i % 5 for row i; latent z in R^4 from a two-component
/// Gaussian mixture per class (means fixed for all seeds, overlapping), mapped to 16
/// features with linear, non-linear and pure-noise columns on JSC-like scales.
inline Dataset jsc_synthetic_split(std::int64_t n, std::uint64_t seed, std::uint64_t split) {
  const CounterRng structure(0x15C0DA7Aull);  // the task: identical for every seed
  const CounterRng rng(seed ^ (0x9E3779B97F4A7C15ull * (split + 1)));
  std::vector<float> x(static_cast<std::size_t>(n * kJscFeatures));
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  static constexpr std::array<double, 16> scale{0.5, 0.02, 0.05, 0.1, 0.01, 0.03, 2.0,  1.5,
                                                3.0, 0.2,  0.07, 0.4, 0.6,  0.08, 25.0, 1.0};
  static constexpr std::array<double, 16> offset{3.0, 0.1, 0.05, 0.02, 0.2, 0.15, 1.5,  2.0,
                                                 4.0, 0.9, 0.3,  0.1,  0.5, 0.25, 60.0, 0.0};
  for (std::int64_t i = 0; i < n; ++i) {
    const auto c = i % kJscClasses;
    y[static_cast<std::size_t>(i)] = c;
    const std::uint64_t base = static_cast<std::uint64_t>(i) * 32;
    const int k = rng.uniform(base) < 0.6f ? 0 : 1;
    std::array<double, 4> z{};
    for (int d = 0; d < 4; ++d)
      z[d] = 1.3 * structure.normal(static_cast<std::uint64_t>((c * 2 + k) * 4 + d)) + 0.7 * rng.normal(base + d);
    auto noise = [&](int slot) { return static_cast<double>(rng.normal(base + 4 + slot)); };
    const std::array<double, 16> f{z[0] + 0.3 * noise(0),
                                   z[1] + 0.3 * noise(1),
                                   z[0] * z[1],
                                   std::abs(z[2]) + 0.2 * noise(2),
                                   std::exp(0.5 * z[3]),
                                   z[2] - z[3] + 0.3 * noise(3),
                                   std::tanh(z[0] + z[2]),
                                   z[1] * z[1] + 0.3 * noise(4),
                                   std::sin(1.5 * z[3]),
                                   noise(5),
                                   0.5 * (z[0] + z[1] + z[2] + z[3]) + 0.5 * noise(6),
                                   std::log1p(std::exp(z[1] - z[0])),
                                   z[2] * z[3],
                                   noise(7),
                                   std::exp(0.3 * z[0] + 0.2 * z[1]),
                                   std::max(1.0, std::round(20.0 + 6.0 * z[2] + 3.0 * noise(8)))};
    for (std::size_t j = 0; j < 16; ++j)
      x[static_cast<std::size_t>(i) * 16 + j] = static_cast<float>(j == 15 ? f[j] : offset[j] + scale[j] * f[j]);
  }
  return {Tensor({n, kJscFeatures}, std::move(x)), std::move(y), kJscClasses};
}

}  // namespace detail

/// jsc-synthetic: a seeded JSC-like set (16 features, 5 balanced classes) that a small MLP
/// learns well above chance but not perfectly. Each split is drawn from its own stream, so
/// changing one size leaves the other splits unchanged; standardised like the real set.
inline JscSplits make_jsc_synthetic(const JscSyntheticOptions& o = {}) {
  detail::require(o.train > 0 && o.val >= 0 && o.test >= 0, "jsc-synthetic: sizes must be train > 0, val >= 0, ",
                  "test >= 0; got ", o.train, ", ", o.val, ", ", o.test);
  JscSplits s{detail::jsc_synthetic_split(o.train, o.seed, 0),
              detail::jsc_synthetic_split(o.val, o.seed, 1),
              detail::jsc_synthetic_split(o.test, o.seed, 2),
              {},
              "jsc-synthetic(seed=" + std::to_string(o.seed) + ")",
              o.train + o.val + o.test,
              0,
              {},
              {},
              {}};
  detail::standardize(s);
  return s;
}

}  // namespace qnum::data
