"""
simple_elmo's character ids (its `Batcher` over `UnicodeCharsVocabulary`): a word is its UTF-8 bytes + 1 between
begin- and end-of-word, as everywhere in this project, except for the words its cached vocabulary maps to the
sentence-boundary characters.

simple_elmo caches the first `limit` words of `vocab.txt` (every word when `limit` is `None` or below 1; lines are
stripped, `!!!MAXTERMID` lines skipped; without a vocabulary the cache is `<S>`, `</S>`, `<UNK>`). It then overwrites
the cached row of `<S>` with the begin-of-sentence word and that of `</S>` with the end-of-sentence word, at their
last position in the cache, or at the *last cached word* when one of them is not cached (bilm-tf's index -1). So the
text token `<S>` is the sentence-start word when the cache holds `<S>`, and its four bytes otherwise; and when the
first `limit` words lack `<S>` or `</S>`, the last cached word reads as a sentence boundary.
"""

import gzip
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path

import torch

from ..character_ids import BOS_TOKEN, EOS_TOKEN, byte_char_ids, word_to_char_ids
from ..tokenization_elmo import char_ids_tensor

SPECIAL_TOKENS_ONLY = (BOS_TOKEN, EOS_TOKEN, "<UNK>")  # simple_elmo's cache without a vocabulary file
SKIPPED_LINE = "!!!MAXTERMID"


def cached_words(lines: Iterable[str], limit: int | None) -> list[str]:
    """The words simple_elmo caches from the vocabulary `lines`: stripped, without `!!!MAXTERMID`, the first
    `limit` of them (all when `limit` is `None` or below 1)."""
    words = (line.strip() for line in lines)
    words = (word for word in words if word != SKIPPED_LINE)
    return list(words if limit is None or limit < 1 else islice(words, limit))


def folder_vocabulary_lines(path: Path) -> Iterator[str]:
    """The lines of a folder's `vocab.txt` or `vocab.txt.gz`, read lazily (UTF-8)."""
    opened = gzip.open(path, "rt", encoding="utf-8") if path.name.endswith(".gz") else open(path, encoding="utf-8")
    with opened as lines:
        yield from lines


def archive_vocabulary_lines(archive: Path, member: str) -> list[str]:
    """The lines of the ZIP `archive`'s member `member`, split on newlines as simple_elmo does (a final newline
    gives a last, empty line)."""
    with zipfile.ZipFile(archive) as opened:
        return opened.read(member).decode("utf-8").split("\n")


class SimpleElmoCharacters:
    """
    Tokenized texts -> character ids (texts, longest text, `max_characters`), long, 0 after each text's words (no
    sentence boundaries: the model adds them), with the vocabulary rules of the module docstring for `words` (the
    cached vocabulary, see `cached_words`).
    """

    def __init__(self, words: Sequence[str], max_characters: int) -> None:
        if not words:
            raise ValueError("the vocabulary holds no word (simple_elmo fails on it): give it <S>, </S>, <UNK>.")
        self.max_characters = max_characters
        self.special_words = self._special_words(words)

    def _special_words(self, words: Sequence[str]) -> dict[str, list[int]]:
        """The words whose ids are not `word_to_char_ids`': the cached rows simple_elmo overwrites with the sentence
        boundaries, and `<S>` / `</S>` read as bytes when they are not such a row."""
        row_of = {word: index for index, word in enumerate(words)}  # a repeated word: its last row
        boundary_rows = {}
        for token in (BOS_TOKEN, EOS_TOKEN):  # </S> second: it wins a row both are written to
            boundary_rows[row_of.get(token, -1) % len(words)] = word_to_char_ids(token, self.max_characters)
        special = {word: boundary_rows[row] for word, row in row_of.items() if row in boundary_rows}
        for token in (BOS_TOKEN, EOS_TOKEN):
            special.setdefault(token, byte_char_ids(token, self.max_characters))
        return special

    def word_char_ids(self, word: str) -> list[int]:
        """The `max_characters` ids of one word."""
        special = self.special_words.get(word)
        return special if special is not None else word_to_char_ids(word, self.max_characters)

    def __call__(self, texts: Sequence[Sequence[str]]) -> torch.Tensor:
        return char_ids_tensor(texts, self.max_characters, self.word_char_ids)
