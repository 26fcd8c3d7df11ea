"""
Splitting raw text into words for ELMo, close to the Moses tokenizer used for the 1B Word Benchmark that ELMo was
trained on (the rules are listed in `ElmoTokenizer`'s docstring). Every word keeps its character offsets.
"""

import re
import unicodedata


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


def split_words(text: str) -> list[tuple[str, int, int]]:
    """Split `text` into `(word, start, end)` with `text[start:end] == word`; see `ElmoTokenizer` for the rules."""
    words: list[tuple[str, int, int]] = []
    period_may_attach = False
    for match in _WORD_RE.finditer(text):
        start, end = match.span()
        if period_may_attach and match.lastgroup == "other" and text[start:end] == "." and words[-1][2] == start:
            word, word_start, _ = words[-1]
            words[-1] = (word + ".", word_start, end)
            period_may_attach = False
            continue
        period_may_attach = match.lastgroup == "word" and _keeps_final_period(match.group())
        words.append((match.group(), start, end))
    return words
