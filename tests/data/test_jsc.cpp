// JSC dataset: the OpenML ARFF and hls4ml-style CSV layouts (tests/fixtures/datasets, made by
// make_jsc_fixtures.py), duplicate dropping, standardisation fitted on train only, disjoint
// seeded splits, jsc-synthetic (determinism, balance, learnable), the data-location rules and
// their missing-file message, bad rows named by line, and batching.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "qnum/core/bits.hpp"
#include "qnum/data/jsc.hpp"
#include "data/helpers.hpp"
#include "env_guard.hpp"

using namespace qnum;
using namespace qnum::data;

using qnum_test::EnvGuard;
using qnum_test::kDatasetFixtures;
using qnum_test::write_temp;

namespace {

std::vector<std::uint32_t> bits_of(const Tensor& t) {
  std::vector<std::uint32_t> b;
  for (float v : t.values()) b.push_back(qnum::detail::float_bits(v));
  return b;
}

std::string jsc_error_of(const std::filesystem::path& p) {
  try {
    read_jsc_file(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string csv_header() {
  std::string h;
  for (auto n : kJscFeatureNames) h += std::string(n) + ",";
  return h + "class\n";
}

}  // namespace

TEST_CASE("jsc: the OpenML ARFF and the one-hot CSV read to the same table") {
  const auto a = read_jsc_arff(kDatasetFixtures / "jsc_small.arff");
  const auto c = read_jsc_csv(kDatasetFixtures / "jsc_small.csv");
  REQUIRE(a.features.shape() == Shape{32, 16});
  CHECK(bits_of(a.features) == bits_of(c.features));
  CHECK(a.labels == c.labels);
  // row i has class i % 5 in MASE's order g, q, w, z, t (rows 30, 31 repeat rows 3, 17)
  for (std::size_t i = 0; i < 30; ++i) CHECK(a.labels[i] == static_cast<std::int64_t>(i % 5));
  CHECK(a.labels[30] == 3);
  CHECK(a.labels[31] == 2);
  // row 1: -2.375, 0.2, 0.23, ..., mass 34.5, multiplicity 8
  const float* r1 = a.features.data() + 16;
  CHECK(r1[0] == -2.375f);
  CHECK(r1[1] == 0.2f);
  CHECK(r1[2] == 0.23f);
  CHECK(r1[14] == 34.5f);
  CHECK(r1[15] == 8.0f);
  CHECK(read_jsc_file(kDatasetFixtures / "jsc_small.arff").labels == a.labels);

  // A plain CSV with a `class` column of names (any case) or MASE-order indices.
  const auto p =
      write_temp("qnum_jsc_class.csv", csv_header() + std::string("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,T\n") +
                                           "1,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,2\n");
  const auto t = read_jsc_csv(p);
  CHECK(t.labels == std::vector<std::int64_t>{4, 2});
  CHECK(t.features.data()[16] == 1.0f);
  std::filesystem::remove(p);

  // From a stream (what the path readers call): the same table; errors name the stream.
  std::ifstream arff_file(kDatasetFixtures / "jsc_small.arff");
  std::stringstream arff_text;
  arff_text << arff_file.rdbuf();
  const auto m = read_jsc_arff(arff_text, "<memory>");
  CHECK(bits_of(m.features) == bits_of(a.features));
  CHECK(m.labels == a.labels);
  std::istringstream bad(csv_header() + "1,2\n");
  try {
    (void)read_jsc_csv(bad, "<memory>");
    FAIL("no error");
  } catch (const qnum::Error& e) {
    CHECK(std::string(e.what()) == "<memory>:2: expected 17 fields, got 2");
  }
}

TEST_CASE("jsc: malformed files name the line and the problem") {
  const std::string ok = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,g\n";
  auto check = [&](const std::string& body, const std::string& message) {
    const auto p = write_temp("qnum_jsc_bad.csv", body).string();
    CHECK(jsc_error_of(p) == p + message);
    std::filesystem::remove(p);
  };
  check(csv_header() + ok + "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,g\n", ":3: expected 17 fields, got 16");
  check(csv_header() + ok + ok + "0,1,2,x3,4,5,6,7,8,9,10,11,12,13,14,15,g\n",
        ":4: j_c1_b2_mmdt = 'x3' is not a number");
  check(csv_header() + "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,nan,g\n", ":2: j_multiplicity = 'nan' is not finite");
  check(csv_header() + "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,b\n",
        ":2: class 'b' is not one of g, q, w, z, t (or 0-4)");
  check(csv_header(), ": no data rows");
  check("", ": empty file (expected a CSV header line)");
  check("j_zlogz,j_c1_b0_mmdt,class\n1,2,g\n",
        ": missing feature column(s) j_c1_b1_mmdt, j_c1_b2_mmdt, j_c2_b1_mmdt, j_c2_b2_mmdt, j_d2_b1_mmdt, "
        "j_d2_b2_mmdt, j_d2_a1_b1_mmdt, j_d2_a1_b2_mmdt, j_m2_b1_mmdt, j_m2_b2_mmdt, j_n2_b1_mmdt, j_n2_b2_mmdt, "
        "j_mass_mmdt, j_multiplicity (JSC needs the 16 columns j_zlogz ... j_multiplicity)");
  std::string no_label = csv_header();
  no_label.replace(no_label.find("class"), 5, "kind");
  check(no_label + ok,
        ": no label column (expected 'class', 'jet_type', 'label' or 'target' with g/q/w/z/t, or the one-hot "
        "columns j_g, j_q, j_w, j_z, j_t)");

  std::string arff = "@relation x\n";
  for (auto n : kJscFeatureNames) arff += "@attribute " + std::string(n) + " numeric\n";
  arff += "@attribute class {g,q,t,w,z}\n@data\n";
  const auto p = write_temp("qnum_jsc_bad.arff", arff + ok + "0,1,2,?,4,5,6,7,8,9,10,11,12,13,14,15,g\n").string();
  CHECK(jsc_error_of(p) == p + ":21: missing value for j_c1_b2_mmdt");
  const auto q = write_temp("qnum_jsc_bad2.arff", arff + "{0 1.5, 16 g}\n").string();
  CHECK(jsc_error_of(q) == q + ":20: sparse ARFF rows are not supported");
  const auto r = write_temp("qnum_jsc_bad3.arff", "@relation x\n@attribute a numeric\n").string();
  CHECK(jsc_error_of(r) == r + ": no @data section (is this an ARFF file?)");
  for (const auto& f : {p, q, r}) std::filesystem::remove(f);
  CHECK(jsc_error_of("/nonexistent/jsc.csv") == "cannot open '/nonexistent/jsc.csv'");
}

TEST_CASE("jsc: duplicates dropped, splits disjoint and seeded, standardised on train only") {
  const auto table = read_jsc_arff(kDatasetFixtures / "jsc_small.arff");
  JscOptions o;
  o.val_fraction = 0.2;
  o.test_fraction = 0.2;
  o.seed = 7;
  const auto s = prepare_jsc(table, o, "small");
  CHECK(s.rows_read == 32);
  CHECK(s.duplicates_dropped == 2);
  CHECK(s.test.size() == 6);  // ceil(0.2 * 30)
  CHECK(s.val.size() == 6);
  CHECK(s.train.size() == 18);
  CHECK(s.train.num_features() == 16);
  CHECK(s.summary().rfind("jsc: small: 32 rows (2 duplicates dropped) -> train 18, val 6, test 6; train classes", 0) ==
        0);

  // Disjoint, covering exactly the 30 distinct rows (0..29: the repeats at 30, 31 are dropped).
  std::set<std::int64_t> all;
  for (const auto* rows : {&s.train_rows, &s.val_rows, &s.test_rows}) {
    CHECK(std::is_sorted(rows->begin(), rows->end()));
    all.insert(rows->begin(), rows->end());
  }
  CHECK(all.size() == 30);
  CHECK(*all.rbegin() == 29);

  // The scaler is the training rows' mean and population deviation, in double.
  for (std::size_t j = 0; j < 16; ++j) {
    double m = 0, v = 0;
    for (auto r : s.train_rows) m += table.features.data()[r * 16 + j];
    m /= 18;
    for (auto r : s.train_rows) v += std::pow(table.features.data()[r * 16 + j] - m, 2);
    CHECK(s.scaler.mean[j] == doctest::Approx(m).epsilon(1e-12));
    CHECK(s.scaler.scale[j] == doctest::Approx(std::sqrt(v / 18)).epsilon(1e-12));
  }
  // Train is standardised (mean 0, std 1); val and test use the train statistics, rounded
  // to float after subtracting and after dividing (as numpy's float32 StandardScaler).
  for (std::int64_t j = 0; j < 16; ++j) {
    double m = 0, v = 0;
    for (std::int64_t i = 0; i < 18; ++i) m += s.train.features.data()[i * 16 + j];
    for (std::int64_t i = 0; i < 18; ++i) v += std::pow(s.train.features.data()[i * 16 + j] - m / 18, 2);
    CHECK(std::abs(m / 18) < 1e-6);
    CHECK(std::sqrt(v / 18) == doctest::Approx(1.0).epsilon(1e-5));
  }
  for (std::size_t i = 0; i < s.test_rows.size(); ++i)
    for (std::size_t j = 0; j < 16; ++j) {
      const float raw = table.features.data()[s.test_rows[i] * 16 + j];
      const float want = static_cast<float>(static_cast<float>(raw - s.scaler.mean[j]) / s.scaler.scale[j]);
      CHECK(qnum::detail::float_bits(s.test.features.data()[i * 16 + j]) == qnum::detail::float_bits(want));
      if (j == 0) CHECK(s.test.labels[i] == table.labels[s.test_rows[i]]);
    }

  // Same seed: same split; another seed: another split.
  CHECK(prepare_jsc(table, o).test_rows == s.test_rows);
  o.seed = 8;
  CHECK(prepare_jsc(table, o).test_rows != s.test_rows);
  o.drop_duplicates = false;
  CHECK(prepare_jsc(table, o).duplicates_dropped == 0);
  o.val_fraction = 0.5;
  o.test_fraction = 0.5;
  CHECK_THROWS_WITH_AS(prepare_jsc(table, o),
                       "jsc: val_fraction 0.5 and test_fraction 0.5 must be >= 0 and sum to less than 1", Error);

  JscOptions f;
  f.file = kDatasetFixtures / "jsc_small.csv";
  const auto l = load_jsc(f);
  CHECK(l.source == f.file.string());
  CHECK(l.train.size() + l.val.size() + l.test.size() == 30);
}

TEST_CASE("jsc: files are found in QNUM_DATA_DIR, then the cache, else the error says what to do") {
  namespace fs = std::filesystem;
  const auto root = fs::temp_directory_path() / "qnum_jsc_locate";
  fs::remove_all(root);
  fs::create_directories(root / "data");
  fs::create_directories(root / "cache");
  {
    EnvGuard d("QNUM_DATA_DIR", (root / "data").c_str());
    EnvGuard c("XDG_CACHE_HOME", (root / "cache").c_str());
    const std::string msg =
        "jsc: dataset file not found: put hls4ml_lhc_jets_hlf.arff (or hls4ml_lhc_jets_hlf.csv with the 16 feature "
        "columns and a class column) in " +
        (root / "data" / "jsc").string() + "/ or " + (root / "cache" / "qnum" / "jsc").string() +
        "/; download the ARFF of OpenML dataset 42468 'hls4ml_lhc_jets_hlf' from https://www.openml.org/d/42468 (or "
        "in Python: sklearn.datasets.fetch_openml('hls4ml_lhc_jets_hlf', version=1, as_frame=True).frame.to_csv("
        "'hls4ml_lhc_jets_hlf.csv', index=False)); or use the offline set jsc-synthetic";
    CHECK_THROWS_WITH_AS(locate_jsc(), msg.c_str(), Error);
    CHECK_THROWS_WITH_AS(load_jsc(), msg.c_str(), Error);

    fs::create_directories(root / "cache" / "qnum" / "jsc");
    fs::copy_file(kDatasetFixtures / "jsc_small.csv", root / "cache" / "qnum" / "jsc" / "hls4ml_lhc_jets_hlf.csv");
    CHECK(locate_jsc() == root / "cache" / "qnum" / "jsc" / "hls4ml_lhc_jets_hlf.csv");
    fs::create_directories(root / "data" / "jsc");
    fs::copy_file(kDatasetFixtures / "jsc_small.arff", root / "data" / "jsc" / "hls4ml_lhc_jets_hlf.arff");
    CHECK(locate_jsc() == root / "data" / "jsc" / "hls4ml_lhc_jets_hlf.arff");  // QNUM_DATA_DIR first
    CHECK(load_jsc().rows_read == 32);
  }
  {
    EnvGuard d("QNUM_DATA_DIR", nullptr);
    EnvGuard c("XDG_CACHE_HOME", nullptr);
    EnvGuard h("HOME", (root / "home").c_str());
    const auto dirs = data_search_dirs();
    REQUIRE(dirs.size() == 1);
    CHECK(dirs[0] == root / "home" / ".cache" / "qnum");
    try {
      locate_jsc();
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(" (or set QNUM_DATA_DIR=<dir> and use <dir>/jsc/)") != std::string::npos);
    }
  }
  fs::remove_all(root);
}

TEST_CASE("jsc-synthetic: seeded, balanced, standardised, learnable but not trivial") {
  JscSyntheticOptions o;
  o.train = 2000;
  o.val = 500;
  o.test = 1000;
  o.seed = 3;
  const auto a = make_jsc_synthetic(o);
  const auto b = make_jsc_synthetic(o);
  CHECK(bits_of(a.train.features) == bits_of(b.train.features));
  CHECK(bits_of(a.test.features) == bits_of(b.test.features));
  CHECK(a.train.labels == b.train.labels);
  CHECK(a.source == "jsc-synthetic(seed=3)");
  CHECK(a.train.features.shape() == Shape{2000, 16});
  CHECK(a.val.features.shape() == Shape{500, 16});
  CHECK(a.train.class_counts() == std::vector<std::int64_t>(5, 400));
  CHECK(a.val.class_counts() == std::vector<std::int64_t>(5, 100));
  CHECK(a.test.class_counts() == std::vector<std::int64_t>(5, 200));

  o.seed = 4;
  const auto c = make_jsc_synthetic(o);
  CHECK(bits_of(c.train.features) != bits_of(a.train.features));
  // Each split has its own stream: a bigger train set leaves val and test as they were
  // (up to standardisation, which follows train), so compare the unstandardised draws.
  const auto raw_a = qnum::data::detail::jsc_synthetic_split(500, 3, 2);
  const auto raw_b = qnum::data::detail::jsc_synthetic_split(1000, 3, 2);
  CHECK(std::equal(raw_a.features.values().begin(), raw_a.features.values().end(), raw_b.features.values().begin()));
  CHECK(raw_a.features.values()[15] >= 1.0f);  // multiplicity: a positive integer
  CHECK(raw_a.features.values()[15] == std::round(raw_a.features.values()[15]));

  // Nearest class centroid (fitted on train) on test: far above chance (0.2), far from 1.
  std::vector<std::vector<double>> centroid(5, std::vector<double>(16, 0.0));
  for (std::int64_t i = 0; i < a.train.size(); ++i)
    for (int j = 0; j < 16; ++j) centroid[a.train.labels[i]][j] += a.train.features.data()[i * 16 + j] / 400.0;
  int correct = 0;
  for (std::int64_t i = 0; i < a.test.size(); ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int k = 0; k < 5; ++k) {
      double d = 0;
      for (int j = 0; j < 16; ++j) d += std::pow(a.test.features.data()[i * 16 + j] - centroid[k][j], 2);
      if (d < best_d) best_d = d, best = k;
    }
    correct += best == a.test.labels[i];
  }
  const double acc = correct / 1000.0;
  CAPTURE(acc);
  CHECK(acc > 0.45);
  CHECK(acc < 0.9);
  CHECK_THROWS_WITH_AS(make_jsc_synthetic({0, 1, 1, 0}),
                       "jsc-synthetic: sizes must be train > 0, val >= 0, test >= 0; got 0, 1, 1", Error);
}

TEST_CASE("batches: every sample once per epoch, seeded per epoch, drop_last") {
  const auto d = make_jsc_synthetic({103, 1, 1, 9}).train;
  BatchOptions o;
  o.batch_size = 10;
  o.seed = 5;
  const auto e0 = batches(d, o, 0);
  CHECK(e0.size() == 11);
  std::vector<std::int64_t> seen;
  for (const Batch& b : e0) {
    CHECK(b.features.size(0) == static_cast<std::int64_t>(b.indices.size()));
    CHECK(b.labels.size() == b.indices.size());
    for (std::size_t r = 0; r < b.indices.size(); ++r) {
      CHECK(b.labels[r] == d.labels[b.indices[r]]);
      CHECK(std::equal(b.features.data() + r * 16, b.features.data() + (r + 1) * 16,
                       d.features.data() + b.indices[r] * 16));
    }
    seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  }
  CHECK(e0[10].indices.size() == 3);
  auto sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> want(103);
  for (int i = 0; i < 103; ++i) want[i] = i;
  CHECK(sorted == want);
  CHECK(seen != want);  // shuffled

  // The same (seed, epoch) gives the same order, however many epochs ran before.
  CHECK(batches(d, o, 0)[4].indices == e0[4].indices);
  CHECK(batches(d, o, 1)[0].indices != e0[0].indices);
  o.seed = 6;
  CHECK(batches(d, o, 0)[0].indices != e0[0].indices);

  o.drop_last = true;
  const auto dl = batches(d, o, 2);
  CHECK(dl.size() == 10);
  std::set<std::int64_t> uniq;
  for (const Batch& b : dl) {
    CHECK(b.indices.size() == 10);
    uniq.insert(b.indices.begin(), b.indices.end());
  }
  CHECK(uniq.size() == 100);

  o.shuffle = false;
  o.drop_last = false;
  const auto in_order = batches(d, o, 3);
  CHECK(in_order[0].indices == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(in_order[10].indices == std::vector<std::int64_t>{100, 101, 102});
  CHECK_THROWS_WITH_AS(in_order[11], "batches: batch 11 out of range (11 batches)", Error);
  o.batch_size = 0;
  CHECK_THROWS_WITH_AS(batches(d, o), "batches: batch_size must be positive, got 0", Error);

  // The permutation is a permutation, and stable across calls.
  const auto p = permutation(1000, 9, 2);
  CHECK(p == permutation(1000, 9, 2));
  CHECK(std::set<std::int64_t>(p.begin(), p.end()).size() == 1000);
  CHECK(permutation(0, 1).empty());
}
