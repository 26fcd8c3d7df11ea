"""What identifies an `elmo-embed` run, by content: the input's bytes, the model's files and the options.

Paths and modification times are left out, so copies of the input and model on other machines (another path, another
mtime) make the same run, and their outputs merge. `scan_input` reads the input once, as fast as the disk allows: its
SHA-256, its number of lines, a UTF-8 check, and the byte offset of every window's first line, so that each process
of a multi-process run can seek to its own windows (`rank_windows`) and read nothing else.
"""

import codecs
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .batching import EmbedInputError, read_sentences

CHUNK_BYTES = 1 << 22
MODEL_FILES_LEFT_OUT = ("README.md",)  # besides hidden files: documentation does not change the vectors


@dataclass(frozen=True)
class InputScan:
    sha256: str
    size: int  # bytes
    lines: int
    window_starts: list[int]  # byte offset of the first line of each window of `window` lines

    def window_lines(self, window: int, number: int) -> range:
        """The line indices of window `number`."""
        return range(number * window, min((number + 1) * window, self.lines))


def scan_input(path: Path, window: int) -> InputScan:
    """Hash `path`, count its lines (as `read_sentences` splits them), check it is UTF-8 and find where each window of
    `window` lines starts; a line that is not UTF-8 is an `EmbedInputError` naming it."""
    digest, decoder = hashlib.sha256(), codecs.getincrementaldecoder("utf-8")()
    starts, newlines, offset, last = [0], 0, 0, b"\n"
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
                decoder.decode(chunk)
                ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == ord("\n"))
                # line k starts after newline number k (1-based): the window starts in this chunk are newlines
                # number len(starts) * window, ... counted from the start of the file
                first = len(starts) * window - newlines
                starts.extend(int(offset + ends[k - 1] + 1) for k in range(first, len(ends) + 1, window))
                newlines, offset, last = newlines + len(ends), offset + len(chunk), chunk[-1:]
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        for _ in read_sentences(path):  # finds and names the line
            pass
        raise
    except OSError as error:
        raise EmbedInputError(f"Cannot read input file {path}: {error.strerror}") from error
    lines = newlines + (last != b"\n")
    return InputScan(digest.hexdigest(), offset, lines, [start for start in starts if start < offset])


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
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK_BYTES):
                    digest.update(chunk)
    return {"model_sha256": digest.hexdigest()}


def rank_windows(windows: int, rank: int, world: int) -> range:
    """The windows of process `rank` of `world`: a contiguous share, the sizes differing by at most one."""
    return range(rank * windows // world, (rank + 1) * windows // world)
