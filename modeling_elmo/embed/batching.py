"""Streaming input of `elmo-embed`: sentences read line by line and grouped into length-bucketed batches (the
inference core's `Sentence` and `Batch`, `inference.batches`).

The input is cut into windows of `window` lines; each window is sorted by length and cut into batches numbered from 0
within it, so memory is bounded by one window whatever the corpus size, and the batches (and their names) are the same
on every run with the same arguments, which is what makes resuming possible. A window depends on nothing outside it
(the word cache is emptied at its start), so the processes of a multi-process run each read, tokenize and embed only
their own windows (`run_identity.rank_windows`) and still compute a single process's bits.
"""

import os
from collections.abc import Callable, Iterator

from ..foundation.errors import ToolError
from ..foundation.output_folder import reason_of
from ..inference.batches import Batch, Sentence


class EmbedInputError(ToolError, ValueError):
    """An input file that cannot be read as one sentence per line of UTF-8 text."""


def read_sentences(
    path: str | os.PathLike,
    split: Callable[[str], list[str]] | None = None,
    start: tuple[int, int] = (0, 0),
    stop: int | None = None,
) -> Iterator[Sentence]:
    """
    One `Sentence` per line; words split on whitespace, or by `split` (raw text). Empty lines give no words; a UTF-8
    byte order mark at the start of the file is dropped. `start` is `(line index, byte offset)` of the first line to
    read (a line start, e.g. from `run_identity.scan_input`), `stop` the index of the line to stop before.
    """
    first_index, offset = start
    try:
        handle = open(path, "rb")  # decoded line by line, so that an error names its line
    except FileNotFoundError as error:
        raise EmbedInputError(f"Input file not found: {path}") from error
    except OSError as error:
        raise EmbedInputError(f"Cannot read input file {path}: {reason_of(error, with_file=False)}") from error
    with handle:
        handle.seek(offset)
        for index, line in enumerate(handle, first_index):
            if index == stop:
                return
            try:
                text = line.decode("utf-8-sig" if index == 0 else "utf-8").strip()
            except UnicodeDecodeError as error:
                raise EmbedInputError(f"{path}: line {index + 1} is not UTF-8 text ({error}).") from error
            yield Sentence(index, text, split(text) if split is not None and text else text.split())


def bucketed_batches(
    sentences: Iterator[Sentence],
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    window: int = 4096,
    first_window: int = 0,
) -> Iterator[Batch]:
    """
    Batches of up to `batch_size` sentences, or of up to `max_tokens` words (a longer sentence goes alone), from
    windows of `window` sentences sorted by length, numbered in order within each window; the windows are numbered
    from `first_window` (the window of the first sentence).
    """
    if (batch_size is None) == (max_tokens is None):
        raise ValueError("give exactly one of batch_size and max_tokens")
    for window_number, part in enumerate(_windows(sentences, window), first_window):
        for number, batch in enumerate(_cut(part, batch_size, max_tokens)):
            yield Batch(number, batch, window_number)


def _windows(sentences: Iterator[Sentence], window: int) -> Iterator[list[Sentence]]:
    buffer: list[Sentence] = []
    for sentence in sentences:
        buffer.append(sentence)
        if len(buffer) == window:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


def _cut(sentences: list[Sentence], batch_size: int | None, max_tokens: int | None) -> Iterator[list[Sentence]]:
    ordered = sorted(sentences, key=lambda sentence: (len(sentence.words), sentence.index))
    current: list[Sentence] = []
    tokens = 0
    for sentence in ordered:
        full = len(current) == batch_size if batch_size else tokens + len(sentence.words) > max_tokens
        if current and full:
            yield current
            current, tokens = [], 0
        current.append(sentence)
        tokens += len(sentence.words)
    if current:
        yield current
