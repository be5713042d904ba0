// text-synthetic (alias imdb-synthetic): a seeded, offline sentiment set for tests and quick
// runs. Each review is 6-40 words of filler around 1-4 sentiment words; a negator ("not",
// "never", "hardly") right before a sentiment word flips it, and the label is the sign of the
// summed polarity. Word counts alone mislead on negated words, so a model must read word
// order to be right on all of them: learnable, not trivial. It has its own small WordPiece
// vocabulary (some words reach the model as "##" pieces); positive and negative are drawn
// symmetrically, so the classes are balanced up to sampling noise.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/data/text_dataset.hpp"
#include "qnum/data/wordpiece.hpp"

namespace qnum::data {

/// Sizes, seed and sequence length of text-synthetic.
struct TextSyntheticOptions {
  std::int64_t train = 4000, val = 500, test = 1000;
  std::uint64_t seed = 0;
  std::int64_t max_length = 80;  ///< longer than any review (66 tokens at most in 100,000), so none is truncated
};

namespace detail {

inline constexpr std::array<std::string_view, 36> kSynFiller{
    "the",  "movie", "film",    "plot",   "story",    "actors", "cast", "was",     "is",    "and",    "it",    "this",
    "with", "of",    "scenes",  "ending", "director", "music",  "i",    "thought", "felt",  "really", "quite", "very",
    "a",    "but",   "overall", "script", "acting",   "camera", "so",   "to",      "watch", "again",  "we",    "all"};
inline constexpr std::array<std::string_view, 12> kSynPositive{"good",      "great",     "excellent", "wonderful",
                                                               "brilliant", "enjoyable", "fun",       "beautiful",
                                                               "moving",    "superb",    "loved",     "charming"};
inline constexpr std::array<std::string_view, 12> kSynNegative{
    "bad", "boring", "awful", "terrible", "dull", "poor", "weak", "stupid", "mess", "hated", "bland", "tedious"};
inline constexpr std::array<std::string_view, 3> kSynNegators{"not", "never", "hardly"};
/// Suffixes written after some words (the vocabulary has them only as "##" pieces).
inline constexpr std::array<std::string_view, 3> kSynSuffix{"ly", "s", "est"};

/// One review and its label from the generator's stream for (split, row).
inline TextExample synthetic_review(const CounterRng& rng, std::uint64_t row) {
  std::uint64_t c = row * 256;  // counters of this row: disjoint from other rows
  auto uniform = [&](std::size_t n) { return static_cast<std::size_t>(rng.uniform(c++) * static_cast<float>(n)) % n; };
  const std::size_t words = 6 + uniform(35);
  std::size_t k = 1 + uniform(4);
  std::vector<std::string> out;
  int score = 0;
  std::vector<std::size_t> slots;  // positions (in filler words) after which a sentiment phrase goes
  for (std::size_t i = 0; i < k; ++i) slots.push_back(uniform(words + 1));
  std::sort(slots.begin(), slots.end());
  auto sentiment = [&](bool force_sign, int sign) {
    const bool positive = force_sign ? sign > 0 : uniform(2) == 1;
    const bool negate = uniform(4) == 0;
    if (negate) out.emplace_back(kSynNegators[uniform(kSynNegators.size())]);
    std::string w(positive ? kSynPositive[uniform(12)] : kSynNegative[uniform(12)]);
    if (uniform(5) == 0) w += kSynSuffix[uniform(kSynSuffix.size())];
    out.push_back(std::move(w));
    score += (positive ? 1 : -1) * (negate ? -1 : 1);
  };
  std::size_t s = 0;
  for (std::size_t i = 0; i <= words; ++i) {
    while (s < slots.size() && slots[s] == i) sentiment(false, 0), ++s;
    if (i < words) {
      std::string w(kSynFiller[uniform(kSynFiller.size())]);
      if (uniform(12) == 0) w += kSynSuffix[uniform(kSynSuffix.size())];
      out.push_back(std::move(w));
      if (uniform(10) == 0) out.emplace_back(uniform(2) ? "," : ".");
    }
  }
  if (score == 0) sentiment(true, uniform(2) ? 1 : -1);  // no ties: one more clear phrase decides
  TextExample ex;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i && out[i] != "," && out[i] != ".") ex.text += ' ';
    ex.text += out[i];
  }
  ex.text[0] = static_cast<char>(ex.text[0] - 32 * (ex.text[0] >= 'a' && ex.text[0] <= 'z'));  // cased input
  ex.text += uniform(3) == 0 ? "!" : ".";
  ex.label = score > 0 ? 1 : 0;
  ex.id = static_cast<std::int64_t>(row);
  return ex;
}

}  // namespace detail

/// The vocabulary of text-synthetic: BERT's special tokens, punctuation, every word, and
/// "##ly", "##s", "##est" continuations.
inline std::vector<std::string> text_synthetic_vocab() {
  std::vector<std::string> v{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!"};
  for (auto w : detail::kSynFiller) v.emplace_back(w);
  for (auto w : detail::kSynPositive) v.emplace_back(w);
  for (auto w : detail::kSynNegative) v.emplace_back(w);
  for (auto w : detail::kSynNegators) v.emplace_back(w);
  for (auto s : detail::kSynSuffix) v.push_back("##" + std::string(s));
  return v;
}

/// The raw reviews of one split (0 train, 1 val, 2 test) of text-synthetic.
inline TextTable text_synthetic_table(std::int64_t n, std::uint64_t seed, std::uint64_t split) {
  qnum::detail::require(n >= 0, "text-synthetic: split size must be >= 0, got ", n);
  const CounterRng rng(seed ^ (0xD1B54A32D192ED03ull * (split + 1)));
  TextTable t;
  t.source = "text-synthetic(seed=" + std::to_string(seed) + ")";
  for (std::int64_t i = 0; i < n; ++i) t.rows.push_back(detail::synthetic_review(rng, static_cast<std::uint64_t>(i)));
  return t;
}

/// text-synthetic: train/val/test token sets (each split from its own stream) and the tokenizer.
inline TextSplits make_text_synthetic(const TextSyntheticOptions& o = {}) {
  qnum::detail::require(o.train > 0 && o.val >= 0 && o.test > 0, "text-synthetic: sizes must be train > 0, val >= 0, ",
                        "test > 0; got ", o.train, ", ", o.val, ", ", o.test);
  auto tok = std::make_shared<const WordPieceTokenizer>(text_synthetic_vocab(), WordPieceOptions{},
                                                        "text-synthetic vocabulary");
  TextSplits s;
  s.tokenizer = tok;
  s.source = "text-synthetic(seed=" + std::to_string(o.seed) + ")";
  s.train = tokenize_table(text_synthetic_table(o.train, o.seed, 0), *tok, o.max_length, &s.stats);
  s.val = tokenize_table(text_synthetic_table(o.val, o.seed, 1), *tok, o.max_length, &s.stats);
  s.test = tokenize_table(text_synthetic_table(o.test, o.seed, 2), *tok, o.max_length, &s.stats);
  return s;
}

}  // namespace qnum::data
