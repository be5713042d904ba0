#!/usr/bin/env python3
"""Generates include/qnum/data/unicode_tables.hpp from Python's unicodedata (development tool).

The tables are what BERT's basic tokenizer asks of a code point:
  control  general category Cc, Cf, Co or Cs, except \\t \\n \\r (removed by the clean-up; Cn is
           kept, as Hugging Face's tokenizers library does; the slow Python tokenizer drops it)
  space    Zs, \\t \\n \\r and the other White_Space characters that are not control (Zl, Zp)
  punct    general category P*, plus the ASCII ranges 33-47, 58-64, 91-96, 123-126
  mn       general category Mn (removed after NFD when accents are stripped)
  ccc      canonical combining class, as (first, last, class) ranges of nonzero classes
  decomp   full canonical decomposition (NFD of one code point; Hangul syllables excluded:
           they are decomposed arithmetically)
  lower    per-character full lower-case mapping (str.lower of one character, as Rust's
           char::to_lowercase: no final-sigma context), as runs (first, last, stride, delta)
           plus the few multi-character mappings

Usage: python3 scripts/gen_unicode_tables.py [--check-hf VOCAB]
Writes the header next to wordpiece.hpp. With --check-hf, also compares the basic
tokenization these tables imply with Hugging Face's BertTokenizer (transformers >= 5) for
every code point and prints the differences (Unicode-version differences of the Rust tables).
"""
import argparse
import pathlib
import sys
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "include" / "qnum" / "data" / "unicode_tables.hpp"
MAX_CP = 0x110000


def cat(cp):
    return unicodedata.category(chr(cp))


def is_control(cp):
    return chr(cp) not in "\t\n\r" and cat(cp) in ("Cc", "Cf", "Co", "Cs")


def is_space(cp):
    c = chr(cp)
    return not is_control(cp) and (c in " \t\n\r" or cat(cp) == "Zs" or c.isspace())


def is_punct(cp):
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or cat(cp).startswith("P")


def ranges(pred):
    out, start = [], None
    for cp in range(MAX_CP + 1):
        inside = cp < MAX_CP and pred(cp)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def is_hangul_syllable(cp):
    return 0xAC00 <= cp <= 0xD7A3


def lower_runs():
    """Single-code-point lower-case mappings as (first, last, stride, delta) runs."""
    pairs, multi = [], []
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        low = chr(cp).lower()
        if low == chr(cp):
            continue
        if len(low) == 1:
            pairs.append((cp, ord(low) - cp))
        else:
            multi.append((cp, [ord(x) for x in low]))
    runs = []
    i = 0
    while i < len(pairs):
        cp, delta = pairs[i]
        # Longest run of equal deltas at a constant stride (1 or 2) starting here.
        best = (cp, cp, 1, delta, i + 1)
        for stride in (1, 2):
            j, last = i + 1, cp
            while j < len(pairs) and pairs[j][0] == last + stride and pairs[j][1] == delta:
                last = pairs[j][0]
                j += 1
            if j - i > best[4] - i:
                best = (cp, last, stride, delta, j)
        runs.append(best[:4])
        i = best[4]
    return runs, multi


def check_lower_after_nfd(decomp):
    """The tokenizer lower-cases after NFD and Mn removal: the lower-case of a fully decomposed
    character must itself be fully decomposed and carry no Mn, or the order would matter."""
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF or cp in decomp or is_hangul_syllable(cp):
            continue
        low = chr(cp).lower()
        if low == chr(cp):
            continue
        assert unicodedata.normalize("NFD", low) == low, hex(cp)
        assert all(cat(ord(x)) != "Mn" for x in low), hex(cp)


def fmt_ranges(name, rs, per_line=6):
    lines = [f"inline constexpr CodeRange {name}[] = {{"]
    row = []
    for lo, hi in rs:
        row.append(f"{{0x{lo:X}, 0x{hi:X}}}")
        if len(row) == per_line:
            lines.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        lines.append("    " + ", ".join(row) + ",")
    lines.append("};")
    return "\n".join(lines)


def generate():
    control = ranges(is_control)
    space = ranges(is_space)
    punct = ranges(is_punct)
    mn = ranges(lambda cp: cat(cp) == "Mn")

    ccc = []
    for cp in range(MAX_CP):
        c = unicodedata.combining(chr(cp))
        if not c:
            continue
        if ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == c:
            ccc[-1] = (ccc[-1][0], cp, c)
        else:
            ccc.append((cp, cp, c))

    decomp = {}
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF or is_hangul_syllable(cp):
            continue
        d = unicodedata.normalize("NFD", chr(cp))
        if d != chr(cp):
            decomp[cp] = [ord(x) for x in d]
    check_lower_after_nfd(decomp)
    runs, multi = lower_runs()
    assert all(len(v) <= 3 for _, v in multi)

    pool, entries = [], []
    for cp in sorted(decomp):
        entries.append((cp, len(pool), len(decomp[cp])))
        pool.extend(decomp[cp])
    assert len(pool) < 65536 and max(n for _, _, n in entries) <= 4  # unicode.hpp's decompose() buffer

    out = []
    out.append("// GENERATED by scripts/gen_unicode_tables.py from Python's unicodedata "
               f"(Unicode {unicodedata.unidata_version}). Do not edit.")
    out.append("// Character classes, canonical combining classes, canonical decompositions and lower-case")
    out.append("// mappings used by BERT's basic tokenizer (see include/qnum/data/unicode.hpp).")
    out.append("#pragma once\n\n#include <cstdint>\n\n// clang-format off\nnamespace qnum::data::detail::ucd {\n")
    out.append(f'inline constexpr const char* kUnicodeVersion = "{unicodedata.unidata_version}";\n')
    out.append("struct CodeRange {\n  char32_t first, last;\n};")
    out.append("struct CccRange {\n  char32_t first, last;\n  std::uint8_t ccc;\n};")
    out.append("struct Decomposition {\n  char32_t cp;\n  std::uint16_t offset;\n  std::uint8_t length;\n};")
    out.append("struct LowerRun {\n  char32_t first, last;\n  std::uint8_t stride;\n  std::int32_t delta;\n};")
    out.append("struct LowerMulti {\n  char32_t cp;\n  std::uint8_t length;\n  char32_t to[3];\n};\n")
    out.append("/// Cc, Cf, Co, Cs except tab, newline and carriage return.")
    out.append(fmt_ranges("kControl", control))
    out.append("/// Zs, tab, newline, carriage return and the other White_Space characters (Zl, Zp).")
    out.append(fmt_ranges("kSpace", space))
    out.append("/// P* plus ASCII 33-47, 58-64, 91-96, 123-126.")
    out.append(fmt_ranges("kPunct", punct))
    out.append("/// Mn (non-spacing marks).")
    out.append(fmt_ranges("kNonspacingMark", mn))
    out.append("/// Nonzero canonical combining classes.")
    out.append("inline constexpr CccRange kCombiningClass[] = {")
    row = []
    for lo, hi, c in ccc:
        row.append(f"{{0x{lo:X}, 0x{hi:X}, {c}}}")
        if len(row) == 5:
            out.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        out.append("    " + ", ".join(row) + ",")
    out.append("};")
    out.append("/// Full canonical decompositions (sorted by cp), slices of kDecompositionPool.")
    out.append("inline constexpr Decomposition kDecomposition[] = {")
    row = []
    for cp, off, n in entries:
        row.append(f"{{0x{cp:X}, {off}, {n}}}")
        if len(row) == 6:
            out.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        out.append("    " + ", ".join(row) + ",")
    out.append("};")
    out.append("inline constexpr char32_t kDecompositionPool[] = {")
    for i in range(0, len(pool), 10):
        out.append("    " + ", ".join(f"0x{x:X}" for x in pool[i:i + 10]) + ",")
    out.append("};")
    out.append("/// Single-code-point lower-case mappings: cp in [first, last], (cp - first) % stride == 0")
    out.append("/// maps to cp + delta.")
    out.append("inline constexpr LowerRun kLower[] = {")
    row = []
    for lo, hi, st, d in runs:
        row.append(f"{{0x{lo:X}, 0x{hi:X}, {st}, {d}}}")
        if len(row) == 5:
            out.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        out.append("    " + ", ".join(row) + ",")
    out.append("};")
    out.append("/// Lower-case mappings to several code points.")
    out.append("inline constexpr LowerMulti kLowerMulti[] = {")
    for cp, v in multi:
        to = ", ".join(f"0x{x:X}" for x in v + [0] * (3 - len(v)))
        out.append(f"    {{0x{cp:X}, {len(v)}, {{{to}}}}},")
    out.append("};\n")
    out.append("}  // namespace qnum::data::detail::ucd\n// clang-format on")
    OUT.write_text("\n".join(out) + "\n")
    print(f"wrote {OUT}: control {len(control)}, space {len(space)}, punct {len(punct)}, mn {len(mn)} ranges; "
          f"ccc {len(ccc)} ranges; {len(entries)} decompositions ({len(pool)} code points); "
          f"lower {len(runs)} runs + {len(multi)} multi", file=sys.stderr)


CHINESE = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
           (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def check_hf(vocab):
    """Normalised text and pre-tokens of 'a' + c + 'b' for every code point c, vs. HF's."""
    import collections
    from transformers import BertTokenizer
    tok = BertTokenizer(vocab=vocab, do_lower_case=True)
    norm, pre = tok.backend_tokenizer.normalizer, tok.backend_tokenizer.pre_tokenizer

    def model(s):
        out = []
        for ch in s:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or is_control(cp):
                continue
            if is_space(cp):
                out.append(" ")
            elif any(lo <= cp <= hi for lo, hi in CHINESE):
                out.append(" " + ch + " ")
            else:
                out.append(ch)
        s = unicodedata.normalize("NFD", "".join(out))
        s = "".join(ch.lower() for ch in s if cat(ord(ch)) != "Mn")
        words, cur = [], ""
        for ch in s:
            if is_space(ord(ch)):
                words, cur = words + ([cur] if cur else []), ""
            elif is_punct(ord(ch)):
                words, cur = words + ([cur] if cur else []) + [ch], ""
            else:
                cur += ch
        return s, words + ([cur] if cur else [])

    diff, examples = collections.Counter(), {}
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        s = "a" + chr(cp) + "b"
        n = norm.normalize_str(s)
        mine_n, mine_w = model(s)
        kind = None
        if n != mine_n:
            kind = "normalize " + cat(cp)
        elif [w for w, _ in pre.pre_tokenize_str(n)] != mine_w:
            kind = "split " + cat(cp)
        if kind:
            diff[kind] += 1
            examples.setdefault(kind, []).append(f"U+{cp:04X}")
    total = sum(diff.values())
    print(f"HF differences: {total} code points", file=sys.stderr)
    for k, v in sorted(diff.items()):
        print(f"  {k}: {v} (e.g. {' '.join(examples[k][:6])})", file=sys.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-hf", metavar="VOCAB", help="compare with transformers' BertTokenizer")
    args = ap.parse_args()
    generate()
    if args.check_hf:
        check_hf(args.check_hf)
