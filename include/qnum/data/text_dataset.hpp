// Text classification data after tokenization: a TokenDataset (one variable-length id
// sequence per example, [CLS] ... [SEP] included, plus a label), tokenizing a table of texts,
// and batches with dynamic padding (each batch padded to its own longest sequence, optionally
// rounded up to a multiple of 8) as the plain int64 arrays a BERT model takes: input_ids,
// attention_mask, token_type_ids [B, T] and labels [B]. Batch order depends only on
// (seed, epoch), as the feature batches of dataset.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/data/wordpiece.hpp"

namespace qnum::data {

/// One labelled text as read from a file; rating and id are the aclImdb ones when known.
struct TextExample {
  std::string text;
  std::int64_t label = 0;
  std::int32_t rating = 0;  ///< 0 = unknown
  std::int64_t id = -1;     ///< -1 = unknown
};

/// The texts of one split and where they came from.
struct TextTable {
  std::vector<TextExample> rows;
  std::string source;
  std::int64_t num_classes = 2;
  std::int64_t size() const { return static_cast<std::int64_t>(rows.size()); }
};

/// Token id sequences (CSR: tokens[offsets[i] .. offsets[i+1]) is example i) with labels.
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

/// Tokenizes every row: [CLS] text [SEP], truncated to max_length tokens (no padding).
/// Invalid UTF-8 and truncations are counted in `stats`.
inline TokenDataset tokenize_table(const TextTable& table, const WordPieceTokenizer& tok, std::int64_t max_length,
                                   TextStats* stats = nullptr) {
  qnum::detail::require(max_length >= 2, "tokenize: max_length must be >= 2 ([CLS] and [SEP]), got ", max_length);
  TokenDataset d;
  d.num_classes = table.num_classes;
  d.labels.reserve(table.rows.size());
  d.offsets.reserve(table.rows.size() + 1);
  std::vector<std::int32_t> ids;
  for (const auto& r : table.rows) {
    ids.clear();
    ids.push_back(tok.cls_id());
    tok.append_ids(r.text, ids, stats);
    if (static_cast<std::int64_t>(ids.size()) > max_length - 1) {
      ids.resize(static_cast<std::size_t>(max_length - 1));
      if (stats) ++stats->truncated;
    }
    ids.push_back(tok.sep_id());
    d.add(ids, r.label);
  }
  return d;
}

/// How an epoch of text is cut into batches.
struct TextBatchOptions {
  std::int64_t batch_size = 32;
  bool shuffle = true;     ///< a fresh seeded order each epoch; false keeps the dataset order
  bool drop_last = false;  ///< drop a final batch smaller than batch_size
  std::uint64_t seed = 0;
  std::int64_t pad_to_multiple_of = 1;  ///< e.g. 8: round each batch's length up (tensor-core friendly)
  std::int32_t pad_id = 0;              ///< [PAD] of bert-base-uncased
};

/// One batch, row-major [batch_size, seq_len]: pad positions have input_ids = pad_id and
/// attention_mask = 0; token_type_ids are 0 (single sequences).
struct TextBatch {
  std::int64_t batch_size = 0, seq_len = 0;
  std::vector<std::int64_t> input_ids, attention_mask, token_type_ids;
  std::vector<std::int64_t> labels;   ///< [batch_size]
  std::vector<std::int64_t> indices;  ///< dataset rows of the batch

  /// The mask as float (1 = attend, 0 = padding), for additive attention masks.
  std::vector<float> attention_mask_float() const { return {attention_mask.begin(), attention_mask.end()}; }
};

/// Pads the examples `rows` of `d` to a batch.
inline TextBatch make_text_batch(const TokenDataset& d, std::span<const std::int64_t> rows, std::int64_t multiple = 1,
                                 std::int32_t pad_id = 0) {
  qnum::detail::require(multiple >= 1, "batches: pad_to_multiple_of must be >= 1, got ", multiple);
  TextBatch b;
  b.batch_size = static_cast<std::int64_t>(rows.size());
  std::int64_t t = 0;
  for (auto r : rows) {
    qnum::detail::require(r >= 0 && r < d.size(), "batches: row ", r, " out of range for ", d.size(), " examples");
    t = std::max(t, d.length(r));
  }
  b.seq_len = (t + multiple - 1) / multiple * multiple;
  const auto cells = static_cast<std::size_t>(b.batch_size * b.seq_len);
  b.input_ids.assign(cells, pad_id);
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

/// The batches of one epoch over a TokenDataset; order permutation(N, seed, stream = epoch).
/// Keeps a reference to the dataset: it must outlive the iterator.
class TextBatchIterator {
 public:
  TextBatchIterator(const TokenDataset& d, TextBatchOptions options, std::uint64_t epoch)
      : data_(&d), options_(options) {
    qnum::detail::require(options.batch_size > 0, "batches: batch_size must be positive, got ", options.batch_size);
    qnum::detail::require(options.pad_to_multiple_of >= 1, "batches: pad_to_multiple_of must be >= 1, got ",
                          options.pad_to_multiple_of);
    if (options.shuffle) {
      order_ = permutation(d.size(), options.seed, epoch);
    } else {
      order_.resize(static_cast<std::size_t>(d.size()));
      for (std::int64_t i = 0; i < d.size(); ++i) order_[static_cast<std::size_t>(i)] = i;
    }
  }

  std::int64_t size() const {
    const auto n = static_cast<std::int64_t>(order_.size()), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
  }

  TextBatch operator[](std::int64_t i) const {
    qnum::detail::require(i >= 0 && i < size(), "batches: batch ", i, " out of range (", size(), " batches)");
    const auto n = static_cast<std::int64_t>(order_.size());
    const auto begin = i * options_.batch_size, end = std::min(n, begin + options_.batch_size);
    return make_text_batch(*data_,
                           std::span<const std::int64_t>(order_).subspan(static_cast<std::size_t>(begin),
                                                                         static_cast<std::size_t>(end - begin)),
                           options_.pad_to_multiple_of, options_.pad_id);
  }

  class iterator {
   public:
    iterator(const TextBatchIterator* owner, std::int64_t i) : owner_(owner), i_(i) {}
    TextBatch operator*() const { return (*owner_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const TextBatchIterator* owner_;
    std::int64_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  const TokenDataset* data_;
  TextBatchOptions options_;
  std::vector<std::int64_t> order_;
};

/// The batches of `epoch` over `d` (d must outlive the result).
inline TextBatchIterator text_batches(const TokenDataset& d, const TextBatchOptions& options, std::uint64_t epoch = 0) {
  return TextBatchIterator(d, options, epoch);
}

}  // namespace qnum::data
