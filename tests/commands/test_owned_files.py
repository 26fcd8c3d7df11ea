"""`foundation.owned_files`, the foundation of every file the package writes: one lock, one file hash, and a folder
owned by content (its record lists each finished file with size and sha256 before the file takes its name)."""

import hashlib
import json
import os
import re

import pytest

from modeling_elmo.foundation.file_hash import sha256_of
from modeling_elmo.foundation.folder_record import FOLDER_RECORD
from modeling_elmo.foundation.owned_files import OwnedFolder, claimed


class Refused(Exception):
    pass


class Killed(Exception):
    pass


def _folder_with_one_file(path, data: bytes) -> OwnedFolder:
    """A folder of the run `{"run": 1}` in which `part-0.bin` (holding `data`) is finished."""
    folder = OwnedFolder(path, "the-tool", re.compile(r"part-\d\.bin"), Refused)
    with folder.locked():
        folder.start({"run": 1})
        with folder.writing("part-0.bin") as stream:
            stream.write(data)
    return folder


def test_sha256_of_is_the_files_sha256_and_sees_every_chunk(tmp_path):
    data = os.urandom(5 << 20)  # more than one chunk
    (tmp_path / "data").write_bytes(data)
    chunks = []
    assert sha256_of(tmp_path / "data", chunks.append) == hashlib.sha256(data).hexdigest()
    assert b"".join(chunks) == data and len(chunks) == 2


def test_a_claimed_path_refuses_a_second_claim_until_released(tmp_path):
    path = tmp_path / "lock"
    with claimed(path, "busy: one line", Refused):
        with pytest.raises(Refused, match="^busy: one line$"), claimed(path, "busy: one line", Refused):
            pass
    with claimed(path, "busy", Refused):  # released
        pass


def test_a_file_is_listed_before_it_takes_its_name(tmp_path):
    folder = _folder_with_one_file(tmp_path / "out", b"finished")
    with folder.locked():
        with pytest.raises(Killed), folder.writing("part-1.bin") as stream:  # killed while being written
            stream.write(b"half")
            raise Killed
    record = json.loads((tmp_path / "out" / FOLDER_RECORD).read_text())
    assert record == {
        "tool": "the-tool",
        "run": {"run": 1},
        "files": {"part-0.bin": {"bytes": 8, "sha256": hashlib.sha256(b"finished").hexdigest()}},
    }
    assert folder.is_intact("part-0.bin") and not folder.is_intact("part-1.bin")
    (tmp_path / "out" / "part-0.bin").write_bytes(b"FINISHED")  # same size, other bytes: not trusted
    assert not folder.is_intact("part-0.bin")


def test_only_listed_files_and_own_leftovers_are_removed(tmp_path):
    folder = _folder_with_one_file(tmp_path / "out", b"x")
    (tmp_path / "out" / ".part-1.bin.abcd1234.tmp").write_bytes(b"left by a killed run")
    (tmp_path / "out" / ".notes.abcd1234.tmp").write_bytes(b"the user's")
    with pytest.raises(Refused, match=r"holds files the-tool did not write \(\.notes\.abcd1234\.tmp\)"):
        folder.check_foreign()
    (tmp_path / "out" / ".notes.abcd1234.tmp").unlink()
    folder.check_foreign()
    with folder.locked():
        folder.start({"run": 2}, overwrite=True)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [FOLDER_RECORD]
    assert folder.files() == {}


def test_a_record_listing_a_name_the_tool_does_not_write_is_refused(tmp_path):
    folder = _folder_with_one_file(tmp_path / "out", b"x")
    (tmp_path / "keep").write_bytes(b"outside the folder")
    record = json.loads((tmp_path / "out" / FOLDER_RECORD).read_text())
    record["files"]["../keep"] = record["files"]["part-0.bin"]
    (tmp_path / "out" / FOLDER_RECORD).write_text(json.dumps(record))
    with pytest.raises(Refused, match="lists files the-tool does not write"), folder.locked():
        folder.start({"run": 2}, overwrite=True)
    assert (tmp_path / "keep").read_bytes() == b"outside the folder"


def _journal_folder(path, writes: list[tuple[str, bytes]]) -> OwnedFolder:
    """A journal-mode folder of the run `{"run": 1}` in which each `(name, data)` of `writes` is finished in turn."""
    folder = OwnedFolder(path, "the-tool", re.compile(r"part-\d\.bin"), Refused, journal="j.jsonl")
    with folder.locked():
        folder.start({"run": 1})
        for name, data in writes:
            with folder.writing(name) as stream:
                stream.write(data)
    return folder


def _journal_names(path) -> list[str]:
    return [json.loads(line)["name"] for line in (path / "j.jsonl").read_text().splitlines()]


def test_a_journal_lists_each_file_on_one_appended_line(tmp_path):
    folder = _journal_folder(
        tmp_path / "out", [("part-0.bin", b"zero"), ("part-1.bin", b"one"), ("part-0.bin", b"zero again")]
    )
    assert _journal_names(tmp_path / "out") == ["part-0.bin", "part-1.bin", "part-0.bin"]
    record = {"tool": "the-tool", "run": {"run": 1}, "files": {}, "journal": "j.jsonl"}
    assert json.loads((tmp_path / "out" / FOLDER_RECORD).read_text()) == record  # the record names the run only
    assert folder.files()["part-0.bin"] == {"bytes": 10, "sha256": hashlib.sha256(b"zero again").hexdigest()}
    assert folder.is_intact("part-0.bin") and folder.is_intact("part-1.bin") and folder.foreign() == []


def test_a_torn_last_journal_line_is_ignored_and_cut_off(tmp_path):
    folder = _journal_folder(tmp_path / "out", [("part-0.bin", b"zero")])
    with open(tmp_path / "out" / "j.jsonl", "ab") as handle:
        handle.write(b'{"bytes": 3, "name": "part-1.b')  # killed while appending
    (tmp_path / "out" / "part-1.bin").write_bytes(b"one")
    assert list(folder.files()) == ["part-0.bin"] and folder.foreign() == ["part-1.bin"]
    (tmp_path / "out" / "part-1.bin").unlink()
    with folder.locked(), folder.writing("part-1.bin") as stream:
        stream.write(b"one")
    assert _journal_names(tmp_path / "out") == ["part-0.bin", "part-1.bin"]


@pytest.mark.parametrize("line", [b"not json\n", b'{"name": "../keep", "bytes": 1, "sha256": "0"}\n'])
def test_a_damaged_journal_line_is_refused_naming_the_journal(tmp_path, line):
    folder = _journal_folder(tmp_path / "out", [])
    (tmp_path / "out" / "j.jsonl").write_bytes(line + b'{"name": "part-0.bin", "bytes": 1, "sha256": "0"}\n')
    with pytest.raises(Refused, match=r"j\.jsonl is damaged at line 1"):
        folder.files()


def test_a_new_run_deletes_only_the_files_its_journal_lists(tmp_path):
    folder = _journal_folder(tmp_path / "out", [("part-0.bin", b"zero")])
    (tmp_path / "out" / "part-1.bin").write_bytes(b"not listed")
    with folder.locked():
        folder.start({"run": 2})
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [FOLDER_RECORD, "part-1.bin"]
    assert folder.files() == {} and folder.run() == {"run": 2}


def test_an_owned_folder_checks_its_entries_with_the_one_check_of_unlisted_entries(tmp_path):
    """`OwnedFolder.foreign` is `folder_record.unlisted_entries`, as for every folder the package writes (issue 52):
    a folder is never listed, a symbolic link never the tool's, even under a listed name."""
    folder = _folder_with_one_file(tmp_path / "out", b"x")
    (tmp_path / "out" / "sub").mkdir()
    (tmp_path / "out" / "part-1.bin").symlink_to(tmp_path / "out" / "part-0.bin")
    assert folder.foreign() == ["part-1.bin", "sub/"]
    (tmp_path / "out" / "part-0.bin").unlink()
    (tmp_path / "out" / "part-0.bin").symlink_to(tmp_path / "elsewhere")
    assert folder.foreign() == ["part-0.bin", "part-1.bin", "sub/"]


def test_only_the_tools_own_earlier_record_is_read_as_its_record(tmp_path):
    """An earlier version's record of another kind of folder (an HDF5 work folder's `manifest.json` in a Parquet
    folder) is a foreign file like any other: never read as the run, never deleted."""
    writes = re.compile(r"part-\d\.bin")
    folder = OwnedFolder(tmp_path, "elmo-embed", writes, Refused, earlier=(".elmo-embed-run.json", ".lock"))
    (tmp_path / "manifest.json").write_text('{"run": 1}')
    assert folder.run() is None and folder.foreign() == ["manifest.json"]
    with folder.locked():
        folder.start({"run": 2}, overwrite=True)
    assert (tmp_path / "manifest.json").read_text() == '{"run": 1}' and folder.run() == {"run": 2}
