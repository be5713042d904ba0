// Text classification data before tokenization (labelled texts, a table of them per split)
// and tokenizing a table into the TokenDataset of dataset.hpp ([CLS] ... [SEP] per example,
// no padding: batches pad dynamically).
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

}  // namespace qnum::data
