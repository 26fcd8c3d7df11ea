"""Splitting raw text into words for `ElmoTokenizer`, close to the Moses tokenizer used for the 1B Word Benchmark
that ELMo was trained on. No lowercasing and no character normalisation: every word is a slice of the input and
keeps its offsets.

- whitespace, control characters and zero-width spaces separate words and never appear in one;
- runs of letters/digits form words; internal periods and hyphens stay inside ("3.5", "e.g", "well-known",
  "www.example.com"), commas only between digits ("1,000");
- a final period stays attached to abbreviations with an internal period ("U.S.", "e.g.", "Ph.D."), to a single
  capital letter ("J.") and to common titles ("Mr.", "Dr.", "Prof.", "St.", "vs.", ...); otherwise it is split off;
- English clitics are split like Moses: an apostrophe (`'` or `’`) between a letter/digit and a letter starts a new
  word ("don't" -> "don", "'t"; "John's" -> "John", "'s"; "1990's" -> "1990", "'s"); other apostrophes are separate
  words;
- "..." and "--" runs are one word each; every other punctuation mark or symbol is a word of its own, with its
  combining marks, emoji modifiers / ZWJ sequences and flags kept whole; combining marks stay with their letter.
"""

import re
import unicodedata

Word = tuple[str, int, int]  # (word, start, end) with text[start:end] == word


def _char_class(code_points: list[int]) -> str:
    """A regex character-class body (without brackets) matching exactly `code_points` (sorted)."""
    parts, start, prev = [], code_points[0], code_points[0]
    for cp in [*code_points[1:], -1]:
        if cp == prev + 1:
            prev = cp
            continue
        parts.append(re.escape(chr(start)) if start == prev else f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
        start = prev = cp
    return "".join(parts)


def _combining_marks() -> list[int]:
    # Unicode marks (Mn, Mc, Me) live in planes 0, 1 and 14 only.
    candidates = [*range(0x20000), *range(0xE0000, 0xE1000)]
    return [cp for cp in candidates if unicodedata.category(chr(cp)).startswith("M")]


_MARKS = _char_class(_combining_marks())
# Characters that never start a word but stick to the previous character: combining marks (incl. variation
# selectors), emoji skin-tone modifiers, emoji tag characters, zero-width (non-)joiner.
_EXTEND = rf"[{_MARKS}\U0001F3FB-\U0001F3FF\U000E0020-\U000E007F\u200c\u200d]"
# Separators: whitespace, control characters, zero-width space / word joiner / BOM. They are never part of a word.
_SEPARATOR = r"\s\x00-\x08\x0e-\x1f\x7f-\x9f\u200b\u2060\ufeff"
_NON_SEPARATOR = rf"[^{_SEPARATOR}]"
# A character with what sticks to it; a zero-width joiner also glues the next character (emoji ZWJ sequences).
_CLUSTER_TAIL = rf"(?:\u200d{_NON_SEPARATOR}|{_EXTEND})*"
_ALNUM = rf"[^\W_]{_CLUSTER_TAIL}"
# Letters/digits, joined by internal periods and hyphens, and by commas between digits ("1,000").
_CORE = rf"(?:{_ALNUM})+(?:[.\-](?:{_ALNUM})+|(?<=\d),(?=\d)(?:{_ALNUM})+)*"
_WORD_RE = re.compile(
    rf"""
    (?P<dots>\.{{2,}})                                              # "..." stays one token
  | (?P<clitic>(?:(?<=[^\W_])|(?<={_EXTEND}))['\u2019](?=[^\W\d_]){_CORE})  # "don't" -> "don", "'t"
  | (?P<word>{_CORE})
  | (?P<dashes>-{{2,}})                                             # "--"
  | (?P<flag>[\U0001F1E6-\U0001F1FF]{{2}}{_CLUSTER_TAIL})          # regional-indicator pairs (flags)
  | (?P<other>{_NON_SEPARATOR}{_CLUSTER_TAIL})                      # any other single character
    """,
    re.VERBOSE,
)
# Words whose final period is kept (Moses' non-breaking prefixes, abridged); single capital letters too ("J. Smith").
_NONBREAKING_PREFIXES = frozenset(
    "Mr Mrs Ms Messrs Dr Drs Prof Sr Jr St Mt Ft Gen Gov Sen Rep Rev Hon Col Lt Capt Cmdr Sgt Maj Adm Brig Cpl "
    "Pvt Supt vs".split()
)


def _keeps_final_period(word: str) -> bool:
    if word in _NONBREAKING_PREFIXES or (len(word) == 1 and word.isupper()):
        return True
    return "." in word and any(ch.isalpha() for ch in word)


def split_words(text: str, start: int = 0, end: int | None = None) -> list[Word]:
    """Split `text[start:end]` into words by the rules above; offsets index the whole `text`.

    The characters before `start` are context for the rules: `'s` right after a letter there is a clitic.
    """
    words: list[Word] = []
    period_may_attach = False
    for match in _WORD_RE.finditer(text, start, len(text) if end is None else end):
        word = match.group()
        if period_may_attach and match.lastgroup == "other" and word == "." and words[-1][2] == match.start():
            words[-1] = (words[-1][0] + ".", words[-1][1], match.end())
            period_may_attach = False
            continue
        period_may_attach = match.lastgroup == "word" and _keeps_final_period(word)
        words.append((word, *match.span()))
    return words
