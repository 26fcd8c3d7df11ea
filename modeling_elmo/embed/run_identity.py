"""What identifies an `elmo-embed` run, by content: the input's bytes, the model's files and the options.

Paths and modification times are left out, so copies of the input and model on other machines (another path, another
mtime) make the same run, and their outputs merge. `scan_input` reads the input once, as fast as the disk allows: its
SHA-256, its number of lines, a UTF-8 check, and the byte offset of every window's first line, so that each process
of a multi-process run can seek to its own windows (`rank_windows`) and read nothing else. `shared_window` is the
grain at which processes share the input: small enough that every process gets lines.
"""

import codecs
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..foundation.file_hash import feed
from ..foundation.output_folder import reason_of
from .batching import EmbedInputError, read_sentences

MIN_LINES_PER_RANK = 64  # below this many lines per process, a share may be empty
MODEL_FILES_LEFT_OUT = ("README.md",)  # besides hidden files: documentation does not change the vectors
SHOWN_VALUE_CHARACTERS = 40  # a differing option's values are named when this short (hashes never are)


@dataclass(frozen=True)
class InputScan:
    sha256: str
    size: int  # bytes
    lines: int
    window: int  # lines per window
    window_starts: list[int]  # byte offset of the first line of each window

    def window_lines(self, number: int) -> range:
        """The line indices of window `number`."""
        return range(number * self.window, min((number + 1) * self.window, self.lines))


def scan_input(path: Path, window: int) -> InputScan:
    """Hash `path`, count its lines (as `read_sentences` splits them), check it is UTF-8 and find where each window of
    `window` lines starts; a line that is not UTF-8 is an `EmbedInputError` naming it."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    starts, newlines, offset, last = [0], 0, 0, b"\n"

    def scan(chunk: bytes) -> None:
        nonlocal newlines, offset, last
        decoder.decode(chunk)
        ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == ord("\n"))
        # line k starts after newline number k (1-based): the window starts in this chunk are newlines
        # number len(starts) * window, ... counted from the start of the file
        first = len(starts) * window - newlines
        starts.extend(int(offset + ends[k - 1] + 1) for k in range(first, len(ends) + 1, window))
        newlines, offset, last = newlines + len(ends), offset + len(chunk), chunk[-1:]

    try:
        digest = feed(hashlib.sha256(), path, scan)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        for _ in read_sentences(path):  # finds and names the line
            pass
        raise
    except OSError as error:
        raise EmbedInputError(f"Cannot read input file {path}: {reason_of(error, with_file=False)}") from error
    lines = newlines + (last != b"\n")
    return InputScan(digest.hexdigest(), offset, lines, window, [start for start in starts if start < offset])


def model_identity(model: str) -> dict[str, str]:
    """A model folder's files by content (the SHA-256 of every file's name and bytes, hidden files and the README
    left out); a Hub repo id by its name."""
    folder = Path(model)
    if not folder.is_dir():
        return {"model": model}
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith(".") and path.name not in MODEL_FILES_LEFT_OUT:
            digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
            feed(digest, path)
    return {"model_sha256": digest.hexdigest()}


def run_quantization(model: str, asked: str) -> str:
    """The quantization method a run computes with: `asked` (`--quantization`), or, for "none", the method of a model
    folder saved quantized (its config.json's `quantization_config`, which loading follows); "none" otherwise."""
    config = Path(model) / "config.json"
    if asked != "none" or not config.is_file():
        return asked
    try:
        saved = json.loads(config.read_text(encoding="utf-8")).get("quantization_config")
    except (OSError, ValueError, AttributeError):
        return asked  # loading the model names what is wrong with its config
    return saved.get("method", asked) if isinstance(saved, dict) else asked


def describe_differences(first: dict, second: dict) -> str:
    """The keys in which two run records differ, for a one-line refusal: each option with both values, `first`'s
    then `second`'s (`quantization 'int8' vs None`); a SHA-256 or a long value by its key only."""

    def shown(key: str) -> bool:
        values = (first.get(key), second.get(key))
        return not key.endswith("sha256") and all(len(repr(value)) <= SHOWN_VALUE_CHARACTERS for value in values)

    keys = sorted(key for key in first.keys() | second.keys() if first.get(key) != second.get(key))
    return ", ".join(f"{key} {first.get(key)!r} vs {second.get(key)!r}" if shown(key) else key for key in keys)


def rank_windows(windows: int, rank: int, world: int) -> range:
    """The windows of process `rank` of `world`: a contiguous share, the sizes differing by at most one."""
    return range(rank * windows // world, (rank + 1) * windows // world)


def shared_window(requested: int, lines: int, world: int) -> int:
    """The window (lines embedded together, the unit of a process's share) of a run of `world` processes on `lines`
    lines: `requested`, unless that leaves a process without a window although there are `MIN_LINES_PER_RANK` lines
    per process; then `lines // world`, so that every process gets one."""
    if -(-lines // requested) >= world or lines < MIN_LINES_PER_RANK * world:
        return requested
    return lines // world
