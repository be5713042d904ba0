// The text-classification data layer in one include, and datasets by name: `imdb` (real
// data, see imdb.hpp) and `text-synthetic` / `imdb-synthetic` (offline, text_synthetic.hpp).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/data/text_dataset.hpp"
#include "qnum/data/text_synthetic.hpp"
#include "qnum/data/wordpiece.hpp"

namespace qnum::data {

/// Names load_text_dataset accepts.
inline constexpr std::string_view kTextDatasetNames = "imdb, text-synthetic (alias imdb-synthetic)";

/// Loads a text dataset by name. `imdb` uses `imdb` options; the synthetic set uses
/// `synthetic` (its max_length is imdb.max_length when that is smaller).
inline TextSplits load_text_dataset(std::string_view name, const ImdbOptions& imdb = {},
                                    TextSyntheticOptions synthetic = {}) {
  if (name == "imdb") return load_imdb(imdb);
  if (name == "text-synthetic" || name == "imdb-synthetic") {
    synthetic.max_length = std::min(synthetic.max_length, imdb.max_length);
    return make_text_synthetic(synthetic);
  }
  qnum::detail::fail("unknown text dataset '", name, "' (known: ", kTextDatasetNames, ")");
}

/// The tokenizer a text dataset is tokenized with (imdb: bert-base-uncased's vocabulary
/// from the data directories; text-synthetic: its own), e.g. to tokenize new texts the same
/// way as a model's training data.
inline std::shared_ptr<const WordPieceTokenizer> text_dataset_tokenizer(std::string_view name) {
  if (name == "imdb") return std::make_shared<const WordPieceTokenizer>(WordPieceTokenizer::from_file(locate_bert_vocab()));
  if (name == "text-synthetic" || name == "imdb-synthetic")
    return std::make_shared<const WordPieceTokenizer>(text_synthetic_vocab(), WordPieceOptions{},
                                                      "text-synthetic vocabulary");
  qnum::detail::fail("unknown text dataset '", name, "' (known: ", kTextDatasetNames, ")");
}

/// The class names of the text datasets (both are sentiment: 0 negative, 1 positive).
inline std::vector<std::string> text_dataset_labels() { return {"negative", "positive"}; }

}  // namespace qnum::data
