"""The output policy of every command: what it refuses before any work, how it claims what it writes, and how the
new output takes the place of the old one, so that a failed or killed run never leaves a half-written output.

Every command claims its output (`owned_files.output_claimed`, a lock file beside it naming the process) before it
checks it, and holds the claim until the output is in place: of two runs into one output, the second refuses at once
in one line naming the output and the first run's pid and host.

The folders a command writes as its own carry one record of what it wrote there and of the process still writing
(`folder_record`), read by one reader, that of an earlier version included.

- A folder written as a whole (`elmo-convert`, its ELMoForManyLangs and NLPL paths, `elmo-export`): `prepare_output`
  refuses an output it must not replace (not the current directory, not a symbolic link, `--overwrite` only over a
  folder of the same kind, never over its own inputs); the new folder is built in a hidden work folder beside it whose
  record names the process that owns it (`work_folder`) and renamed into place at the end (`move_into_place`: the
  previous folder is moved aside and removed only once the new one is in place). A work folder whose process is gone
  is cleaned up by the next run.
- One file (`elmo-embed`, `elmo-pretrain build-vocab`, `elmo-export-onnx`, the fine-tuning commands' result files):
  `check_output_file` refuses a folder, a missing parent folder, or an existing file without `--overwrite`;
  `path_replaced_atomically` (or `replaced_atomically`, its stream), the package's one atomic write, writes it under a
  temporary name beside it, synced, and renames it into place with the umask's permissions. Every other file the
  package writes whole (a vocabulary, an ONNX file, an activation cache, a download) goes through it too.
- A folder filled file by file (`elmo-embed --format parquet`, its `merge` and `to-parquet`): `owned_files.OwnedFolder`
  owns only the files its record lists (size and sha256); see that module for the rule.
- A Trainer command's `--output_dir`, which the `Trainer` writes into as it goes (checkpoints, then the model):
  `check_run_folder` refuses a file, a folder that cannot be written, or one holding entries the run may not write
  over (`foreign_run_entries`: those its record does not list); every Trainer command records its run there as started
  (`claim_run_folder`) and, at the end, every file it wrote (`seal_run_folder`). `output_lock` keeps a second live run
  out of it with the output's one claim.
"""

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import ToolInputError, reason_of
from .file_hash import file_entry
from .folder_record import (
    FOLDER_RECORD,
    FolderRecord,
    describe_owner,
    owner_is_gone,
    owner_record,
    read_record,
    unlisted_entries,
)

logger = logging.getLogger(__name__)


def listed(names: list[str], most: int) -> str:
    """The first `most` of `names`, joined by commas, and how many more there are."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


@dataclass(frozen=True)
class OutputKind:
    """What a tool writes as its output folder, for `--overwrite`: `tool` names it in messages and in the folder's
    record; for a folder without a record (an earlier version's), the folder holds nothing but `files` and
    `problems(folder)` says why a folder of such files is still not one the tool wrote; `error` is the exception the
    tool's refusals raise."""

    tool: str
    files: frozenset[str]
    problems: Callable[[Path], list[str]]
    error: type[Exception]


def check_replaceable(output_dir: Path, kind: OutputKind) -> None:
    """Refuse to replace `output_dir` unless it is empty or a folder `kind.tool` finished: its record
    (`folder_record.read_record`) names that tool and lists every entry, and `kind.problems` finds none (a listed file
    may have been edited). A folder without a record (an earlier version's: it still loads) is refused with what to do;
    so is any entry the record does not list, which is never deleted or read."""
    try:
        entries = sorted(output_dir.iterdir(), key=lambda path: path.name)
    except OSError as error:
        raise kind.error(f"Cannot read the output folder {output_dir}: {reason_of(error)}.") from error
    if not entries:
        return
    record = read_record(output_dir, kind.error)
    if record is not None:
        unexpected = unlisted_entries(output_dir, record)
    else:
        unexpected = [
            path.name + ("/" if path.is_dir() else "")
            for path in entries
            if path.name not in kind.files or path.is_symlink() or not path.is_file()
        ]
    if record is not None and record.tool != kind.tool:
        problem = f"its {record.name} says {record.tool} wrote it"
    elif record is not None and not record.complete:
        problem = f"its {record.name} says {describe_owner(record.owner)} is still writing it"
    elif unexpected:
        problem = f"it holds {listed(unexpected, 5)}"
        problem += f", which its {record.name} does not list" if record is not None else ""
    elif problems := kind.problems(output_dir):  # a listed file edited into something the tool does not write
        problem = problems[0]
    elif record is None:
        raise kind.error(
            f"--overwrite replaces only a folder {kind.tool} wrote, or an empty one, and {output_dir} lists no files "
            f"as {kind.tool}'s (an earlier version wrote it: it has no {FOLDER_RECORD}). Choose another --output, or "
            "delete the folder yourself if it is yours to replace."
        )
    else:
        return
    raise kind.error(
        f"--overwrite replaces only a folder {kind.tool} wrote, or an empty one, and {output_dir} is not one "
        f"({problem}). Choose another --output, or move those files away."
    )


def check_output(output_dir: Path, overwrite: bool, inputs: tuple[str, ...], kind: OutputKind) -> None:
    """Refuse an output location the new folder cannot or must not replace, before any work is done."""
    resolved, cwd = output_dir.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise kind.error(
            f"--output {output_dir} is the current directory or one of its parents ({resolved}); the converted "
            "folder replaces the output folder as a whole, which cannot be done to the directory you are in. "
            "Give a folder outside the current directory's path, e.g. a new subfolder."
        )
    if output_dir.is_symlink():
        raise kind.error(f"Output path {output_dir} is a symbolic link; give the folder it points to instead.")
    if not output_dir.exists():
        ancestor = next(path for path in resolved.parents if path.exists())
        if not ancestor.is_dir():
            raise kind.error(f"Cannot create {output_dir}: {ancestor} is not a directory.")
        return
    if not output_dir.is_dir():
        raise kind.error(f"Output path {output_dir} exists and is not a directory.")
    if not overwrite:
        raise kind.error(f"Output directory {output_dir} already exists; pass --overwrite to replace it.")
    for location in inputs:
        if Path(location).resolve().is_relative_to(resolved):
            raise kind.error(f"{output_dir} contains the input {location}; --overwrite would delete it.")
    check_replaceable(output_dir, kind)


def remove_stalework_folders(output_dir: Path) -> None:
    """Remove the work folders that killed conversions to `output_dir` left beside it.

    A run killed between moving the old output aside and moving the new one in left the old folder in `old/`: it is put
    back where it was.
    """
    prefix = f".{output_dir.name}.partial-"
    try:
        candidates = sorted(output_dir.parent.iterdir())
    except OSError:  # no parent folder yet, or an unreadable one: nothing of ours there
        return
    for work in candidates:
        if not work.name.startswith(prefix) or work.is_symlink() or not work.is_dir() or not _abandoned(work):
            continue
        old = work / "old"
        if old.is_dir() and not os.path.lexists(output_dir):
            try:
                os.replace(old, output_dir)
            except OSError:
                continue  # the only copy of the previous output: leave it
        shutil.rmtree(work, ignore_errors=True)
        logger.warning(f"Removed {work}, left behind by an interrupted run.")


def _abandoned(work: Path) -> bool:
    """Whether the work folder `work`'s record names a process known to be gone (an unreadable record: not known)."""
    try:
        record = read_record(work, OSError)
    except OSError:
        return False
    return record is not None and record.owner is not None and owner_is_gone(record.owner)


def current_umask() -> int:
    umask = os.umask(0o077)  # briefly the strictest mask, so that a file created meanwhile is never too open
    os.umask(umask)
    return umask


def new_file_mode() -> int:
    """The permissions a new file gets under the current umask (what `open` would give it)."""
    return 0o666 & ~current_umask()


@contextmanager
def parent_folders(path: Path) -> Iterator[None]:
    """Create the missing parent folders of `path`; when the block fails, remove again those that this call created
    and that are still empty, so that a failed command leaves the file system as it found it."""
    created = [parent for parent in path.parents if not parent.exists()]  # the deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for parent in created:
            try:
                parent.rmdir()
            except OSError:  # not empty (something else wrote there meanwhile) or already gone: leave it
                break
        raise


@contextmanager
def work_folder(output_dir: Path, tool: str) -> Iterator[Path]:
    """Yield an empty `model/` folder inside a new hidden work folder beside `output_dir`, whose record names `tool`
    and this process as its owner (`folder_record`). The work folder is removed on exit, unless it holds the previous
    output that could not be put back; parent folders created for it are removed again when the block fails."""
    with parent_folders(output_dir):
        work = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.partial-"))
        try:
            (work / FOLDER_RECORD).write_text(FolderRecord(tool, {}, owner_record()).text(), encoding="utf-8")
            model = work / "model"
            model.mkdir()  # unlike the mkdtemp folder (0700), with the umask's permissions
            yield model
        finally:
            if not (work / "old").exists():
                shutil.rmtree(work, ignore_errors=True)


def move_into_place(model: Path, output_dir: Path, kind: OutputKind) -> None:
    """Rename the finished `model` folder to `output_dir`. An existing output is moved aside into the work folder first
    and removed once the new folder is in place, or put back if that fails."""
    if not output_dir.exists():
        os.replace(model, output_dir)
        return
    check_replaceable(output_dir, kind)  # again: it may have changed while the conversion ran
    old = model.parent / "old"
    os.replace(output_dir, old)
    try:
        os.replace(model, output_dir)
    except OSError as error:
        try:
            os.replace(old, output_dir)
        except OSError:
            raise kind.error(
                f"Could not move the new folder to {output_dir} ({reason_of(error)}) nor the previous one back; the "
                f"previous one is in {old}."
            ) from error
        raise
    shutil.rmtree(old, ignore_errors=True)


def prepare_output(output_dir: Path, overwrite: bool, inputs: tuple[str, ...], kind: OutputKind) -> None:
    """Before any work: clean up after killed runs, then refuse an output that a new folder of `kind` must not
    replace (every tool that writes a folder with this policy calls it first)."""
    remove_stalework_folders(output_dir)  # first: it may put back an output that a killed run had moved aside
    check_output(output_dir, overwrite, inputs, kind)


def check_output_file(output: Path, overwrite: bool, label: str, error: type[Exception]) -> None:
    """Refuse, before any work, an output file that is a folder, lies in a folder that does not exist, or exists
    without `overwrite`; `label` names it in the message (`--output`), `error` is the exception raised."""
    if output.is_dir():
        raise error(f"{label} {output} is a directory; give a file name.")
    if not output.parent.is_dir():
        raise error(f"{label} {output}: the folder {output.parent} does not exist.")
    if output.exists() and not overwrite:
        raise error(f"{label} {output} exists; pass --overwrite to replace it.")


@contextmanager
def path_replaced_atomically(
    target: Path,
    error: type[Exception],
    folder: Path | None = None,
    before_rename: Callable[[Path], None] | None = None,
) -> Iterator[Path]:
    """The one atomic write of the package: the path of a new temporary file in `folder` (default: beside `target`),
    for the block to write, that becomes `target` when the block ends (synced, with the umask's permissions,
    `before_rename` called with the finished temporary file just before) and is deleted if anything fails; an OS or
    HDF5 failure becomes `error("Cannot write TARGET: CAUSE")` (an `error` raised as such passes unchanged). For a
    writer that takes a path (an exporter, `safetensors`); `replaced_atomically` gives a stream."""
    try:
        descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder or target.parent)
        os.close(descriptor)
    except OSError as failure:
        raise error(f"Cannot write {target}: {reason_of(failure, with_file=False)}") from failure
    temporary = Path(name)
    try:
        yield temporary
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.chmod(temporary, new_file_mode())  # as any new file (mkstemp creates it 0600)
        if before_rename is not None:
            before_rename(temporary)
        os.replace(temporary, target)
    except error:
        raise
    except (OSError, RuntimeError) as failure:
        raise error(f"Cannot write {target}: {reason_of(failure, with_file=False)}") from failure
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def replaced_atomically(target: Path, error: type[Exception], **where: Any) -> Iterator[BinaryIO]:
    """`path_replaced_atomically` (the same arguments) as a binary stream to the temporary file."""
    with path_replaced_atomically(target, error, **where) as temporary, open(temporary, "w+b") as stream:
        yield stream


def write_text_atomically(path: Path, text: str, error: type[Exception]) -> None:
    """Write `text` (UTF-8) to `path` through `replaced_atomically`: complete or not at all."""
    with replaced_atomically(path, error) as stream:
        stream.write(text.encode("utf-8"))


class RunFolderError(ToolInputError, ValueError):
    """An `--output_dir` that a Trainer command must not or cannot write to."""


def foreign_run_entries(folder: Path, prog: str, earlier_runs: bool = False) -> list[str]:
    """The entries of the Trainer `--output_dir` `folder` that are not `prog`'s: those its record does not list; none
    while the record names a run of `prog` that did not finish (it may resume there). A folder without a record holds
    only foreign entries, unless `earlier_runs` (the run resumed there may be an earlier version's: it kept none)."""
    record = read_record(folder, RunFolderError)
    if record is None and earlier_runs or record is not None and record.tool == prog and not record.complete:
        return []
    return unlisted_entries(folder, record if record is not None and record.tool == prog else None)


def check_run_folder(output_dir: str | os.PathLike, foreign: Callable[[Path], list[str]], refusal: str) -> None:
    """Refuse, before any work and again under the run's lock (`output_lock`), an `--output_dir` that is a file, that
    cannot be created or written, or whose entries include some that `foreign(folder)` names (`foreign_run_entries`,
    or `unlisted_entries(folder, None)`: every entry); `refusal` ends that message, with `{shown}` for their names."""
    path = Path(output_dir)
    if path.is_dir() and (entries := foreign(path)):
        raise RunFolderError(f"--output_dir {output_dir} " + refusal.format(shown=listed(entries, 3)))
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RunFolderError(f"--output_dir {output_dir}: {existing} is a file, not a folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunFolderError(f"--output_dir {output_dir}: {existing} is not writable.")


def claim_run_folder(folder: str | os.PathLike, prog: str) -> None:
    """Create `folder` and record a run of `prog` as started in it by this process (after every input was checked),
    in place of an earlier version's record."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    previous = read_record(folder, RunFolderError)
    write_text_atomically(folder / FOLDER_RECORD, FolderRecord(prog, {}, owner_record()).text(), RunFolderError)
    if previous is not None and previous.name != FOLDER_RECORD and previous.tool == prog:
        (folder / previous.name).unlink()


def seal_run_folder(folder: str | os.PathLike, prog: str) -> None:
    """Record every file under `folder` (with its size and SHA-256) as written by the run of `prog` that claimed it."""
    folder = Path(folder)
    paths = sorted(path for path in folder.rglob("*") if path.is_file() and path != folder / FOLDER_RECORD)
    files = {path.relative_to(folder).as_posix(): file_entry(path) for path in paths}
    write_text_atomically(folder / FOLDER_RECORD, FolderRecord(prog, files).text(), RunFolderError)
