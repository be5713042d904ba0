// BERT's WordPiece tokenizer, compatible with Hugging Face's BertTokenizer (the tokenizers
// library's BertNormalizer + BertPreTokenizer + WordPiece + BERT template) for uncased
// vocabularies such as bert-base-uncased:
//   1. verbatim special tokens in the raw text ([CLS], [SEP], [PAD], [UNK], [MASK]) are kept
//      whole, as Hugging Face's added-token matching does;
//   2. clean-up: NUL, U+FFFD (also from invalid UTF-8, which is counted) and control
//      characters removed, whitespace to ' ';
//   3. CJK ideographs become words of their own;
//   4. accents stripped (NFD, then Mn removed) and lower-casing, per character;
//   5. split at whitespace, punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*)
//      a token of its own;
//   6. greedy longest-match WordPiece with "##" continuations; a word longer than
//      max_input_chars_per_word (100) characters, or one that cannot be covered, is [UNK];
//   7. [CLS] A [SEP] (B [SEP]), truncation, padding, attention mask and token type ids.
// Character data: unicode.hpp (Unicode 14 tables from Python). Known differences from
// Hugging Face's tables (older Unicode in its Rust crates) concern ~800 rare code points;
// `python3 scripts/gen_unicode_tables.py --check-hf VOCAB` lists them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/data/unicode.hpp"
#include "qnum/io/atomic_file.hpp"

namespace qnum::data {

/// What tokenizing some text met; counts add up over calls.
struct TextStats {
  std::int64_t invalid_utf8 = 0;        ///< invalid UTF-8 sequences (each replaced by U+FFFD, then removed)
  std::int64_t texts_with_invalid = 0;  ///< texts that had at least one
  std::int64_t truncated = 0;           ///< encodings cut to max_length
};

/// How text is normalised (bert-base-uncased's settings by default).
struct WordPieceOptions {
  bool lower_case = true;
  std::optional<bool> strip_accents;  ///< unset: follows lower_case (as BERT)
  bool tokenize_chinese_chars = true;
  std::int64_t max_input_chars_per_word = 100;
  bool match_special_tokens = true;  ///< "[SEP]" etc. in the text are special tokens (Hugging Face's default)
};

/// How encode() builds a model input.
struct EncodeOptions {
  std::int64_t max_length = 512;  ///< total length including [CLS]/[SEP]
  bool truncation = true;         ///< cut to max_length (pairs: Hugging Face's longest_first)
  bool pad_to_max_length = false;
  bool add_special_tokens = true;
};

/// One encoded sequence: ids, mask (1 = real token) and segment ids, all the same length.
struct Encoding {
  std::vector<std::int64_t> input_ids, attention_mask, token_type_ids;
  std::int64_t truncated_tokens = 0;  ///< tokens dropped by truncation
};

namespace detail {

inline std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  const char* p = s.data();
  std::size_t n = s.size();
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

/// An open-addressing map from byte strings (views into an owned arena) to ids: no
/// allocation on lookup, one probe for most keys.
class TokenMap {
 public:
  void build(const std::vector<std::pair<std::string_view, std::int32_t>>& entries) {
    std::size_t cap = 16;
    while (cap < entries.size() * 2 + 1) cap *= 2;
    slots_.assign(cap, Slot{});
    arena_.clear();
    std::size_t total = 0;
    for (const auto& [k, v] : entries) total += k.size();
    arena_.reserve(total);
    max_len_ = 0;
    for (const auto& [k, v] : entries) {
      const auto h = hash_bytes(k);
      std::size_t i = h & (cap - 1);
      while (slots_[i].id >= 0 && key(slots_[i]) != k) i = (i + 1) & (cap - 1);
      if (slots_[i].id < 0) {
        slots_[i].offset = static_cast<std::uint32_t>(arena_.size());
        slots_[i].length = static_cast<std::uint32_t>(k.size());
        slots_[i].tag = static_cast<std::uint32_t>(h >> 32);
        arena_.append(k);
      }
      slots_[i].id = v;  // a repeated token keeps its last id (Hugging Face's vocab loading)
      max_len_ = std::max(max_len_, k.size());
    }
  }

  /// The id of `k`, or -1.
  std::int32_t find(std::string_view k) const {
    const auto h = hash_bytes(k);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.length == k.size() && std::memcmp(arena_.data() + s.offset, k.data(), k.size()) == 0)
        return s.id;
    }
  }

  std::size_t max_length() const { return max_len_; }

 private:
  struct Slot {
    std::uint32_t offset = 0, length = 0, tag = 0;
    std::int32_t id = -1;
  };
  std::string_view key(const Slot& s) const { return std::string_view(arena_).substr(s.offset, s.length); }
  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t max_len_ = 0;
};

/// ASCII classes of the clean-up and split: 0 word character, 1 removed, 2 space, 3 punct.
inline constexpr std::array<std::uint8_t, 128> kAsciiClass = [] {
  std::array<std::uint8_t, 128> t{};
  for (int c = 0; c < 32; ++c) t[c] = 1;
  t[127] = 1;
  t['\t'] = t['\n'] = t['\r'] = t[' '] = 2;
  for (int c = 33; c < 127; ++c)
    if ((c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123)) t[c] = 3;
  return t;
}();

}  // namespace detail

/// A WordPiece vocabulary with BERT's basic tokenizer in front of it. Immutable after
/// construction; every method is const and safe to call from several threads.
class WordPieceTokenizer {
 public:
  /// Largest vocab.txt read, and most tokens (lines) in it: BERT's vocabularies hold 30k-120k
  /// tokens in under 1 MB; a file far beyond is refused before it is read or split.
  static constexpr std::size_t kMaxFileBytes = std::size_t{64} << 20;
  static constexpr std::size_t kMaxTokens = std::size_t{1} << 22;

  /// Reads vocab.txt (one token per line, id = line index, trailing whitespace trimmed).
  /// Throws qnum::Error naming the file if it cannot be read, is not UTF-8, is too large
  /// (kMaxFileBytes, kMaxTokens), or lacks one of [CLS], [SEP], [UNK], [PAD].
  static WordPieceTokenizer from_file(const std::filesystem::path& vocab_file, WordPieceOptions options = {}) {
    std::error_code ec;
    qnum::detail::require(std::filesystem::is_regular_file(vocab_file, ec), "wordpiece: cannot open vocabulary file '",
                          vocab_file.string(), "'");
    return from_text(read_file(vocab_file, kMaxFileBytes), options, vocab_file.string());
  }

  /// The vocabulary of a vocab.txt already in memory (as from_file reads it); `source` names it
  /// in errors.
  static WordPieceTokenizer from_text(std::string_view text, WordPieceOptions options = {},
                                      const std::string& source = "<memory>") {
    qnum::detail::require(text.size() <= kMaxFileBytes, "wordpiece: ", source, " is larger than ", kMaxFileBytes,
                          " bytes; refused (not a vocabulary?)");
    std::vector<std::string> tokens;
    std::size_t start = 0, line = 0;
    while (start < text.size()) {
      qnum::detail::require(tokens.size() < kMaxTokens, "wordpiece: ", source, " has more than ", kMaxTokens,
                            " lines; refused (not a vocabulary?)");
      auto nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      std::string_view t(text.data() + start, nl - start);
      ++line;
      while (!t.empty() && (t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
      for (std::size_t i = 0; i < t.size();) {
        const auto c = detail::decode_utf8(reinterpret_cast<const unsigned char*>(t.data()) + i,
                                           reinterpret_cast<const unsigned char*>(t.data()) + t.size());
        qnum::detail::require(c.valid, "wordpiece: ", source, ":", line, ": invalid UTF-8 in token");
        i += c.length;
      }
      tokens.emplace_back(t);
      start = nl + 1;
    }
    return WordPieceTokenizer(std::move(tokens), options, source);
  }

  /// A tokenizer over the given tokens (id = index); `source` names them in errors.
  WordPieceTokenizer(std::vector<std::string> tokens, WordPieceOptions options = {}, std::string source = "<memory>")
      : tokens_(std::move(tokens)), options_(options), source_(std::move(source)) {
    qnum::detail::require(options_.max_input_chars_per_word > 0, "wordpiece: max_input_chars_per_word must be > 0");
    std::vector<std::pair<std::string_view, std::int32_t>> head, cont;
    head.reserve(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const std::string_view t = tokens_[i];
      head.emplace_back(t, static_cast<std::int32_t>(i));
      if (t.size() > 2 && t.substr(0, 2) == "##") cont.emplace_back(t.substr(2), static_cast<std::int32_t>(i));
    }
    head_.build(head);
    cont_.build(cont);
    auto special = [&](std::string_view name) {
      const auto id = head_.find(name);
      qnum::detail::require(id >= 0, "wordpiece: vocabulary '", source_, "' has no ", name,
                            " token (BERT needs [CLS], [SEP], [UNK] and [PAD])");
      return id;
    };
    cls_ = special("[CLS]");
    sep_ = special("[SEP]");
    unk_ = special("[UNK]");
    pad_ = special("[PAD]");
    mask_ = head_.find("[MASK]");
    for (std::string_view s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
      if (const auto id = head_.find(s); id >= 0) specials_.emplace_back(s, id);
  }

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(tokens_.size()); }
  std::int32_t cls_id() const { return cls_; }
  std::int32_t sep_id() const { return sep_; }
  std::int32_t unk_id() const { return unk_; }
  std::int32_t pad_id() const { return pad_; }
  std::int32_t mask_id() const { return mask_; }  ///< -1 when the vocabulary has no [MASK]
  const WordPieceOptions& options() const { return options_; }
  const std::string& source() const { return source_; }

  /// The token of an id (throws for an id outside the vocabulary).
  const std::string& token(std::int64_t id) const {
    qnum::detail::require(id >= 0 && id < vocab_size(), "wordpiece: id ", id, " outside the vocabulary of ",
                          vocab_size());
    return tokens_[static_cast<std::size_t>(id)];
  }
  /// The id of a token, if present.
  std::optional<std::int32_t> id(std::string_view token) const {
    const auto i = head_.find(token);
    return i >= 0 ? std::optional<std::int32_t>(i) : std::nullopt;
  }

  /// A 64-bit fingerprint of the tokens and options (for cache keys).
  std::uint64_t fingerprint() const {
    std::uint64_t h = detail::hash_bytes("qnum-wordpiece-v1");
    for (const auto& t : tokens_) h = (h ^ detail::hash_bytes(t)) * 0x100000001B3ull;
    const std::array<std::int64_t, 5> o{options_.lower_case, strip_accents(), options_.tokenize_chinese_chars,
                                        options_.max_input_chars_per_word, options_.match_special_tokens};
    return h ^ detail::hash_bytes(std::string_view(reinterpret_cast<const char*>(o.data()), sizeof(o)));
  }

  /// The words of the basic tokenizer (steps 1-5), normalised, as UTF-8 strings.
  std::vector<std::string> basic_tokenize(std::string_view text, TextStats* stats = nullptr) const {
    std::vector<std::string> out;
    for_each_word(text, stats, [&](std::string_view w, std::size_t, std::int32_t) { out.emplace_back(w); });
    return out;
  }

  /// Appends the WordPiece ids of `text` (no [CLS]/[SEP]) to `out`.
  void append_ids(std::string_view text, std::vector<std::int32_t>& out, TextStats* stats = nullptr) const {
    for_each_word(text, stats, [&](std::string_view w, std::size_t chars, std::int32_t special) {
      if (special >= 0)
        out.push_back(special);
      else
        wordpiece(w, chars, out);
    });
  }

  /// The WordPiece ids of `text` (no [CLS]/[SEP]).
  std::vector<std::int32_t> ids(std::string_view text, TextStats* stats = nullptr) const {
    std::vector<std::int32_t> out;
    append_ids(text, out, stats);
    return out;
  }

  /// The WordPiece tokens of `text` as strings ("##" continuations included).
  std::vector<std::string> tokenize(std::string_view text, TextStats* stats = nullptr) const {
    std::vector<std::string> out;
    for (auto i : ids(text, stats)) out.push_back(tokens_[static_cast<std::size_t>(i)]);
    return out;
  }

  /// [CLS] text [SEP], truncated and padded as asked.
  Encoding encode(std::string_view text, const EncodeOptions& o = {}, TextStats* stats = nullptr) const {
    auto a = ids(text, stats);
    const std::int64_t added = o.add_special_tokens ? 2 : 0;
    Encoding e;
    if (o.truncation) {
      qnum::detail::require(o.max_length >= added, "wordpiece: max_length ", o.max_length, " is shorter than the ",
                            added, " special tokens");
      const auto keep = static_cast<std::size_t>(o.max_length - added);
      if (a.size() > keep) {
        e.truncated_tokens = static_cast<std::int64_t>(a.size() - keep);
        a.resize(keep);
        if (stats) ++stats->truncated;
      }
    }
    if (o.add_special_tokens) push(e, cls_, 0);
    for (auto id : a) push(e, id, 0);
    if (o.add_special_tokens) push(e, sep_, 0);
    pad(e, o);
    return e;
  }

  /// [CLS] a [SEP] b [SEP] with segment ids 0 then 1; truncation as Hugging Face's
  /// longest_first (the shorter keeps its length when it fits in half the budget).
  Encoding encode_pair(std::string_view first, std::string_view second, const EncodeOptions& o = {},
                       TextStats* stats = nullptr) const {
    auto a = ids(first, stats), b = ids(second, stats);
    const std::int64_t added = o.add_special_tokens ? 3 : 0;
    Encoding e;
    if (o.truncation) {
      qnum::detail::require(o.max_length >= added, "wordpiece: max_length ", o.max_length, " is shorter than the ",
                            added, " special tokens");
      const std::size_t budget = static_cast<std::size_t>(o.max_length - added);
      if (a.size() + b.size() > budget) {
        std::size_t n1 = a.size(), n2 = b.size();
        const bool swap = n1 > n2;
        if (swap) std::swap(n1, n2);
        n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
        if (n1 + n2 > budget) {
          n1 = budget / 2;
          n2 = n1 + budget % 2;
        }
        if (swap) std::swap(n1, n2);
        e.truncated_tokens = static_cast<std::int64_t>(a.size() + b.size()) -
                             static_cast<std::int64_t>(std::min(n1, a.size()) + std::min(n2, b.size()));
        a.resize(std::min(n1, a.size()));
        b.resize(std::min(n2, b.size()));
        if (stats) ++stats->truncated;
      }
    }
    if (o.add_special_tokens) push(e, cls_, 0);
    for (auto id : a) push(e, id, 0);
    if (o.add_special_tokens) push(e, sep_, 0);
    for (auto id : b) push(e, id, 1);
    if (o.add_special_tokens) push(e, sep_, 1);
    pad(e, o);
    return e;
  }

  /// Calls f(word, characters, special_id) for each word of the basic tokenizer; special_id
  /// is the id of a verbatim special token (the word is then that token), else -1.
  template <class F>
  void for_each_word(std::string_view text, TextStats* stats, F&& f) const {
    bool had_invalid = false;
    Scanner<F> scan{*this, f, stats, had_invalid};
    if (!options_.match_special_tokens || specials_.empty()) {
      scan.run_text(text);
    } else {
      std::size_t begin = 0, pos = 0;
      while ((pos = text.find('[', pos)) != std::string_view::npos) {
        std::int32_t hit = -1;
        std::size_t len = 0;
        for (const auto& [s, id] : specials_)
          if (text.substr(pos, s.size()) == s) hit = id, len = s.size();
        if (hit < 0) {
          ++pos;
          continue;
        }
        scan.run_text(text.substr(begin, pos - begin));
        scan.flush();
        f(text.substr(pos, len), len, hit);
        pos = begin = pos + len;
      }
      scan.run_text(text.substr(begin));
    }
    scan.flush();
    if (had_invalid && stats) ++stats->texts_with_invalid;
  }

 private:
  bool strip_accents() const { return options_.strip_accents.value_or(options_.lower_case); }

  static void push(Encoding& e, std::int32_t id, std::int64_t type) {
    e.input_ids.push_back(id);
    e.attention_mask.push_back(1);
    e.token_type_ids.push_back(type);
  }

  void pad(Encoding& e, const EncodeOptions& o) const {
    if (!o.pad_to_max_length) return;
    while (static_cast<std::int64_t>(e.input_ids.size()) < o.max_length) {
      e.input_ids.push_back(pad_);
      e.attention_mask.push_back(0);
      e.token_type_ids.push_back(0);
    }
  }

  /// Greedy longest-match-first WordPiece of one normalised word (UTF-8, `chars` code points).
  void wordpiece(std::string_view w, std::size_t chars, std::vector<std::int32_t>& out) const {
    if (chars > static_cast<std::size_t>(options_.max_input_chars_per_word)) {
      out.push_back(unk_);
      return;
    }
    const auto mark = out.size();
    auto is_cont = [&](std::size_t i) { return (static_cast<unsigned char>(w[i]) & 0xC0) == 0x80; };
    std::size_t start = 0;
    while (start < w.size()) {
      const detail::TokenMap& map = start == 0 ? head_ : cont_;
      std::size_t end = std::min(w.size(), start + map.max_length());
      while (end > start && end < w.size() && is_cont(end)) --end;
      std::int32_t found = -1;
      while (end > start) {
        found = map.find(w.substr(start, end - start));
        if (found >= 0) break;
        --end;
        while (end > start && is_cont(end)) --end;
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back(unk_);
        return;
      }
      out.push_back(found);
      start = end;
    }
  }

  /// The basic tokenizer's state while it walks a text: the word being built (UTF-8), its
  /// length in characters, and the combining marks at its end for canonical ordering.
  template <class F>
  struct Scanner {
    const WordPieceTokenizer& tok;
    F& emit;
    TextStats* stats;
    bool& had_invalid;
    std::string word{};
    std::size_t chars = 0;
    struct Mark {
      std::size_t offset;
      std::uint8_t ccc;
    };
    std::vector<Mark> marks{};  ///< kept characters of nonzero combining class since the last starter

    void flush() {
      if (!word.empty()) emit(std::string_view(word), chars, std::int32_t{-1});
      word.clear();
      chars = 0;
      marks.clear();
    }

    void run_text(std::string_view text) {
      const auto* p = reinterpret_cast<const unsigned char*>(text.data());
      const auto* end = p + text.size();
      const bool lower = tok.options_.lower_case;
      while (p < end) {
        const unsigned b = *p;
        if (b < 0x80) {  // ASCII: one table lookup, no decomposition
          ++p;
          switch (detail::kAsciiClass[b]) {
            case 0:
              word.push_back(static_cast<char>(lower && b >= 'A' && b <= 'Z' ? b + 32 : b));
              ++chars;
              marks.clear();
              break;
            case 1:
              break;
            case 2:
              flush();
              break;
            default:
              flush();
              word.push_back(static_cast<char>(b));
              chars = 1;
              flush();
          }
          continue;
        }
        const auto c = detail::decode_utf8(p, end);
        p += c.length;
        if (!c.valid) {
          had_invalid = true;
          if (stats) ++stats->invalid_utf8;
          continue;  // U+FFFD: removed by the clean-up
        }
        code_point(c.cp);
      }
    }

    void code_point(char32_t cp) {
      const auto f = detail::char_flags(cp);
      if ((f & detail::kCharControl) || cp == 0xFFFD) return;
      if (f & detail::kCharSpace) return flush();
      const bool chinese = tok.options_.tokenize_chinese_chars && (f & detail::kCharChinese);
      if (chinese) flush();
      if (tok.strip_accents() && (f & detail::kCharDecomposes)) {
        std::array<char32_t, 4> d{};
        const auto n = detail::decompose(cp, d);
        for (std::size_t i = 0; i < n; ++i) normalized(d[i], detail::char_flags(d[i]));
      } else {
        normalized(cp, f);
      }
      if (chinese) flush();
    }

    /// A character after decomposition: drop marks, lower-case, split or append.
    void normalized(char32_t cp, std::uint8_t f) {
      const bool strip = tok.strip_accents();
      const std::uint8_t ccc = (strip && (f & detail::kCharCombining)) ? detail::combining_class(cp) : 0;
      if (strip && (f & detail::kCharMark)) {
        if (ccc == 0) marks.clear();  // a dropped starter still ends the reordering run
        return;
      }
      std::array<char32_t, 3> l{cp};
      const std::size_t n = (tok.options_.lower_case && (f & detail::kCharLower)) ? detail::to_lower(cp, l) : 1;
      for (std::size_t i = 0; i < n; ++i) {
        const auto g = l[i] == cp ? f : detail::char_flags(l[i]);
        if (g & detail::kCharSpace) {
          flush();
        } else if (g & detail::kCharPunct) {
          flush();
          detail::append_utf8(word, l[i]);
          chars = 1;
          flush();
        } else {
          append(l[i], ccc);
        }
      }
    }

    /// Appends to the word; a nonzero-class character moves before the trailing characters of
    /// higher class (NFD's canonical ordering, stable).
    void append(char32_t cp, std::uint8_t ccc) {
      ++chars;
      if (ccc == 0) {
        marks.clear();
        detail::append_utf8(word, cp);
        return;
      }
      std::size_t k = marks.size();
      while (k > 0 && marks[k - 1].ccc > ccc) --k;
      if (k == marks.size()) {
        marks.push_back({word.size(), ccc});
        detail::append_utf8(word, cp);
        return;
      }
      std::string bytes;
      detail::append_utf8(bytes, cp);
      const std::size_t at = marks[k].offset;
      word.insert(at, bytes);
      for (std::size_t j = k; j < marks.size(); ++j) marks[j].offset += bytes.size();
      marks.insert(marks.begin() + static_cast<std::ptrdiff_t>(k), Mark{at, ccc});
    }
  };

  std::vector<std::string> tokens_;
  WordPieceOptions options_;
  std::string source_;
  detail::TokenMap head_, cont_;
  std::vector<std::pair<std::string, std::int32_t>> specials_;  ///< owned: the tokenizer may be copied
  std::int32_t cls_ = -1, sep_ = -1, unk_ = -1, pad_ = -1, mask_ = -1;
};

}  // namespace qnum::data
