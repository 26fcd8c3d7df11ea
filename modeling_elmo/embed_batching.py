"""Streaming input of `elmo-embed`: sentences read line by line and grouped into length-bucketed batches.

The input is read in windows of `window` lines; each window is sorted by length and cut into batches, so memory is
bounded by one window whatever the corpus size, and the batches (and their ids) are the same on every run with the
same arguments, which is what makes resuming possible.
"""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class EmbedInputError(ValueError):
    """An input file that cannot be read as one sentence per line of UTF-8 text."""


@dataclass(frozen=True)
class Sentence:
    index: int  # line number, 0-based: the dataset name in the output
    text: str  # the line without surrounding whitespace: the key in `sentence_to_index`
    words: list[str]


@dataclass(frozen=True)
class Batch:
    window: int
    number: int  # within its window
    sentences: list[Sentence]

    @property
    def name(self) -> str:
        return f"{self.window:08d}-{self.number:05d}"


def read_sentences(path: str | os.PathLike, split: Callable[[str], list[str]] | None = None) -> Iterator[Sentence]:
    """One `Sentence` per line; words split on whitespace, or by `split` (raw text). Empty lines give no words."""
    try:
        handle = open(path, "rb")  # decoded line by line, so that an error names its line
    except FileNotFoundError as error:
        raise EmbedInputError(f"Input file not found: {path}") from error
    with handle:
        for index, line in enumerate(handle):
            try:
                text = line.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                raise EmbedInputError(f"{path}: line {index + 1} is not UTF-8 text ({error}).") from error
            yield Sentence(index, text, split(text) if split is not None and text else text.split())


def bucketed_batches(
    sentences: Iterator[Sentence],
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    window: int = 4096,
    shard: tuple[int, int] = (0, 1),
) -> Iterator[Batch]:
    """
    Batches of up to `batch_size` sentences, or of up to `max_tokens` words (a longer sentence goes alone), from
    windows of `window` sentences sorted by length. With `shard=(rank, world)` only every `world`-th window, from
    `rank`, is used.
    """
    if (batch_size is None) == (max_tokens is None):
        raise ValueError("give exactly one of batch_size and max_tokens")
    rank, world = shard
    buffer: list[Sentence] = []
    window_index = 0
    for sentence in sentences:
        buffer.append(sentence)
        if len(buffer) == window:
            if window_index % world == rank:
                yield from _cut(window_index, buffer, batch_size, max_tokens)
            buffer, window_index = [], window_index + 1
    if buffer and window_index % world == rank:
        yield from _cut(window_index, buffer, batch_size, max_tokens)


def _cut(window: int, sentences: list[Sentence], batch_size: int | None, max_tokens: int | None) -> Iterator[Batch]:
    ordered = sorted(sentences, key=lambda sentence: (len(sentence.words), sentence.index))
    current: list[Sentence] = []
    tokens, number = 0, 0
    for sentence in ordered:
        full = len(current) == batch_size if batch_size else tokens + len(sentence.words) > max_tokens
        if current and full:
            yield Batch(window, number, current)
            current, tokens, number = [], 0, number + 1
        current.append(sentence)
        tokens += len(sentence.words)
    if current:
        yield Batch(window, number, current)
