// In-memory classification datasets and their batches: a Dataset (features [N, F] + int64
// labels), a seeded permutation, a standardiser fitted like scikit-learn's StandardScaler,
// and a deterministic batch iterator whose order depends only on (seed, epoch) — never on
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

/// How an epoch is cut into batches.
struct BatchOptions {
  std::int64_t batch_size = 256;
  bool shuffle = true;     ///< a fresh seeded order each epoch; false keeps the dataset order
  bool drop_last = false;  ///< drop a final batch smaller than batch_size
  std::uint64_t seed = 0;
};

/// One batch: features [B, F], labels and the dataset rows they came from.
struct Batch {
  Tensor features;
  std::vector<std::int64_t> labels;
  std::vector<std::int64_t> indices;
};

/// The batches of one epoch. The order is permutation(N, seed, stream = epoch), so epoch e
/// is the same whatever ran before it (resuming a run reproduces it). Holds its own copy of
/// the labels and a handle to the features, so it may outlive the Dataset it came from.
class BatchIterator {
 public:
  BatchIterator(const Dataset& d, BatchOptions options, std::uint64_t epoch)
      : features_(d.features), labels_(d.labels), options_(options) {
    qnum::detail::require(options.batch_size > 0, "batches: batch_size must be positive, got ", options.batch_size);
    if (options.shuffle) {
      order_ = permutation(d.size(), options.seed, epoch);
    } else {
      order_.resize(static_cast<std::size_t>(d.size()));
      for (std::int64_t i = 0; i < d.size(); ++i) order_[static_cast<std::size_t>(i)] = i;
    }
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
    const auto f = features_.size(1);
    Batch b;
    b.indices.assign(order_.begin() + begin, order_.begin() + end);
    std::vector<float> x(static_cast<std::size_t>((end - begin) * f));
    const float* src = features_.data();
    for (std::size_t r = 0; r < b.indices.size(); ++r) {
      std::memcpy(x.data() + r * f, src + b.indices[r] * f, static_cast<std::size_t>(f) * sizeof(float));
      b.labels.push_back(labels_[static_cast<std::size_t>(b.indices[r])]);
    }
    b.features = Tensor({end - begin, f}, std::move(x));
    return b;
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
  Tensor features_;
  std::vector<std::int64_t> labels_;
  BatchOptions options_;
  std::vector<std::int64_t> order_;
};

/// The batches of `epoch` over `d`.
inline BatchIterator batches(const Dataset& d, const BatchOptions& options, std::uint64_t epoch = 0) {
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
