"""The foundation of every file the package writes, besides the atomic write (`output_folder.replaced_atomically`):
one lock (`claimed`), one claim per output (`output_claimed`, which every command takes before it checks its output),
one file hash (`sha256_of`) and an output folder owned by content (`OwnedFolder`).

Ownership rule of an `OwnedFolder`: its record (a JSON file in the folder), or the journal beside it, lists every file
the tool finished there with its size and SHA-256, and only those files are the tool's. A file not listed is foreign:
it is never overwritten, deleted or read into a result, with `--overwrite` too; the tool refuses, in one line naming
it, to write into, resume in or read from a folder that holds one. A listed file whose size or checksum no longer
matches is written again, never trusted. `--overwrite` deletes only the files listed (and the journal). Each file is
listed before it is renamed into place, so a kill at any moment leaves no finished file unlisted; the temporary file of
an interrupted write (`.NAME.*.tmp`, NAME a file the tool writes) is removed by the next run.

A folder that receives many files (the HDF5 work folder: one per batch) lists them in an append-only journal instead
of the record, so that listing one costs the same however many came before: one JSON line per finished file, appended
and synced (a later line for a name replaces an earlier one); the torn last line of a write cut short by a kill is
ignored, and cut off before the next append.
"""

import contextlib
import fcntl
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .file_hash import file_entry, sha256_of
from .folder_record import (
    FOLDER_RECORD,
    OWNER_ERRORS,
    FolderRecord,
    describe_owner,
    owner_record,
    read_journal,
    read_record,
    unlisted_entries,
)
from .output_folder import (
    OutputKind,
    listed,
    parent_folders,
    prepare_output,
    reason_of,
    replaced_atomically,
    write_text_atomically,
)


def holder_of(path: Path) -> str:
    """Who holds the claim of the lock file `path`, as its owner record (`folder_record.owner_record`) says ("pid 123
    on host"); what a claim left by a process that wrote no record (an older version, or one between locking and
    writing) is called."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except OWNER_ERRORS:
        holder = None
    return describe_owner(holder)


def _locked_descriptor(
    path: Path, busy: str | Callable[[str], str], error: type[Exception], target: Path | None = None
) -> int:
    """A descriptor of `path` under an exclusive `flock`, the lock file being the one at `path` now (a file removed
    by its last holder while this process waited for it is opened again); `error(busy)` at once where another process
    holds it (`busy` called with `holder_of(path)` where it is a function)."""
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as failure:
            raise error(f"Cannot write {target or path.parent}: {reason_of(failure, with_file=False)}") from failure
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise error(busy if isinstance(busy, str) else busy(holder_of(path))) from None
        try:
            same = os.stat(path).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return descriptor
        os.close(descriptor)


@contextlib.contextmanager
def claimed(
    path: Path,
    busy: str | Callable[[str], str],
    error: type[Exception],
    claim: bool = False,
    target: Path | None = None,
) -> Iterator[None]:
    """Hold an exclusive `flock` on the lock file `path` (created if missing) for the block; raise `error(busy)` at
    once if another process holds it (`busy`: a message, or a function of the holder's description, `holder_of`). The
    kernel releases it however the process ends. With `claim`, `path` is an output's claim file: it holds this
    process's owner record (`folder_record.owner_record`) while held and is deleted when the block ends. `target` is
    what a failure to create the lock file names (default: its folder)."""
    descriptor = _locked_descriptor(path, busy, error, target)
    try:
        if claim:
            os.ftruncate(descriptor, 0)
            os.write(descriptor, json.dumps(owner_record()).encode("utf-8"))
        yield
    finally:
        if claim:
            path.unlink(missing_ok=True)  # still locked: a process that opened it meanwhile finds it gone and retries
        os.close(descriptor)  # releases the lock


def refusal(start: str) -> Callable[[str], str]:
    """The one-line refusal of a claimed output, as a function of its holder's description (`claimed`'s `busy`)."""
    return lambda holder: f"{start} ({holder}); wait for it to end, or choose another output."


_HELD: set[tuple[str, int]] = set()  # the outputs this process claims, with the thread holding each


def claim_file(output: Path) -> Path:
    """The lock file of `output`'s claim: a hidden file beside it, in the folder it lies in."""
    output = Path(os.path.abspath(output))
    return output.parent / f".{output.name}.claim"


@contextlib.contextmanager
def output_claimed(output: Path, tool: str, error: type[Exception], busy: str | None = None) -> Iterator[None]:
    """The one claim of an output, a file or a folder, existing or not, for the block: every command that writes one
    takes it before it checks the output and holds it until the output is in place, so that of two runs into one
    output one proceeds and the other refuses at once in one line naming the output and the run holding it (`busy`
    replaces the start of that line). The lock file (`claim_file`) lies in the output's folder and is removed at the
    end; a thread that holds the claim already takes it again at no cost. Where the output's folder does not exist,
    nothing is claimed (the command's own checks refuse or create it)."""
    lock, key = claim_file(output), (os.path.abspath(output), threading.get_ident())
    if key in _HELD or not lock.parent.is_dir():
        yield
        return
    start = busy or f"{output} is being written by another {tool} run"
    with claimed(lock, refusal(start), error, claim=True, target=output):
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)


@contextlib.contextmanager
def output_folder_claimed(
    output_dir: Path, overwrite: bool, inputs: tuple[str, ...], kind: OutputKind
) -> Iterator[None]:
    """For a folder written whole (`output_folder`'s policy): `prepare_output`, then the output's claim for the block
    and `prepare_output` again under it (another run may have written there meanwhile), so that the folder is checked,
    built and moved into place by one run at a time. The missing parent folders are created for the claim's lock file
    and removed again when the block fails."""
    prepare_output(output_dir, overwrite, inputs, kind)  # at once, before any folder is created
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(parent_folders(output_dir))
        except OSError as failure:
            raise kind.error(f"Cannot create {output_dir}: {reason_of(failure)}") from failure
        stack.enter_context(output_claimed(output_dir, kind.tool, kind.error))
        prepare_output(output_dir, overwrite, inputs, kind)
        yield


def record_folder(folder: Path, tool: str, error: type[Exception]) -> None:
    """Write the record of the finished folder `folder` (`folder_record`, before it is moved into place): `tool`,
    and every file in it with its `file_entry`, so that `--overwrite` later deletes only those."""
    files = {path.name: file_entry(path) for path in sorted(folder.iterdir()) if path.name != FOLDER_RECORD}
    write_text_atomically(folder / FOLDER_RECORD, FolderRecord(tool, files).text(), error)


class OwnedFolder:
    """
    The output folder of `tool` (named in messages), owned by content: its record (`folder_record`) names the run
    writing there (`run`, a JSON object) and lists each file the run finished with its `file_entry` (or, where
    `journal` names a file, that journal lists them). `writes` matches the names of the files the tool writes (see the
    module docstring for the ownership rule); `error` is the exception of every refusal. A process writes there under
    the claim of `output` (`output_claimed`, the one lock of an output; default: the folder), which the command holds
    already. `earlier` names the files an earlier version kept there besides its files, `(record, lock)`: its record
    (`folder_record.legacy_record` reads it), replaced by this version's when a run resumes, and its lock file.
    """

    def __init__(
        self,
        folder: Path,
        tool: str,
        writes: re.Pattern[str],
        error: type[Exception],
        journal: str | None = None,
        output: Path | None = None,
        earlier: tuple[str, str] | None = None,
    ) -> None:
        self.folder, self.tool, self.writes, self.error, self.journal = folder, tool, writes, error, journal
        self.output = output or folder
        self.record_names = (FOLDER_RECORD, earlier[0]) if earlier else (FOLDER_RECORD,)
        self.earlier_lock = earlier[1] if earlier else None
        self._listed: dict[str, dict] | None = None  # the files listed, kept in memory while the folder is locked

    def read(self) -> FolderRecord | None:
        """The folder's record (`folder_record.read_record`; None: there is none, or it is not the tool's); an error
        naming it where it cannot be read or lists a name the tool does not write (so that nothing outside the folder
        is ever taken for a listed file)."""
        record = read_record(self.folder, self.error)
        if record is None or record.tool != self.tool or record.name not in self.record_names:
            return None
        if not all(self.writes.fullmatch(name) for name in record.files):
            listing = self.folder / (record.journal or record.name)
            raise self.error(f"{listing} is unreadable (it lists files {self.tool} does not write).")
        return record

    def run(self) -> dict | None:
        """The run recorded."""
        record = self.read()
        return None if record is None else record.run

    def files(self) -> dict[str, dict]:
        """The files the record (or the journal) lists, by name."""
        if self._listed is not None:
            return self._listed
        if self.journal:
            return read_journal(self.folder / self.journal, self.error, self.writes)
        record = self.read()
        return {} if record is None else record.files

    def _trim_journal(self) -> None:
        """Under the lock: cut off a torn last line of the journal, so that the next one starts a line of its own."""
        path = self.folder / self.journal
        if path.exists():
            data = path.read_bytes()
            os.truncate(path, data.rfind(b"\n") + 1)

    def _list(self, name: str, entry: dict) -> None:
        """Under the lock: list the finished file `name` with its `file_entry` (appended to the journal and synced, or
        written into the record)."""
        self._listed[name] = entry
        if self.journal:
            with open(self.folder / self.journal, "ab") as journal:
                journal.write(json.dumps({"name": name, **entry}, sort_keys=True).encode("utf-8") + b"\n")
                journal.flush()
                os.fsync(journal.fileno())
        else:
            self._write_record(self.run())

    def _is_leftover(self, name: str) -> bool:
        """Whether `name` is the temporary file of an interrupted write of the record or of a file the tool writes."""
        match = re.fullmatch(r"\.(.+)\.[a-z0-9_]{8}\.tmp", name)
        return match is not None and (match[1] in self.record_names or self.writes.fullmatch(match[1]) is not None)

    def foreign(self) -> list[str]:
        """The entries of the folder that are not the tool's (`folder_record.unlisted_entries`, the one check): neither
        the record, the lock, the journal, a listed file nor a leftover temporary file."""
        if not self.folder.is_dir():
            return []
        own = {
            **dict.fromkeys(filter(None, (self.earlier_lock, self.journal, *self.record_names[1:])), {}),
            **self.files(),
        }
        unlisted = unlisted_entries(self.folder, FolderRecord(self.tool, own))
        return [name for name in unlisted if not self._is_leftover(name) or (self.folder / name).is_symlink()]

    def check_foreign(self) -> None:
        """Refuse, in one line naming it, a folder holding a file that is not the tool's."""
        if self.folder.exists() and not self.folder.is_dir():
            raise self.error(f"Output {self.folder} exists and is not a folder.")
        foreign = self.foreign()
        if foreign:
            raise self.error(
                f"{self.folder} holds files {self.tool} did not write ({listed(foreign, 3)}): its "
                f"{self.journal or FOLDER_RECORD} does not list them, so they are never overwritten, deleted or "
                "read; move them away or give another folder."
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
        """The folder created and its output claimed for the block (an error at once if another process writes there),
        the leftover temporary files of an interrupted run removed."""
        try:
            self.folder.mkdir(exist_ok=True)
        except OSError as failure:
            raise self.error(f"Cannot write {self.folder}: {reason_of(failure, with_file=False)}") from failure

        with output_claimed(self.output, self.tool, self.error):
            try:
                for path in self.folder.iterdir():
                    if self._is_leftover(path.name):
                        path.unlink()
                if self.journal:
                    self._trim_journal()
            except OSError as failure:
                raise self.error(f"Cannot clean {self.folder}: {reason_of(failure, with_file=False)}") from failure
            self._listed = dict(self.files())
            try:
                yield
            finally:
                self._listed = None

    def claim(self, run: dict, overwrite: bool, check: Callable[[], None]) -> contextlib.ExitStack:
        """Lock the folder, run the caller's `check` again under the lock (no other process can change the folder
        now: foreign files, another run's record) and `start` `run`; the returned stack holds the lock until closed."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.locked())
            check()
            self.start(run, overwrite)
            return stack.pop_all()

    def start(self, run: dict, overwrite: bool = False) -> None:
        """Under the lock: keep the record of the same run `run` (resume; an earlier version's record is written
        again as this one's), or record `run` anew, deleting the files the previous record lists (the caller refuses
        another run's folder without `overwrite`). The record is written last, so that a kill on the way never leaves
        the files of one run listed for another."""
        record = None if overwrite else self.read()
        if record is not None and record.run == run:
            if record.name != FOLDER_RECORD:
                self._write_record(run)
            return
        for name in self.files():
            (self.folder / name).unlink(missing_ok=True)
        if self.journal:
            (self.folder / self.journal).unlink(missing_ok=True)
        self._listed = {}
        self._write_record(run)

    def remove(self) -> None:
        """Under the lock, once the run's result is elsewhere: delete the files listed, the journal, the record and an
        earlier version's lock, then the folder (an `OSError` where it still holds anything else, which stays)."""
        for name in [*self.files(), self.journal, FOLDER_RECORD, self.earlier_lock]:
            if name is not None:
                (self.folder / name).unlink(missing_ok=True)
        self._listed = {}
        self.folder.rmdir()

    def _write_record(self, run: dict) -> None:
        """Under the lock: write the record of `run` and the files listed, in place of an earlier version's record."""
        record = FolderRecord(self.tool, dict(self._listed), run=run, journal=self.journal)
        with replaced_atomically(self.folder / FOLDER_RECORD, self.error) as stream:
            stream.write(record.text().encode("utf-8"))
        for name in self.record_names[1:]:
            (self.folder / name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[BinaryIO]:
        """Under the lock: a stream whose bytes become the file `name`, listed in the record (with its size and
        checksum) before it is renamed into place."""

        def list_it(temporary: Path) -> None:
            self._list(name, file_entry(temporary))

        with replaced_atomically(self.folder / name, self.error, before_rename=list_it) as stream:
            yield stream


class OwnedRun:
    """One run's hold on its `OwnedFolder`: `with run:` locks the folder, checks it again and starts (or resumes) the
    run (`OwnedFolder.claim`). Subclasses set `owned`, `overwrite` and `run_record` (the run's record) and define
    `check` (their refusals: foreign files, another run's record)."""

    owned: OwnedFolder
    overwrite: bool
    run_record: dict

    def check(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._claim = self.owned.claim(self.run_record, self.overwrite, self.check)
        return self

    def __exit__(self, *exc_info) -> None:
        self._claim.close()
