"""`elmo-embed --format parquet`: a folder of Parquet part files that reads as one dataset.

The folder holds `.elmo-embed-run.json` (the run record: input, model and options by content, see `run_identity`),
`.elmo-embed.lock` (locked by the process writing there) and one `part-WWWWWWWW.parquet` per window of `--window`
input lines, in `arrow_layout`'s columns, one row group per batch (rows sorted by length within a window, so read
back in line order with `ORDER BY id`). A part is written under a hidden temporary name, synced and renamed once its
window is complete, so a kill at any moment leaves only complete parts; a rerun computes the windows that have none.
A part depends only on its window (not on the process, nor on the windows before it), so the folders of the processes
of a multi-process run, each holding its own windows, join into one by copying the parts together (`merge_folders`
does it checked). The record and lock are hidden files: `pyarrow.dataset`, pandas and `datasets` skip names starting
with `.`, and DuckDB reads `*.parquet`.
"""

import contextlib
import fcntl
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ..commands.output_folder import replaced_atomically
from .store import EmbedOutputError, _cause

RUN_RECORD_FILE = ".elmo-embed-run.json"
LOCK_FILE = ".elmo-embed.lock"
_PART = re.compile(r"part-(\d{8})\.parquet")
_OWN_FILE = re.compile(rf"{re.escape(RUN_RECORD_FILE)}|{re.escape(LOCK_FILE)}|part-\d{{8}}\.parquet|\..*\.tmp")
WRITE_OPTIONS = {  # floats do not compress: plain pages, statistics only where they help a reader skip row groups
    "compression": "none",
    "use_dictionary": ["id", "num_words"],
    "write_statistics": ["id", "num_words"],
}


def part_name(window: int) -> str:
    return f"part-{window:08d}.parquet"


def window_of(path: Path) -> int | None:
    """The window number of a part file's name; None for any other file."""
    match = _PART.fullmatch(path.name)
    return int(match[1]) if match else None


def read_record(folder: Path) -> dict | None:
    """The run record of `folder`; None where it has none; an error where it is unreadable."""
    path = folder / RUN_RECORD_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        raise EmbedOutputError(f"{path} is unreadable ({_cause(error)}).") from error
    return record


def check_own_folder(folder: Path) -> None:
    """Refuse a folder holding anything `elmo-embed` did not write there: it is never written into nor cleaned."""
    if folder.exists() and not folder.is_dir():
        raise EmbedOutputError(f"Output {folder} exists and is not a folder.")
    if folder.is_dir():
        foreign = sorted(path.name for path in folder.iterdir() if not _OWN_FILE.fullmatch(path.name))
        if foreign:
            raise EmbedOutputError(
                f"{folder} holds files elmo-embed did not write ({', '.join(foreign[:3])}): "
                "give a new or empty folder, or move them away."
            )


def differing_keys(first: dict, second: dict) -> list[str]:
    return sorted(key for key in first.keys() | second.keys() if first.get(key) != second.get(key))


def part_ids(path: Path) -> list[int] | None:
    """The ids of a part file, sorted; None where it cannot be read (damaged: its window is computed again)."""
    try:
        return sorted(pq.read_table(path, columns=["id"])["id"].to_pylist())
    except (OSError, pa.ArrowException):
        return None


class ParquetFolder:
    """
    The output folder of a Parquet run. Creating it checks the folder (only elmo-embed's files, and no other run's
    record); `with folder:` takes it (locked, emptied of this run's files on --overwrite, the record written) and
    `writing(window, schema)` writes one window's part.
    """

    def __init__(self, folder: Path, record: dict, overwrite: bool = False):
        self.folder, self.record, self.overwrite = folder, record, overwrite
        check_own_folder(folder)
        if not folder.exists() and not folder.parent.is_dir():
            raise EmbedOutputError(f"Cannot create {folder}: {folder.parent} is not a folder.")
        if not overwrite:
            self._check_record()
        self._lock: BinaryIO | None = None

    def _check_record(self) -> None:
        found = read_record(self.folder)
        if found is not None and found != self.record:
            raise EmbedOutputError(
                f"{self.folder} holds another run (differs in: {', '.join(differing_keys(found, self.record))}): "
                "rerun with the same input, model and options to resume, or give another folder."
            )

    def __enter__(self) -> "ParquetFolder":
        try:
            self.folder.mkdir(exist_ok=True)
            self._lock = open(self.folder / LOCK_FILE, "ab")
        except OSError as error:
            raise EmbedOutputError(f"Cannot write {self.folder}: {_cause(error)}") from error
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._clean()
            self._check_record()  # again, now that no other process can change it
            if read_record(self.folder) is None:
                with replaced_atomically(self.folder / RUN_RECORD_FILE, EmbedOutputError) as stream:
                    stream.write(json.dumps(self.record, indent=1, sort_keys=True).encode("utf-8"))
        except BlockingIOError as error:
            self._lock.close()
            raise EmbedOutputError(f"{self.folder} is in use by another elmo-embed process.") from error
        except BaseException:
            self._lock.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._lock.close()

    def _clean(self) -> None:
        """Delete the temporary files of a part being written when a previous run died; on --overwrite, every file
        of the folder but the lock (all elmo-embed's: `check_own_folder`)."""
        try:
            for path in self.folder.iterdir():
                if path.name != LOCK_FILE and (self.overwrite or path.name.endswith(".tmp")):
                    path.unlink()
        except OSError as error:
            raise EmbedOutputError(f"Cannot clean {self.folder}: {_cause(error)}") from error

    def is_done(self, window: int, lines: range) -> bool:
        """Whether `window` has a readable part holding exactly the ids `lines`."""
        path = self.folder / part_name(window)
        return path.exists() and part_ids(path) == list(lines)

    @contextlib.contextmanager
    def writing(self, window: int, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
        """A writer of `window`'s part: one `write_table` per batch; the part appears when the block ends."""
        with (
            replaced_atomically(self.folder / part_name(window), EmbedOutputError, self.folder) as stream,
            pq.ParquetWriter(stream, schema, **WRITE_OPTIONS) as writer,
        ):
            yield writer


def merge_folders(output: Path, folders: list[Path]) -> int:
    """
    Copy the parts of the folders of one multi-process (or multi-machine) run into `output`, after checking that
    they share one run record, that no window is in two folders and that together they hold every input line once;
    returns the number of lines.
    """
    records = []
    for folder in folders:
        if not folder.is_dir():
            raise EmbedOutputError(f"Folder not found: {folder}")
        check_own_folder(folder)
        record = read_record(folder)
        if record is None:
            raise EmbedOutputError(f"{folder} is not an elmo-embed Parquet folder (no {RUN_RECORD_FILE}).")
        records.append(record)
    for folder, record in zip(folders[1:], records[1:], strict=True):
        if record != records[0]:
            differing = ", ".join(differing_keys(record, records[0]))
            raise EmbedOutputError(f"{folders[0]} and {folder} come from different runs (they differ in: {differing})")
    lines, window = records[0]["input_lines"], records[0]["window"]
    parts: dict[int, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("part-*.parquet")):
            number = window_of(path)
            if number in parts:
                raise EmbedOutputError(f"{parts[number]} and {path} hold the same window: give each folder once.")
            expected = list(range(number * window, min((number + 1) * window, lines)))
            if part_ids(path) != expected:
                raise EmbedOutputError(f"{path} does not hold lines {expected[:1]}..{expected[-1:]} of the input.")
            parts[number] = path
    missing = [number for number in range(-(-lines // window)) if number not in parts]
    if missing:
        raise EmbedOutputError(
            f"No folder holds lines {missing[0] * window}..{min((missing[0] + 1) * window, lines) - 1} "
            f"({part_name(missing[0])}, {len(missing)} part(s) missing): merge needs the folders of every process."
        )
    with ParquetFolder(output, records[0]) as target:
        for number, path in sorted(parts.items()):
            if not (output / part_name(number)).exists():
                with replaced_atomically(output / part_name(number), EmbedOutputError, target.folder) as stream:
                    with open(path, "rb") as source:
                        shutil.copyfileobj(source, stream)
    return lines
