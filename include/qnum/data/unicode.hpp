// The Unicode that BERT's basic tokenizer needs: UTF-8 decoding with U+FFFD replacement of
// invalid sequences (one per maximal invalid subpart, as Python's and Rust's decoders),
// character classes (control, whitespace, punctuation, non-spacing mark, CJK ideograph),
// canonical combining classes, canonical decomposition (NFD, Hangul arithmetically) and
// per-character lower-casing. The data are generated tables (unicode_tables.hpp, from
// scripts/gen_unicode_tables.py); the Basic Multilingual Plane's classes are cached in a
// 64 KiB table built on first use, so a lookup is one load.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "qnum/data/unicode_tables.hpp"

namespace qnum::data::detail {

/// One decoded code point: U+FFFD with valid == false for an invalid sequence, whose
/// `length` bytes (>= 1) are the maximal subpart replaced.
struct Utf8Char {
  char32_t cp;
  std::uint8_t length;
  bool valid;
};

/// Decodes the code point at p (p < end). Invalid input follows the Unicode "maximal subpart"
/// practice (W3C / Python's errors="replace"): a lead byte followed by fewer continuation
/// bytes than it needs, or by a byte outside its allowed range (overlongs, surrogates,
/// > U+10FFFF), is one U+FFFD covering the valid prefix; a stray byte is one U+FFFD.
inline Utf8Char decode_utf8(const unsigned char* p, const unsigned char* end) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) return {b0, 1, true};
  auto cont = [&](std::ptrdiff_t i, unsigned lo, unsigned hi) { return p + i < end && p[i] >= lo && p[i] <= hi; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!cont(1, 0x80, 0xBF)) return {0xFFFD, 1, false};
    return {static_cast<char32_t>(((b0 & 0x1F) << 6) | (p[1] & 0x3F)), 2, true};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (!cont(1, lo, hi)) return {0xFFFD, 1, false};
    if (!cont(2, 0x80, 0xBF)) return {0xFFFD, 2, false};
    return {static_cast<char32_t>(((b0 & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F)), 3, true};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (!cont(1, lo, hi)) return {0xFFFD, 1, false};
    if (!cont(2, 0x80, 0xBF)) return {0xFFFD, 2, false};
    if (!cont(3, 0x80, 0xBF)) return {0xFFFD, 3, false};
    return {static_cast<char32_t>(((b0 & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F)),
            4, true};
  }
  return {0xFFFD, 1, false};  // 0x80-0xC1 (continuation or overlong lead), 0xF5-0xFF
}

/// Appends cp as UTF-8.
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// Character class bits of char_flags().
enum CharFlag : std::uint8_t {
  kCharControl = 1,      ///< removed by the clean-up (Cc, Cf, Co, Cs but tab/newline/CR)
  kCharSpace = 2,        ///< a word boundary
  kCharPunct = 4,        ///< a token of its own
  kCharMark = 8,         ///< Mn: dropped when accents are stripped
  kCharChinese = 16,     ///< a CJK ideograph (BERT's ranges): a word of its own
  kCharDecomposes = 32,  ///< has a canonical decomposition
  kCharLower = 64,       ///< lower-casing changes it
  kCharCombining = 128   ///< nonzero canonical combining class
};

template <class R, std::size_t N>
bool in_ranges(const R (&table)[N], char32_t cp) {
  const auto it =
      std::upper_bound(std::begin(table), std::end(table), cp, [](char32_t c, const R& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

/// BERT's CJK ideograph ranges (its _is_chinese_char; Hangul and kana are not included).
inline bool is_cjk_ideograph(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

inline bool is_hangul_syllable(char32_t cp) { return cp >= 0xAC00 && cp <= 0xD7A3; }

inline const ucd::Decomposition* find_decomposition(char32_t cp) {
  const auto* b = std::begin(ucd::kDecomposition);
  const auto* e = std::end(ucd::kDecomposition);
  const auto* it = std::lower_bound(b, e, cp, [](const ucd::Decomposition& d, char32_t c) { return d.cp < c; });
  return it != e && it->cp == cp ? it : nullptr;
}

inline const ucd::LowerRun* find_lower_run(char32_t cp) {
  const auto* b = std::begin(ucd::kLower);
  const auto* e = std::end(ucd::kLower);
  const auto* it = std::upper_bound(b, e, cp, [](char32_t c, const ucd::LowerRun& r) { return c < r.first; });
  if (it == b) return nullptr;
  --it;
  return cp <= it->last && (cp - it->first) % it->stride == 0 ? it : nullptr;
}

/// Canonical combining class (0 for most characters).
inline std::uint8_t combining_class(char32_t cp) {
  const auto* b = std::begin(ucd::kCombiningClass);
  const auto* e = std::end(ucd::kCombiningClass);
  const auto* it = std::upper_bound(b, e, cp, [](char32_t c, const ucd::CccRange& r) { return c < r.first; });
  return it != b && cp <= std::prev(it)->last ? std::prev(it)->ccc : 0;
}

inline std::uint8_t compute_char_flags(char32_t cp) {
  std::uint8_t f = 0;
  if (in_ranges(ucd::kControl, cp)) f |= kCharControl;
  if (in_ranges(ucd::kSpace, cp)) f |= kCharSpace;
  if (in_ranges(ucd::kPunct, cp)) f |= kCharPunct;
  if (in_ranges(ucd::kNonspacingMark, cp)) f |= kCharMark;
  if (is_cjk_ideograph(cp)) f |= kCharChinese;
  if (is_hangul_syllable(cp) || find_decomposition(cp)) f |= kCharDecomposes;
  if (find_lower_run(cp) || cp == 0x130) f |= kCharLower;
  if (combining_class(cp) != 0) f |= kCharCombining;
  return f;
}

/// CharFlag bits of a code point (cached for the BMP).
inline std::uint8_t char_flags(char32_t cp) {
  static const auto bmp = [] {
    std::array<std::uint8_t, 0x10000> t{};
    for (char32_t c = 0; c < 0x10000; ++c) t[c] = compute_char_flags(c);
    return t;
  }();
  return cp < 0x10000 ? bmp[cp] : cp <= 0x10FFFF ? compute_char_flags(cp) : std::uint8_t{kCharControl};
}

/// The full canonical decomposition of cp (NFD of the one character, unordered with respect
/// to its neighbours) into buf; returns the number of code points (1 = unchanged).
inline std::size_t decompose(char32_t cp, std::array<char32_t, 4>& buf) {
  if (is_hangul_syllable(cp)) {  // Unicode §3.12: L V (T)
    const char32_t s = cp - 0xAC00;
    buf[0] = 0x1100 + s / 588;
    buf[1] = 0x1161 + (s % 588) / 28;
    if (s % 28 == 0) return 2;
    buf[2] = 0x11A7 + s % 28;
    return 3;
  }
  if (const auto* d = find_decomposition(cp)) {
    // The longest canonical decomposition is 4 code points (checked by the generator's pool).
    const std::size_t n = std::min<std::size_t>(d->length, buf.size());
    for (std::size_t i = 0; i < n; ++i) buf[i] = ucd::kDecompositionPool[d->offset + i];
    return n;
  }
  buf[0] = cp;
  return 1;
}

/// The full lower-case mapping of one character (no context) into buf; returns its length.
inline std::size_t to_lower(char32_t cp, std::array<char32_t, 3>& buf) {
  if (cp < 0x80) {
    buf[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return 1;
  }
  for (const auto& m : ucd::kLowerMulti)
    if (m.cp == cp) {
      for (std::size_t i = 0; i < m.length; ++i) buf[i] = m.to[i];
      return m.length;
    }
  const auto* r = find_lower_run(cp);
  buf[0] = r ? static_cast<char32_t>(static_cast<std::int64_t>(cp) + r->delta) : cp;
  return 1;
}

}  // namespace qnum::data::detail
