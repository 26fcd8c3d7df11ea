"""`elmo-embed --format parquet`: a folder of Parquet part files that reads as one dataset.

The folder holds `.elmo-files.json` (its record, `foundation.folder_record`: under `run` the input, model and options
by content, see `run_identity`, and under `files` each finished part with its size and SHA-256; earlier versions'
`.elmo-embed-run.json` is read too) and one `part-WWWWWWWW.parquet` per window of input lines, in `arrow_layout`'s
columns, one row group per batch (rows sorted by length within a window, so read back in line order with `ORDER BY
id`). A part is written under a hidden temporary name, synced, listed in the record and renamed once its window is
complete, so a kill at any moment leaves only complete parts; a rerun computes the windows that have no intact listed
part. A part depends only on its window (not on the process, nor on the windows before it), so the folders of the
processes of a multi-process run, each holding its own windows, join into one by copying the parts together
(`merge_folders` does it checked). The record is a hidden file, and the run's claim
(`foundation.owned_files.output_claimed`) lies beside the folder: `pyarrow.dataset`, pandas and `datasets` skip names
starting with `.`, and DuckDB reads `*.parquet`.

Ownership (`foundation.owned_files`): only the files the record lists are elmo-embed's. A folder holding any other file
(a `part-*.parquet` of the user's included) is refused, in one line naming it, for a run, a resume, `--overwrite`,
`to-parquet` and `merge` alike: such a file is never overwritten, deleted or read into a result. `--overwrite` deletes
only the files the record lists; a listed part whose size or checksum fails is computed again.
"""

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..foundation.folder_record import FOLDER_RECORD, LEGACY_PARQUET_RECORD
from ..foundation.owned_files import OwnedFolder, OwnedRun, output_claimed
from .run_identity import describe_differences
from .store import EmbedOutputError

EARLIER_FILES = (LEGACY_PARQUET_RECORD, ".elmo-embed.lock")  # the record and lock file of earlier versions
_PART = re.compile(r"part-(\d{8})\.parquet")
WRITE_OPTIONS = {  # floats do not compress: plain pages, statistics only where they help a reader skip row groups
    "compression": "none",
    "use_dictionary": ["id", "num_words"],
    "write_statistics": ["id", "num_words"],
}


def part_name(window: int) -> str:
    return f"part-{window:08d}.parquet"


def window_of(name: str) -> int:
    """The window number of a part file's name."""
    return int(_PART.fullmatch(name)[1])


def owned_folder(folder: Path) -> OwnedFolder:
    """`folder` as elmo-embed's Parquet output (checked: nothing in it that its record does not list)."""
    owned = OwnedFolder(folder, "elmo-embed", _PART, EmbedOutputError, earlier=EARLIER_FILES)
    owned.check_foreign()
    return owned


def part_ids(path: Path) -> list[int] | None:
    """The ids of a part file, sorted; None where it cannot be read."""
    try:
        return sorted(pq.read_table(path, columns=["id"])["id"].to_pylist())
    except (OSError, pa.ArrowException):
        return None


class ParquetFolder(OwnedRun):
    """
    The output folder of a Parquet run. Creating it checks the folder (nothing its record does not list, and no other
    run's record unless `overwrite`); `with folder:` takes it (locked, on --overwrite emptied of the files its record
    lists, the record written) and `writing(window, schema)` writes one window's part.
    """

    def __init__(self, folder: Path, record: dict, overwrite: bool = False):
        self.record, self.overwrite = record, overwrite
        if not folder.exists() and not folder.parent.is_dir():
            raise EmbedOutputError(f"Cannot create {folder}: {folder.parent} is not a folder.")
        self.owned = owned_folder(folder)
        self.folder = folder
        if not overwrite:
            self._check_record()

    def _check_record(self) -> None:
        found = self.owned.run()
        if found is not None and found != self.record:
            raise EmbedOutputError(
                f"{self.folder} holds another run (differs in: {describe_differences(found, self.record)}): "
                "rerun with the same input, model and options to resume, or give another folder."
            )

    def check(self) -> None:
        """The refusals, again under the lock: a file the record does not list, another run's record."""
        self.owned.check_foreign()
        if not self.overwrite:
            self._check_record()

    @property
    def run_record(self) -> dict:
        return self.record

    def is_done(self, window: int, checksum: bool = True) -> bool:
        """Whether `window` has a part that the record lists with its size and checksum intact (`checksum=False`:
        its size only, a quick look)."""
        return self.owned.is_intact(part_name(window), checksum)

    @contextlib.contextmanager
    def writing(self, window: int, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
        """A writer of `window`'s part: one `write_table` per batch; the part appears when the block ends."""
        with (
            self.owned.writing(part_name(window)) as stream,
            pq.ParquetWriter(stream, schema, **WRITE_OPTIONS) as writer,
        ):
            yield writer


def merge_folders(output: Path, folders: list[Path]) -> int:
    """
    Copy the parts of the folders of one multi-process (or multi-machine) run into `output`, after checking that
    they share one run record, that no window is in two folders and that together they hold every input line once;
    returns the number of lines.
    """
    with output_claimed(output, "elmo-embed merge", EmbedOutputError):
        records, listed = [], []
        for folder in folders:
            if not folder.is_dir():
                raise EmbedOutputError(f"Folder not found: {folder}")
            owned = owned_folder(folder)
            record = owned.run()
            if record is None:
                raise EmbedOutputError(f"{folder} is not an elmo-embed Parquet folder (no {FOLDER_RECORD}).")
            records.append(record)
            listed.append(owned)
        for folder, record in zip(folders[1:], records[1:], strict=True):
            if record != records[0]:
                differing = describe_differences(records[0], record)
                raise EmbedOutputError(
                    f"{folders[0]} and {folder} come from different runs (they differ in: {differing})"
                )
        lines, window = records[0]["input_lines"], records[0]["window"]
        parts: dict[int, Path] = {}
        for owned in listed:
            for name in sorted(owned.files()):
                path, number = owned.folder / name, window_of(name)
                if number in parts:
                    raise EmbedOutputError(f"{parts[number]} and {path} hold the same window: give each folder once.")
                if not owned.is_intact(name):
                    raise EmbedOutputError(
                        f"{path} is not as its run record lists it (size or checksum): rerun its process."
                    )
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
                if not target.is_done(number):
                    with target.owned.writing(part_name(number)) as stream, open(path, "rb") as source:
                        shutil.copyfileobj(source, stream)
        return lines
