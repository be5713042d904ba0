// In-memory classification datasets and their batches, one interface for both input kinds:
// a Dataset (features [N, F] + int64 labels) and a TokenDataset (tokenized text, one
// variable-length id sequence per example), a seeded permutation, a standardiser fitted like
// scikit-learn's StandardScaler, and one deterministic batch iterator (feature rows, or
// token ids with dynamic padding) whose order depends only on (seed, epoch) — never on
// threads or on how many batches were drawn before. Also where data files live:
// QNUM_DATA_DIR, then the user cache directory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum::data {

/// Features [N, F] (float32) with one class index per row.
struct Dataset {
  Tensor features;
  std::vector<std::int64_t> labels;
  std::int64_t num_classes = 0;

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  std::int64_t num_features() const { return features.defined() ? features.size(1) : 0; }

  /// The rows `indices` (in that order) as a new dataset with its own storage.
  Dataset subset(std::span<const std::int64_t> indices) const {
    const auto f = num_features();
    std::vector<float> x(indices.size() * static_cast<std::size_t>(f));
    std::vector<std::int64_t> y(indices.size());
    const float* src = features.data();
    for (std::size_t i = 0; i < indices.size(); ++i) {
      qnum::detail::require(indices[i] >= 0 && indices[i] < size(), "Dataset::subset: index ", indices[i],
                            " out of range for ", size(), " rows");
      if (f > 0) std::memcpy(x.data() + i * f, src + indices[i] * f, static_cast<std::size_t>(f) * sizeof(float));
      y[i] = labels[static_cast<std::size_t>(indices[i])];
    }
    return {Tensor({static_cast<std::int64_t>(indices.size()), f}, std::move(x)), std::move(y), num_classes};
  }

  /// How many rows carry each class.
  std::vector<std::int64_t> class_counts() const {
    std::vector<std::int64_t> c(static_cast<std::size_t>(num_classes), 0);
    for (auto l : labels) ++c[static_cast<std::size_t>(l)];
    return c;
  }
};

/// A seeded permutation of 0..n-1 (Fisher-Yates on Philox draws keyed by (seed, stream, i)).
inline std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed, std::uint64_t stream = 0) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  const CounterRng rng(seed);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto w = rng.draw(static_cast<std::uint64_t>(i), stream);
    const std::uint64_t r = (std::uint64_t{w[0]} << 32) | w[1];
    const auto j = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(i + 1));  // bias < 2^-24 for n < 2^40
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  }
  return p;
}

/// Per-feature standardisation as scikit-learn's StandardScaler: mean and population
/// standard deviation (ddof 0) accumulated in double, a zero deviation replaced by 1, and
/// `x = (x - mean) / scale` rounded to float32 after each step (numpy's in-place float32
/// arithmetic with float64 statistics).
struct Standardizer {
  std::vector<double> mean, scale;

  /// Fits on the rows of x [N, F].
  static Standardizer fit(const Tensor& x) {
    qnum::detail::require(x.rank() == 2, "Standardizer::fit: expected features [N, F], got ", to_string(x.shape()));
    const auto n = x.size(0), f = x.size(1);
    Standardizer s{std::vector<double>(static_cast<std::size_t>(f), 0.0),
                   std::vector<double>(static_cast<std::size_t>(f), 1.0)};
    if (n == 0) return s;
    const float* p = x.data();
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < f; ++j) s.mean[j] += p[i * f + j];
    for (auto& m : s.mean) m /= static_cast<double>(n);
    std::vector<double> var(static_cast<std::size_t>(f), 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < f; ++j) {
        const double d = p[i * f + j] - s.mean[j];
        var[j] += d * d;
      }
    for (std::int64_t j = 0; j < f; ++j) {
      const double sd = std::sqrt(var[j] / static_cast<double>(n));
      s.scale[j] = sd > 0 ? sd : 1.0;
    }
    return s;
  }

  /// Standardises x [N, F] in place.
  void apply(Tensor& x) const {
    qnum::detail::require(x.rank() == 2 && static_cast<std::size_t>(x.size(1)) == mean.size(),
                          "Standardizer::apply: expected features [N, ", mean.size(), "], got ", to_string(x.shape()));
    const auto f = x.size(1);
    float* p = x.data();
    for (std::int64_t i = 0; i < x.size(0); ++i)
      for (std::int64_t j = 0; j < f; ++j) {
        const float centred = static_cast<float>(p[i * f + j] - mean[j]);
        p[i * f + j] = static_cast<float>(centred / scale[j]);
      }
  }
};

/// Token id sequences (CSR: tokens[offsets[i] .. offsets[i+1]) is example i, [CLS] ... [SEP]
/// included) with one class index per example: tokenized text.
struct TokenDataset {
  std::vector<std::int32_t> tokens;
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int64_t> labels;
  std::int64_t num_classes = 2;

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  std::int64_t length(std::int64_t i) const {
    return offsets[static_cast<std::size_t>(i) + 1] - offsets[static_cast<std::size_t>(i)];
  }
  std::span<const std::int32_t> example(std::int64_t i) const {
    return std::span<const std::int32_t>(tokens).subspan(static_cast<std::size_t>(offsets[static_cast<std::size_t>(i)]),
                                                         static_cast<std::size_t>(length(i)));
  }
  void add(std::span<const std::int32_t> ids, std::int64_t label) {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    offsets.push_back(static_cast<std::int64_t>(tokens.size()));
    labels.push_back(label);
  }
  /// The examples `indices` (in that order) as a new dataset.
  TokenDataset subset(std::span<const std::int64_t> indices) const {
    TokenDataset d;
    d.num_classes = num_classes;
    for (auto i : indices) {
      qnum::detail::require(i >= 0 && i < size(), "TokenDataset::subset: index ", i, " out of range for ", size(),
                            " examples");
      d.add(example(i), labels[static_cast<std::size_t>(i)]);
    }
    return d;
  }
  std::int64_t max_length() const {
    std::int64_t m = 0;
    for (std::int64_t i = 0; i < size(); ++i) m = std::max(m, length(i));
    return m;
  }
  std::vector<std::int64_t> class_counts() const {
    std::vector<std::int64_t> c(static_cast<std::size_t>(num_classes), 0);
    for (auto l : labels) ++c[static_cast<std::size_t>(l)];
    return c;
  }
};

/// How an epoch is cut into batches.
struct BatchOptions {
  std::int64_t batch_size = 256;
  bool shuffle = true;     ///< a fresh seeded order each epoch; false keeps the dataset order
  bool drop_last = false;  ///< drop a final batch smaller than batch_size
  std::uint64_t seed = 0;
  std::int64_t pad_to_multiple_of = 1;  ///< tokens: round each batch's length up (e.g. 8, tensor-core friendly)
  std::int32_t pad_id = 0;              ///< tokens: [PAD] of bert-base-uncased
};

/// One batch of either kind. A feature table gives `features` [B, F]; tokenized text gives
/// row-major [batch_size, seq_len] input_ids, attention_mask and token_type_ids, dynamically
/// padded (pad positions have input_ids = pad_id and attention_mask = 0; token types are 0,
/// single sequences). Both give the labels and the dataset rows they came from.
struct Batch {
  Tensor features;                   ///< [B, F]; undefined for tokens
  std::int64_t batch_size = 0;       ///< rows
  std::int64_t seq_len = 0;          ///< tokens per row after padding; 0 for features
  std::vector<std::int64_t> input_ids, attention_mask, token_type_ids;
  std::vector<std::int64_t> labels;   ///< [batch_size]
  std::vector<std::int64_t> indices;  ///< dataset rows of the batch

  /// The mask as float (1 = attend, 0 = padding), for additive attention masks.
  std::vector<float> attention_mask_float() const { return {attention_mask.begin(), attention_mask.end()}; }
};

/// The rows `rows` of a feature table as a batch.
inline Batch make_batch(const Dataset& d, std::span<const std::int64_t> rows, const BatchOptions& = {}) {
  const auto f = d.num_features();
  Batch b;
  b.batch_size = static_cast<std::int64_t>(rows.size());
  b.indices.assign(rows.begin(), rows.end());
  std::vector<float> x(rows.size() * static_cast<std::size_t>(f));
  const float* src = d.features.data();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    qnum::detail::require(rows[r] >= 0 && rows[r] < d.size(), "batches: row ", rows[r], " out of range for ", d.size(),
                          " rows");
    std::memcpy(x.data() + r * f, src + rows[r] * f, static_cast<std::size_t>(f) * sizeof(float));
    b.labels.push_back(d.labels[static_cast<std::size_t>(rows[r])]);
  }
  b.features = Tensor({b.batch_size, f}, std::move(x));
  return b;
}

/// The examples `rows` of tokenized text as a batch padded to its longest example (rounded
/// up to a multiple of options.pad_to_multiple_of).
inline Batch make_batch(const TokenDataset& d, std::span<const std::int64_t> rows, const BatchOptions& options = {}) {
  const std::int64_t multiple = options.pad_to_multiple_of;
  qnum::detail::require(multiple >= 1, "batches: pad_to_multiple_of must be >= 1, got ", multiple);
  Batch b;
  b.batch_size = static_cast<std::int64_t>(rows.size());
  std::int64_t t = 0;
  for (auto r : rows) {
    qnum::detail::require(r >= 0 && r < d.size(), "batches: row ", r, " out of range for ", d.size(), " examples");
    t = std::max(t, d.length(r));
  }
  b.seq_len = (t + multiple - 1) / multiple * multiple;
  const auto cells = static_cast<std::size_t>(b.batch_size * b.seq_len);
  b.input_ids.assign(cells, options.pad_id);
  b.attention_mask.assign(cells, 0);
  b.token_type_ids.assign(cells, 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto ex = d.example(rows[i]);
    for (std::size_t j = 0; j < ex.size(); ++j) {
      b.input_ids[i * static_cast<std::size_t>(b.seq_len) + j] = ex[j];
      b.attention_mask[i * static_cast<std::size_t>(b.seq_len) + j] = 1;
    }
    b.labels.push_back(d.labels[static_cast<std::size_t>(rows[i])]);
  }
  b.indices.assign(rows.begin(), rows.end());
  return b;
}

/// The batches of one epoch over a feature table or tokenized text. The order is
/// permutation(N, seed, stream = epoch), so epoch e is the same whatever ran before it
/// (resuming a run reproduces it). A feature table is held by handle (the iterator may
/// outlive it); tokenized text by reference (it must outlive the iterator).
class BatchIterator {
 public:
  BatchIterator(const Dataset& d, BatchOptions options, std::uint64_t epoch)
      : table_(d), options_(options) {
    init(d.size(), epoch);
  }
  BatchIterator(const TokenDataset& d, BatchOptions options, std::uint64_t epoch) : text_(&d), options_(options) {
    qnum::detail::require(options.pad_to_multiple_of >= 1, "batches: pad_to_multiple_of must be >= 1, got ",
                          options.pad_to_multiple_of);
    init(d.size(), epoch);
  }

  /// Number of batches this epoch.
  std::int64_t size() const {
    const auto n = static_cast<std::int64_t>(order_.size()), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
  }

  /// Batch i of this epoch (0 <= i < size()).
  Batch operator[](std::int64_t i) const {
    qnum::detail::require(i >= 0 && i < size(), "batches: batch ", i, " out of range (", size(), " batches)");
    const auto n = static_cast<std::int64_t>(order_.size());
    const auto begin = i * options_.batch_size, end = std::min(n, begin + options_.batch_size);
    const auto rows = std::span<const std::int64_t>(order_).subspan(static_cast<std::size_t>(begin),
                                                                    static_cast<std::size_t>(end - begin));
    return text_ ? make_batch(*text_, rows, options_) : make_batch(table_, rows, options_);
  }

  /// Input iterator over the batches (range-for).
  class iterator {
   public:
    iterator(const BatchIterator* owner, std::int64_t i) : owner_(owner), i_(i) {}
    Batch operator*() const { return (*owner_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const BatchIterator* owner_;
    std::int64_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  void init(std::int64_t n, std::uint64_t epoch) {
    qnum::detail::require(options_.batch_size > 0, "batches: batch_size must be positive, got ", options_.batch_size);
    if (options_.shuffle) {
      order_ = permutation(n, options_.seed, epoch);
    } else {
      order_.resize(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) order_[static_cast<std::size_t>(i)] = i;
    }
  }

  Dataset table_;                        ///< a feature table (shares the features' storage)
  const TokenDataset* text_ = nullptr;  ///< or tokenized text
  BatchOptions options_;
  std::vector<std::int64_t> order_;
};

/// The batches of `epoch` over a feature table.
inline BatchIterator batches(const Dataset& d, const BatchOptions& options, std::uint64_t epoch = 0) {
  return BatchIterator(d, options, epoch);
}
/// The batches of `epoch` over tokenized text (d must outlive the result).
inline BatchIterator batches(const TokenDataset& d, const BatchOptions& options, std::uint64_t epoch = 0) {
  return BatchIterator(d, options, epoch);
}

/// The download cache: $QNUM_CACHE_DIR, else $XDG_CACHE_HOME/qnum, else ~/.cache/qnum;
/// nullopt when none of these variables is set.
inline std::optional<std::filesystem::path> cache_dir() {
  if (const char* c = std::getenv("QNUM_CACHE_DIR"); c && *c) return std::filesystem::path(c);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "qnum";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "qnum";
  return std::nullopt;
}

/// Where dataset files are looked for, in order: $QNUM_DATA_DIR (when set), then the
/// download cache (cache_dir()).
inline std::vector<std::filesystem::path> data_search_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* d = std::getenv("QNUM_DATA_DIR"); d && *d) dirs.emplace_back(d);
  if (auto c = cache_dir()) dirs.push_back(*c);
  return dirs;
}

}  // namespace qnum::data
