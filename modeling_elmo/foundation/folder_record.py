"""The one record of what the package wrote in a folder, and of the process writing there.

Every folder a command writes as its own (a converted or exported folder, the work folder beside it, a Trainer
command's `--output_dir`, an `elmo-embed` Parquet folder and HDF5 work folder) carries `FOLDER_RECORD`, one JSON
object:

    {"tool": "elmo-convert", "files": {"config.json": {"bytes": 512, "sha256": "..."}, ...}}

`files` lists each file the tool wrote there by its path relative to the folder, with its `file_entry`; while the
tool is still writing, `owner` names the process (`owner_record`: `{"host", "pid"}`, the same record an output's claim
file holds) and the folder is not yet the tool's finished work. A folder filled file by file also names its `run`
(what it is the output of: a rerun with the same `run` resumes there), and one that receives many files lists them in
a `journal` beside the record instead (`owned_files`: one JSON line per file, `{"name", "bytes", "sha256"}`, appended;
a torn last line is ignored). `read_record` is the one reader, journal included; the records of earlier versions
(`legacy_record`) read as this one. `unlisted_entries` is the one check for what a folder holds beyond its record.
"""

import json
import os
import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import reason_of

FOLDER_RECORD = ".elmo-files.json"
LEGACY_MARKER = ".elmo-train-classifier.json"  # earlier versions' record of an elmo-train-classifier --output_dir
LEGACY_OWNER_FILE = "owner.json"  # earlier versions' record of a work folder: its owner alone
LEGACY_PARQUET_RECORD = ".elmo-embed-run.json"  # earlier versions' record of a Parquet folder: its run and files
LEGACY_MANIFEST, LEGACY_JOURNAL = "manifest.json", "parts.jsonl"  # earlier versions' HDF5 work folder: run, journal
RECORD_FILES = (FOLDER_RECORD, LEGACY_MARKER, LEGACY_PARQUET_RECORD, LEGACY_MANIFEST, LEGACY_OWNER_FILE)  # first read
OWNER_ERRORS = (OSError, ValueError, KeyError, TypeError)


def owner_record() -> dict:
    """This process, as a record names it: `{"host": ..., "pid": ...}`."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def describe_owner(owner: dict | None) -> str:
    """The process `owner` names ("pid 123 on host"), or what one that left no record of itself is called."""
    try:
        return f"pid {int(owner['pid'])} on {owner['host']}"
    except OWNER_ERRORS:
        return "a process that left no record of itself"


def owner_is_gone(owner: dict | None) -> bool:
    """Whether `owner` names a process known to be gone: this host and a pid that no longer runs. Anything else (no
    record, another host, a pid alive under another user) is taken as alive."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # alive under another user, or not a pid at all
        return False
    return False


@dataclass(frozen=True)
class FolderRecord:
    """A folder's record: the `tool` that wrote it, the `files` it lists (relative path -> `file_entry`, empty where
    an earlier version kept only names), the `owner` still writing there (None: the tool finished; `{}` where an
    earlier version did not say which process), `name`, the file it was read from, and for a folder filled file by
    file its `run` and the `journal` listing its files (see the module docstring)."""

    tool: str | None
    files: dict[str, dict] = field(default_factory=dict)
    owner: dict | None = None
    name: str = FOLDER_RECORD
    run: dict | None = None
    journal: str | None = None

    @property
    def complete(self) -> bool:
        return self.owner is None

    def text(self) -> str:
        """The record as `FOLDER_RECORD` holds it (a journal's files stay in the journal)."""
        record = {"tool": self.tool, "files": {} if self.journal else self.files}
        optional = {"owner": self.owner, "run": self.run, "journal": self.journal}
        record.update((key, value) for key, value in optional.items() if value is not None)
        return json.dumps(record, indent=1, sort_keys=True) + "\n"


def legacy_record(name: str, record: dict) -> FolderRecord:
    """An earlier version's record, the JSON object of the file `name`, as a `FolderRecord`: the marker of an
    `elmo-train-classifier` `--output_dir` (`LEGACY_MARKER`: `{"complete": bool, "files": {path: entry}}`, earliest
    `files`: a list of names), the owner file of a work folder (`LEGACY_OWNER_FILE`: `{"host", "pid"}`), the record of
    an `elmo-embed` Parquet folder (`LEGACY_PARQUET_RECORD`: its run's fields and `files`) or the manifest of its HDF5
    work folder (`LEGACY_MANIFEST`: the run; its files in `LEGACY_JOURNAL`). Raises `KeyError`, `TypeError` or
    `ValueError` where it is not one."""
    if name == LEGACY_OWNER_FILE:
        return FolderRecord(None, {}, record, name)
    if name == LEGACY_MANIFEST:
        return FolderRecord("elmo-embed", {}, None, name, run=record, journal=LEGACY_JOURNAL)
    if name == LEGACY_PARQUET_RECORD:
        run = {key: value for key, value in record.items() if key != "files"}
        return FolderRecord("elmo-embed", dict(record.get("files", {})), None, name, run=run)
    files = record["files"]
    files = dict.fromkeys(files, {}) if isinstance(files, list) else dict(files)
    return FolderRecord("elmo-train-classifier", files, None if record["complete"] else {}, name)


def record_file(folder: Path) -> Path | None:
    """The record file `folder` holds (the first of `RECORD_FILES` there); None where it holds none."""
    return next((folder / name for name in RECORD_FILES if (folder / name).is_file()), None)


def read_record(folder: Path, error: type[Exception]) -> FolderRecord | None:
    """The one reader of a folder's record: `FOLDER_RECORD`, else an earlier version's (`legacy_record`); None where
    the folder has none; `error` naming the file where it cannot be read."""
    path = record_file(folder)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        if path.name != FOLDER_RECORD:
            found = legacy_record(path.name, record)
        elif not all(isinstance(record.get(key, {}), dict) for key in ("files", "owner", "run")):
            raise ValueError("not a JSON object with a files object")
        elif not isinstance(record.get("journal", ""), str) or "/" in record.get("journal", ""):
            raise ValueError("its journal is not a file name")
        else:
            found = FolderRecord(
                record.get("tool"),
                record.get("files", {}),
                record.get("owner"),
                run=record.get("run"),
                journal=record.get("journal"),
            )
    except OWNER_ERRORS as failure:
        raise error(f"{path} is unreadable ({reason_of(failure, with_file=False)}).") from failure
    return replace(found, files=read_journal(folder / found.journal, error)) if found.journal else found


def read_journal(path: Path, error: type[Exception], writes: re.Pattern[str] | None = None) -> dict[str, dict]:
    """The files the journal `path` lists (none where it does not exist); its last line is ignored unless complete (a
    torn append); `error` naming the line where one is damaged, or lists a name that `writes` does not match."""
    try:
        lines = path.read_bytes().split(b"\n")[:-1]  # what follows the last newline is torn, or nothing
    except FileNotFoundError:
        return {}
    except OSError as failure:
        raise error(f"{path} is unreadable ({reason_of(failure, with_file=False)}).") from failure
    files = {}
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            name = entry.pop("name")
            if not isinstance(name, str) or writes is not None and not writes.fullmatch(name):
                raise ValueError("it lists a file the tool does not write")
        except (ValueError, KeyError, TypeError, AttributeError) as failure:
            raise error(f"{path} is damaged at line {number} ({reason_of(failure)}).") from failure
        files[name] = entry  # a later line for a name replaces an earlier one
    return files


def unlisted_entries(folder: Path, record: FolderRecord | None) -> list[str]:
    """The entries of `folder` that `record` does not list, sorted (a folder's name ends with `/`): anything but the
    record itself, a listed file, or a folder holding listed files; a symbolic link is never listed. Without a record,
    every entry."""
    listed_folders = {path.split("/")[0] for path in record.files if "/" in path} if record else set()
    unlisted = []
    for entry in sorted(folder.iterdir(), key=lambda path: path.name):
        name, is_folder = entry.name, entry.is_dir() and not entry.is_symlink()
        own = record is not None and (
            name == record.name
            or (name in listed_folders if is_folder else name in record.files and not entry.is_symlink())
        )
        if not own:
            unlisted.append(name + ("/" if is_folder else ""))
    return unlisted
