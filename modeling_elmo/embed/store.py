"""Crash-safe output of `elmo-embed`, in the layout of `allennlp elmo`.

While a run is in progress (holding the claim of `OUTPUT`, `foundation.owned_files.output_claimed`), `OUTPUT.parts/`
holds `.elmo-files.json` (its record, `foundation.folder_record`: the arguments of the run; earlier versions'
`manifest.json` is read too), one small HDF5 file per finished batch and `parts.jsonl`, the journal that lists each
finished part with its size and SHA-256. The folder is owned by content (`foundation.owned_files`, journal mode): a
file the journal does not list is foreign, never overwritten, deleted or read, and the folder holding it is refused in
one line naming it, `--overwrite` included. Every part is written under a temporary name, synced, given the permissions
of the umask, listed and renamed into place, so a kill or a failed write (full disk, read-only folder) at any moment
leaves only complete files; a failed write is reported with the file it was for and the cause. A rerun with the same
arguments skips the batches whose listed part is intact (size and checksum); the others are computed again. At the end
the listed parts are copied into `OUTPUT` and the folder is removed (only what it lists, then the empty folder).

The output file holds one float32 dataset per input line, named by the 0-based line index and written in line order
(so a run, a resumed run and a merged multi-process run give the same bytes), and `sentence_to_index`:
a one-element string dataset with the JSON map from sentence text to its (last) line index. Its root attribute
`elmo_embed_run` records the run (the manifest: input, model and arguments; the process `rank` of `world`; the number
of input `lines`), which `merge_files` checks before joining shards: every shard of one run, each once, disjoint.
"""

import contextlib
import json
import re
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from ..foundation.errors import ToolError
from ..foundation.folder_record import LEGACY_MANIFEST
from ..foundation.output_folder import check_output_file, listed, reason_of, replaced_atomically
from ..foundation.owned_files import OwnedFolder, OwnedRun, output_claimed
from .run_identity import describe_differences

SENTENCE_TO_INDEX = "sentence_to_index"
RUN_RECORD = "elmo_embed_run"
JOURNAL = "parts.jsonl"
EARLIER_FILES = (LEGACY_MANIFEST, "lock")  # the record and lock file of earlier versions
_SHARD_NAME = re.compile(r"\.shard-\d{5}-of-\d{5}")  # in the name of the file of process RANK of WORLD
_PART = re.compile(r"part-[0-9-]+\.h5")


class EmbedOutputError(ToolError, RuntimeError):
    """An output, work folder or shard that cannot be written, resumed or merged."""


def shard_output(output: Path, rank: int, world: int) -> Path:
    """The file one process writes: `output` itself, or `OUTPUT.shard-RANK-of-WORLD.hdf5` in a multi-process run."""
    if world == 1:
        return output
    return output.with_name(f"{output.stem}.shard-{rank:05d}-of-{world:05d}{output.suffix}")


@contextlib.contextmanager
def hdf5_replaced_atomically(
    target: Path, folder: Path | None = None, error: type[Exception] = EmbedOutputError
) -> Iterator[h5py.File]:
    """`replaced_atomically` for an HDF5 file (written through Python, so that a failed write raises cleanly)."""
    with replaced_atomically(target, error, folder=folder) as stream, h5py.File(stream, "w") as handle:
        yield handle


def write_line(handle: h5py.File, key: str, array: np.ndarray) -> None:
    """The `allennlp elmo` layout's dataset of one line, named `key` (its index, or its sentence), stored as is."""
    handle.create_dataset(key, data=array, track_times=False)


def write_sentence_to_index(handle: h5py.File, sentence_to_index: dict[str, str]) -> None:
    """The `allennlp elmo` layout's index: a one-element string dataset holding the JSON map sentence -> key."""
    dataset = handle.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype(), track_times=False)
    dataset[0] = json.dumps(sentence_to_index)


class _Source:
    """An HDF5 file read back (a part or a shard): any failure to read it becomes an error naming it."""

    def __init__(self, path: Path, kind: str):
        self.path, self.kind = path, kind
        with self._reading():
            self.handle = h5py.File(path, "r")

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as error:
            raise EmbedOutputError(
                f"Cannot read {self.kind} {self.path}: {reason_of(error, with_file=False)}"
            ) from error

    def __enter__(self) -> "_Source":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.handle.close()

    def lines(self) -> list[int]:
        """The line indices it holds, in order."""
        with self._reading():
            return sorted(int(name) for name in self.handle if name != SENTENCE_TO_INDEX)

    def array(self, line: int) -> np.ndarray:
        with self._reading():
            return self.handle[str(line)][...]

    def sentence_to_index(self) -> dict[str, str]:
        with self._reading():
            return json.loads(self.handle[SENTENCE_TO_INDEX][0])

    def record(self) -> dict:
        """Its run record; an error if it has none (not written by `elmo-embed`)."""
        with self._reading():
            text = self.handle.attrs.get(RUN_RECORD)
            record = json.loads(text) if isinstance(text, str) else None
        if not isinstance(record, dict) or not {"rank", "world", "lines"} <= record.keys():
            raise EmbedOutputError(f"{self.path} is not an elmo-embed output (no run record).")
        if not all(isinstance(record[key], int) for key in ("rank", "world", "lines")) or not (
            0 <= record["rank"] < record["world"]
        ):
            raise EmbedOutputError(f"{self.path} has a damaged run record.")
        return record


class PartStore(OwnedRun):
    """
    The work folder of one run (one process): its manifest, its finished batches, and the final assembly. Creating it
    only checks the output, the folder (nothing its journal does not list) and an interrupted run's manifest;
    `with store:` takes the folder (locked, on --overwrite emptied of the parts its journal lists) and `finalize`
    writes the output.
    """

    def __init__(self, output: Path, manifest: dict, overwrite: bool = False):
        self.output, self.manifest, self.overwrite = output, manifest, overwrite
        self.folder = output.with_name(output.name + ".parts")
        writes = re.compile(rf"{_PART.pattern}|{re.escape(output.name)}")  # the output is written in the folder first
        self.owned = OwnedFolder(
            self.folder, "elmo-embed", writes, EmbedOutputError, journal=JOURNAL, output=output, earlier=EARLIER_FILES
        )
        self._check_foreign()
        check_output_file(output, overwrite or self.folder.exists(), "Output", EmbedOutputError)
        if not overwrite:
            self._check_manifest()

    def check(self) -> None:
        """The refusals, again under the lock: a file the journal does not list, an output that appeared meanwhile
        (another run finished it), another run's manifest."""
        self._check_foreign()
        check_output_file(self.output, self.overwrite or self.owned.run() is not None, "Output", EmbedOutputError)
        if not self.overwrite:
            self._check_manifest()

    @property
    def run_record(self) -> dict:
        return self.manifest

    def _check_foreign(self) -> None:
        """Refuse, in one line naming them, a work folder that is a file or holds files its journal does not list (in
        a work folder of a run, as `OwnedFolder.check_foreign` says; anything else is not a work folder)."""
        if any((self.folder / name).is_file() for name in self.owned.record_names):
            self.owned.check_foreign()
            return
        if self.folder.exists() and not self.folder.is_dir():
            problem = "it is a file"
        elif foreign := self.owned.foreign():
            problem = f"it holds {listed(foreign, 3)}, which its {JOURNAL} does not list, never overwritten or read"
        else:
            return
        raise EmbedOutputError(f"{self.folder} is not an elmo-embed work folder: {problem}; move it away.")

    def _check_manifest(self) -> None:
        """Refuse to resume an interrupted run (a manifest in the folder) made with other arguments."""
        try:
            found = self.owned.run()
        except EmbedOutputError as error:
            raise EmbedOutputError(f"{error} Pass --overwrite to start over.") from error
        if found is not None and found != self.manifest:
            raise EmbedOutputError(
                f"{self.folder} holds an interrupted run with other arguments (differs in: "
                f"{describe_differences(found, self.manifest)}). "
                "Rerun with the same arguments to resume, or pass --overwrite to start over."
            )

    @staticmethod
    def _part_name(name: str) -> str:
        return f"part-{name}.h5"

    def is_done(self, name: str, lines: list[int]) -> bool:
        """Whether batch `name` has a listed part, intact (size and checksum), holding exactly `lines` (any other part
        is computed again)."""
        if not self.owned.is_intact(self._part_name(name)):
            return False
        try:
            with _Source(self.folder / self._part_name(name), "part") as part:
                return part.lines() == sorted(lines)
        except EmbedOutputError:
            return False

    def write(self, name: str, arrays: dict[int, np.ndarray], dtype: str = "float32") -> None:
        """Store the finished batch `name`: one array per line index, as `dtype`."""
        with self.owned.writing(self._part_name(name)) as stream, h5py.File(stream, "w") as handle:
            for index, array in arrays.items():
                write_line(handle, str(index), array.astype(dtype, copy=False))

    def finalize(self, sentence_to_index: dict[str, str], lines: int) -> None:
        """Copy every listed part, in line order, into the output file with the run record; drop the folder."""
        parts = [self.folder / name for name in sorted(self.owned.files())]
        owners = _line_owners(parts, "part", lines)
        with hdf5_replaced_atomically(self.output, self.folder) as handle:
            _copy_in_line_order(handle, parts, owners, "part")
            write_sentence_to_index(handle, sentence_to_index)
            handle.attrs[RUN_RECORD] = json.dumps({**self.manifest, "lines": lines}, sort_keys=True)
        try:
            self.owned.remove()
        except OSError as error:
            raise EmbedOutputError(
                f"Wrote {self.output} but cannot delete {self.folder}: {reason_of(error, with_file=False)}"
            ) from error


def keep_last_index(sentence_to_index: dict[str, str], sentence: str, index: int) -> None:
    """Map `sentence` to `index` unless it already maps to a later line (as `allennlp elmo` does)."""
    if index > int(sentence_to_index.get(sentence, -1)):
        sentence_to_index[sentence] = str(index)


def in_line_order(sentence_to_index: dict[str, str]) -> dict[str, str]:
    """The map as `allennlp elmo` writes it: keys in the order of their line index."""
    return dict(sorted(sentence_to_index.items(), key=lambda item: int(item[1])))


class _OpenSources:
    """`_Source`s opened on demand and kept open, the least recently used closed beyond `capacity`."""

    def __init__(self, kind: str, capacity: int = 256):
        self.kind, self.capacity = kind, capacity
        self._open: OrderedDict[Path, _Source] = OrderedDict()

    def __enter__(self) -> "_OpenSources":
        return self

    def __exit__(self, *exc_info) -> None:
        for source in self._open.values():
            source.close()

    def get(self, path: Path) -> _Source:
        if path not in self._open:
            if len(self._open) == self.capacity:
                self._open.popitem(last=False)[1].close()
            self._open[path] = _Source(path, self.kind)
        self._open.move_to_end(path)
        return self._open[path]


def _line_owners(files: list[Path], kind: str, lines: int) -> array:
    """For each of the `lines` input lines, the position in `files` of the file holding it (-1: none)."""
    owners = array("q", [-1]) * lines
    for number, path in enumerate(files):
        with _Source(path, kind) as source:
            for line in source.lines():
                if not 0 <= line < lines:
                    raise EmbedOutputError(f"{path} holds line {line}, beyond the {lines} lines of the input.")
                if owners[line] >= 0:
                    raise EmbedOutputError(f"Line {line} is in both {files[owners[line]]} and {path}.")
                owners[line] = number
    return owners


def _copy_in_line_order(handle: h5py.File, files: list[Path], owners: array, kind: str) -> None:
    """Copy the line datasets of `files` into `handle` in line order (the order of every output file)."""
    with _OpenSources(kind) as sources:
        for line, number in enumerate(owners):
            if number >= 0:
                write_line(handle, str(line), sources.get(files[number]).array(line))


def _file_key(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def _check_shards(shards: list[Path]) -> dict:
    """The common run record of shards that are every shard of one run, each once; an error naming the problem."""
    records = []
    for shard in shards:
        with _Source(shard, "shard") as source:
            records.append(source.record())
    first, expected = shards[0], {key: value for key, value in records[0].items() if key != "rank"}
    by_rank: dict[int, Path] = {}
    for shard, record in zip(shards, records, strict=True):
        if (run := {key: value for key, value in record.items() if key != "rank"}) != expected:
            differing = describe_differences(expected, run)
            raise EmbedOutputError(f"{first} and {shard} come from different runs (they differ in: {differing}).")
        if record["rank"] in by_rank:
            named = f"shard {record['rank']} of {expected['world']}"
            raise EmbedOutputError(f"{by_rank[record['rank']]} and {shard} are both {named}.")
        by_rank[record["rank"]] = shard
    missing = [rank for rank in range(expected["world"]) if rank not in by_rank]
    if missing:
        named = f"shard{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} of {expected['world']}"
        names = [_SHARD_NAME.subn(f".shard-{rank:05d}-of-{expected['world']:05d}", first.name) for rank in missing]
        if all(count == 1 for _, count in names):
            named += f" ({', '.join(name for name, _ in names)})"
        raise EmbedOutputError(f"Missing {named}: merge needs every shard of the run.")
    return expected


def merge_files(output: Path, shards: list[Path], overwrite: bool = False) -> int:
    """
    Merge the shard files of a multi-process run into `output`, in line order, after checking that they are every
    shard of one run, each given once, and hold every input line once; returns the number of lines.
    """
    with output_claimed(output, "elmo-embed merge", EmbedOutputError):
        check_output_file(output, overwrite, "Output", EmbedOutputError)
        keys: dict[tuple[int, int], Path] = {}
        for shard in shards:
            if not shard.exists():
                raise EmbedOutputError(f"Shard file not found: {shard}")
            if _file_key(shard) in keys:
                first = keys[_file_key(shard)]
                twice = f"Shard {shard} is given twice" if first == shard else f"{first} and {shard} are the same file"
                raise EmbedOutputError(f"{twice}: give each shard once.")
            keys[_file_key(shard)] = shard
        if output.exists() and _file_key(output) in keys:
            raise EmbedOutputError(f"Output {output} is one of the shards.")
        record = _check_shards(shards)
        owners = _line_owners(shards, "shard", record["lines"])
        if -1 in owners:
            raise EmbedOutputError(f"No shard holds line {owners.index(-1)} of the {record['lines']} input lines.")
        sentence_to_index: dict[str, str] = {}
        for shard in shards:
            with _Source(shard, "shard") as source:
                for sentence, index in source.sentence_to_index().items():
                    keep_last_index(sentence_to_index, sentence, int(index))
        with hdf5_replaced_atomically(output) as handle:
            _copy_in_line_order(handle, shards, owners, "shard")
            write_sentence_to_index(handle, in_line_order(sentence_to_index))
            handle.attrs[RUN_RECORD] = json.dumps({**record, "rank": 0, "world": 1}, sort_keys=True)
        return len(owners)
