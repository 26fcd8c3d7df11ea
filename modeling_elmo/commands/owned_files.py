"""The foundation of every file the package writes, besides the atomic write (`output_folder.replaced_atomically`):
one lock per output (`claimed`), one file hash (`sha256_of`) and an output folder owned by content (`OwnedFolder`).

Ownership rule of an `OwnedFolder`: its record (a JSON file in the folder) lists every file the tool finished there
with its size and SHA-256, and only those files are the tool's. A file the record does not list is foreign: it is never
overwritten, deleted or read into a result, with `--overwrite` too; the tool refuses, in one line naming it, to write
into, resume in or read from a folder that holds one. A listed file whose size or checksum no longer matches is
written again, never trusted. `--overwrite` deletes only the files the record lists (and the record). Each file is
listed in the record before it is renamed into place, so a kill at any moment leaves no finished file unlisted; the
temporary file of an interrupted write (`.NAME.*.tmp`, NAME a file the tool writes) is removed by the next run.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .output_folder import listed, reason_of, replaced_atomically

CHUNK_BYTES = 1 << 22


def sha256_of(path: str | os.PathLike, each_chunk: Callable[[bytes], None] | None = None) -> str:
    """The SHA-256 of the file `path` (hex), read in chunks; `each_chunk` also sees every chunk, in order."""
    return feed(hashlib.sha256(), path, each_chunk).hexdigest()


def feed(
    digest: "hashlib._Hash", path: str | os.PathLike, each_chunk: Callable[[bytes], None] | None = None
) -> "hashlib._Hash":
    """Update `digest` with the bytes of `path` (and pass each chunk to `each_chunk`); returns `digest`."""
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            if each_chunk is not None:
                each_chunk(chunk)
    return digest


@contextlib.contextmanager
def claimed(path: Path, busy: str, error: type[Exception]) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (a folder, or a lock file created if missing) for the block; raise
    `error(busy)` at once if another process holds it. The kernel releases it however the process ends."""
    flags = os.O_RDONLY if path.is_dir() else os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as failure:
        raise error(f"Cannot write {path.parent}: {reason_of(failure, with_file=False)}") from failure
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(busy) from None
        yield
    finally:
        os.close(descriptor)  # releases the lock


def file_entry(path: Path) -> dict[str, int | str]:
    """What a record keeps of a finished file: its size in bytes and SHA-256."""
    return {"bytes": path.stat().st_size, "sha256": sha256_of(path)}


class OwnedFolder:
    """
    The output folder of `tool` (named in messages). `names` are `(record_name, lock_name, writes)`: the record file
    names the run writing there (`run`, a JSON object) and lists, under `"files"`, each file the run finished with its
    `file_entry`; the lock file is locked while a process writes there; `writes` matches the names of the files the
    tool writes (see the module docstring for the ownership rule). `error` is the exception of every refusal.
    """

    def __init__(
        self, folder: Path, tool: str, names: tuple[str, str, re.Pattern[str]], error: type[Exception]
    ) -> None:
        self.folder, self.tool, self.error = folder, tool, error
        self.record_name, self.lock_name, self.writes = names

    def read(self) -> dict | None:
        """The whole record (None: there is none); an error naming it where it cannot be read or lists a name the
        tool does not write (so that nothing outside the folder is ever taken for a listed file)."""
        path = self.folder / self.record_name
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or not isinstance(record.get("files", {}), dict):
                raise ValueError("not a JSON object")
            if not all(self.writes.fullmatch(name) for name in record.get("files", {})):
                raise ValueError(f"it lists files {self.tool} does not write")
        except (OSError, ValueError) as failure:
            raise self.error(f"{path} is unreadable ({reason_of(failure, with_file=False)}).") from failure
        return record

    def run(self) -> dict | None:
        """The run recorded (the record without its file list)."""
        record = self.read()
        return None if record is None else {key: value for key, value in record.items() if key != "files"}

    def files(self) -> dict[str, dict]:
        """The files the record lists, by name."""
        return (self.read() or {}).get("files", {})

    def _is_leftover(self, name: str) -> bool:
        """Whether `name` is the temporary file of an interrupted write of the record or of a file the tool writes."""
        match = re.fullmatch(r"\.(.+)\.[a-z0-9_]{8}\.tmp", name)
        return match is not None and (match[1] == self.record_name or self.writes.fullmatch(match[1]) is not None)

    def foreign(self) -> list[str]:
        """The names in the folder that are not the tool's: neither the record, the lock, a listed file nor a
        leftover temporary file."""
        if not self.folder.is_dir():
            return []
        own = {self.record_name, self.lock_name, *self.files()}
        return sorted(
            path.name
            for path in self.folder.iterdir()
            if path.is_symlink() or (path.name not in own and not self._is_leftover(path.name))
        )

    def check_foreign(self) -> None:
        """Refuse, in one line naming it, a folder holding a file that is not the tool's."""
        if self.folder.exists() and not self.folder.is_dir():
            raise self.error(f"Output {self.folder} exists and is not a folder.")
        foreign = self.foreign()
        if foreign:
            raise self.error(
                f"{self.folder} holds files {self.tool} did not write ({listed(foreign, 3)}): its {self.record_name} "
                "does not list them, so they are never overwritten, deleted or read; move them away or give another "
                "folder."
            )

    def is_intact(self, name: str, checksum: bool = True) -> bool:
        """Whether `name` is listed and still has the recorded size and (unless `checksum` is False, for a quick
        look) the recorded checksum."""
        entry, path = self.files().get(name), self.folder / name
        if entry is None or path.is_symlink() or not path.is_file() or path.stat().st_size != entry.get("bytes"):
            return False
        return not checksum or sha256_of(path) == entry.get("sha256")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The folder created and locked for the block (an error at once if another process writes there), the
        leftover temporary files of an interrupted run removed."""
        try:
            self.folder.mkdir(exist_ok=True)
        except OSError as failure:
            raise self.error(f"Cannot write {self.folder}: {reason_of(failure, with_file=False)}") from failure
        busy = f"{self.folder} is in use by another {self.tool} process."
        with claimed(self.folder / self.lock_name, busy, self.error):
            try:
                for path in self.folder.iterdir():
                    if self._is_leftover(path.name):
                        path.unlink()
            except OSError as failure:
                raise self.error(f"Cannot clean {self.folder}: {reason_of(failure, with_file=False)}") from failure
            yield

    def start(self, run: dict, overwrite: bool = False) -> None:
        """Under the lock: keep the record of the same run `run` (resume), or record `run` anew, deleting the files
        the previous record lists (the caller refuses another run's folder without `overwrite`)."""
        if self.run() == run and not overwrite:
            return
        for name in self.files():
            (self.folder / name).unlink(missing_ok=True)
        self._write_record({**run, "files": {}})

    def _write_record(self, record: dict) -> None:
        with replaced_atomically(self.folder / self.record_name, self.error) as stream:
            stream.write(json.dumps(record, indent=1, sort_keys=True).encode("utf-8"))

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[BinaryIO]:
        """Under the lock: a stream whose bytes become the file `name`, listed in the record (with its size and
        checksum) before it is renamed into place."""

        def list_it(temporary: Path) -> None:
            record = self.read()
            record["files"][name] = file_entry(temporary)
            self._write_record(record)

        with replaced_atomically(self.folder / name, self.error, self.folder, before_rename=list_it) as stream:
            yield stream
