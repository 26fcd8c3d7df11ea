"""Training corpora in bilm-tf's format: any number of shards (text files), one whitespace-tokenized sentence per line.

Files are found with globs (`**` included) and read streaming, line by line, so a corpus of any size runs in flat
memory. Decisions, each tested:
- Lines end at `\\n`, `\\r\\n` or a lone `\\r`, as bilm-tf reads its shards (`open(shard).readlines()`: Python's
  universal newlines), so a file with old Mac line ends holds as many sentences as lines. Lines are decoded one at a
  time, so invalid UTF-8 is reported as a `CorpusError` naming the file and the line (an error, not a skip: a damaged
  shard is better fixed than silently shortened). A byte-order mark at the start of a file is dropped.
- Blank (whitespace-only) lines are skipped: they are not sentences and are not counted as sentences anywhere.
- With several processes (`world_size > 1`), each rank reads its own shards, `files[rank::world_size]` of the sorted
  list, when there are at least as many shards as processes; with fewer shards every rank reads every file and keeps
  the sentences whose index (counted over the whole corpus, blank lines not counted) is `rank` modulo `world_size`.
  Either way the ranks' shares are disjoint and together cover the corpus.
"""

import glob
import logging
import os
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from tqdm.auto import tqdm

from ..foundation.errors import ToolInputError
from ..foundation.output_folder import reason_of

logger = logging.getLogger(__name__)

_PROGRESS_EVERY_BYTES = 1 << 20  # progress bars move once per 2**20 bytes read: one update per line would cost more
_READ_BYTES = 1 << 20
_LINE_END = re.compile(rb"\r\n|\r|\n")
_warned_sentence_split: set[tuple[int, int]] = set()


class CorpusError(ToolInputError, ValueError):
    """A corpus that cannot be read: the message names the pattern, file or line."""


PathLike = str | os.PathLike


def resolve_corpus_files(patterns: str | Sequence[str], what: str = "--train_files") -> list[Path]:
    """
    The files matched by one or more glob patterns (`**` matches any number of folders), as absolute paths, sorted and
    without duplicates, so every process of a run sees the same list in the same order.

    A pattern that matches nothing, or names a directory, is refused with a `CorpusError` naming `what` (the option the
    patterns came from) and the pattern. Directories matched by a wildcard are skipped; a pattern that matches only
    directories is refused.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    if not patterns:
        raise CorpusError(f"{what}: no file pattern given.")
    found: set[str] = set()
    for pattern in map(os.fspath, patterns):
        if not glob.has_magic(pattern) and os.path.isdir(pattern):
            raise CorpusError(
                f"{what}: '{pattern}' is a directory; give the files, e.g. '{os.path.join(pattern, '*.txt')}'."
            )
        matches = glob.glob(pattern, recursive=True)
        files = [match for match in matches if os.path.isfile(match)]
        if not files:
            if matches:
                raise CorpusError(f"{what}: '{pattern}' matches no regular file (only folders or special files).")
            raise CorpusError(f"{what}: no file matches '{pattern}'.")
        found.update(os.path.abspath(file) for file in files)
    return [Path(file) for file in sorted(found)]


def _describe(files: Sequence[PathLike], limit: int = 3) -> str:
    names = [os.fspath(file) for file in files[:limit]]
    more = f" and {len(files) - limit} more" if len(files) > limit else ""
    return ", ".join(names) + more


def universal_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file, each with its line end, split at `\\n`, `\\r\\n` and a lone `\\r` (Python's
    universal newlines), reading 2**20 bytes at a time."""
    pending = b""
    while chunk := handle.read(_READ_BYTES):
        pending += chunk
        start = 0
        for end in _LINE_END.finditer(pending):
            if end.end() == len(pending) and end.group() == b"\r":
                break  # the `\n` of a `\r\n` may start the next chunk
            yield pending[start : end.end()]
            start = end.end()
        pending = pending[start:]
    if pending:
        yield pending


def read_sentences(path: PathLike, progress: tqdm | None = None) -> Iterator[list[str]]:
    """The sentences of one file (lists of words), streaming; blank lines skipped. Invalid UTF-8 raises `CorpusError`
    naming the file and line. `progress`, when given, advances by the bytes read."""
    pending = 0
    try:
        with open(path, "rb") as handle:
            for line_number, raw in enumerate(universal_lines(handle), start=1):
                try:
                    line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    raise CorpusError(
                        f"{os.fspath(path)}: line {line_number} is not valid UTF-8 ({error.reason} at byte "
                        f"{error.start} of the line); fix or remove that line."
                    ) from None
                if progress is not None:
                    pending += len(raw)
                    if pending >= _PROGRESS_EVERY_BYTES:
                        progress.update(pending)
                        pending = 0
                words = line.split()
                if words:
                    yield words
    except OSError as error:
        raise CorpusError(f"{os.fspath(path)}: cannot read the file ({reason_of(error, with_file=False)}).") from error
    finally:
        if progress is not None and pending:
            progress.update(pending)


def rank_files(files: Sequence[PathLike], rank: int = 0, world_size: int = 1) -> tuple[list[Path], bool]:
    """The files rank `rank` reads and whether it reads every file and keeps every `world_size`-th sentence (fewer
    files than processes) rather than reading its own shards."""
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise ValueError(f"need world_size >= 1 and 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    files = [Path(file) for file in files]
    if not files:
        raise CorpusError("The corpus has no files.")
    if len(files) >= world_size:
        return files[rank::world_size], False
    return files, True


def iter_sentences(
    files: Sequence[PathLike],
    rank: int = 0,
    world_size: int = 1,
    shuffle_seed: int | None = None,
    progress: tqdm | None = None,
) -> Iterator[list[str]]:
    """
    Stream rank `rank`'s share of the sentences of `files` (see the module docstring for the split), each a list of
    words. With `shuffle_seed`, the files of the share are read in the order `random.Random(shuffle_seed).shuffle`
    gives (the same on every rank); otherwise in the given order. The lines of a file are always read in order.

    Raises `CorpusError` when the share has no sentence at all (an empty corpus), naming the files, and on invalid
    UTF-8, naming the file and line.
    """
    own_files, sentence_split = rank_files(files, rank, world_size)
    if sentence_split and (len(own_files), world_size) not in _warned_sentence_split:
        _warned_sentence_split.add((len(own_files), world_size))
        logger.warning(
            f"{len(own_files)} corpus file(s) for {world_size} processes: every process reads every file and keeps "
            f"every {world_size}-th sentence. Split the corpus into at least as many shards as processes to read less."
        )
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(own_files)
    index = 0
    kept = 0
    for path in own_files:
        for words in read_sentences(path, progress):
            if not sentence_split or index % world_size == rank:
                kept += 1
                yield words
            index += 1
    if not kept:
        share = f" for rank {rank} of {world_size}" if world_size > 1 else ""
        found = f" ({index} in all: fewer than the {world_size} processes)" if index else ""
        raise CorpusError(f"No sentences{share} in {_describe(own_files)}: the corpus is empty{found}.")


def count_positions(files: Sequence[PathLike], rank: int = 0, world_size: int = 1, progress: bool = True) -> int:
    """The number of input positions rank `rank`'s stream holds in one pass: the sum over its sentences of
    `len(words) + 1` (`<S> w1 .. wn`, as bilm-tf counts its `n_train_tokens`). Reads the share once, streaming."""
    own_files, _ = rank_files(files, rank, world_size)
    total_bytes = sum(os.path.getsize(path) for path in own_files if os.path.isfile(path))
    with tqdm(
        total=total_bytes, unit="B", unit_scale=True, desc="Counting corpus positions", disable=not progress
    ) as bar:
        return sum(len(words) + 1 for words in iter_sentences(files, rank, world_size, progress=bar))
