"""The one ownership rule of a folder written whole (issue 46, item 2): it carries the record of what the tool wrote
(names, sizes, SHA-256); `--overwrite` replaces only such a folder; one written by an earlier version (no record)
still loads, and the refusal to replace it says what to do. Every folder the package writes keeps that one record,
read by one reader, earlier versions' records included (issue 52, point 3; the Trainer run folders' own tests read
theirs)."""

import json
import shutil

import pytest

from modeling_elmo import ElmoModel
from modeling_elmo.conversion.convert import ConversionError, convert_checkpoint
from modeling_elmo.conversion.export import export_model
from modeling_elmo.foundation.file_hash import file_entry, sha256_of
from modeling_elmo.foundation.folder_record import (
    FOLDER_RECORD,
    FolderRecord,
    owner_record,
    read_record,
    unlisted_entries,
)
from modeling_elmo.foundation.output_folder import claim_run_folder, foreign_run_entries, seal_run_folder, work_folder
from modeling_elmo.foundation.owned_files import claim_file, output_claimed


def test_a_converted_folder_lists_every_file_it_holds(converted_fixture):
    record = json.loads((converted_fixture / FOLDER_RECORD).read_text(encoding="utf-8"))
    files = sorted(path for path in converted_fixture.iterdir() if path.name != FOLDER_RECORD)
    assert record["tool"] == "elmo-convert"
    assert record["files"] == {path.name: {"bytes": path.stat().st_size, "sha256": sha256_of(path)} for path in files}


def test_an_earlier_version_s_folder_loads_and_is_not_replaced(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    (output / FOLDER_RECORD).unlink()  # as an earlier version wrote it
    before = {path.name: path.read_bytes() for path in output.iterdir()}
    assert ElmoModel.from_pretrained(output).config.model_type == "elmo"  # no record needed to read it
    with pytest.raises(ConversionError, match=f"has no {FOLDER_RECORD}.*delete the folder yourself"):
        convert_checkpoint(str(options), str(weights), output, overwrite=True)
    assert {path.name: path.read_bytes() for path in output.iterdir()} == before


def test_a_folder_of_another_tool_is_not_replaced(converted_fixture, tmp_path):
    output = tmp_path / "out"
    shutil.copytree(converted_fixture, output)
    with pytest.raises(ConversionError, match=f"its {FOLDER_RECORD} says elmo-convert wrote it"):
        export_model(converted_fixture, output, overwrite=True)
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in converted_fixture.iterdir())


# issue 52, point 3: one record for every folder the package writes, one reader, earlier versions' records read too


def test_the_one_reader_reads_converted_exported_and_work_folders(converted_fixture, tmp_path):
    converted = read_record(converted_fixture, AssertionError)
    assert converted.tool == "elmo-convert" and converted.complete and "model.safetensors" in converted.files
    assert unlisted_entries(converted_fixture, converted) == []
    exported = tmp_path / "exported"
    export_model(converted_fixture, exported)
    record = read_record(exported, AssertionError)
    assert record.tool == "elmo-export" and record.complete and "lm_weights.hdf5" in record.files
    with work_folder(tmp_path / "out", "elmo-convert") as model:
        work = read_record(model.parent, AssertionError)
        assert work.tool == "elmo-convert" and work.owner == owner_record() and not work.complete


def test_an_output_claim_holds_the_owner_record_of_work_folders(tmp_path):
    with output_claimed(tmp_path / "out", "elmo-embed", RuntimeError):
        assert json.loads(claim_file(tmp_path / "out").read_text()) == owner_record()


def write_classifier_marker(folder, record: dict) -> None:
    """An `elmo-train-classifier` run folder's marker as earlier versions wrote it."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    (folder / ".elmo-train-classifier.json").write_text(text, encoding="utf-8")


def test_earlier_versions_records_are_read_through_the_one_reader(tmp_path):
    sealed, earliest, started, work = (tmp_path / name for name in ("sealed", "earliest", "started", "work"))
    for folder in (sealed, earliest, started, work):
        folder.mkdir()
    (sealed / "checkpoint-1").mkdir()
    (sealed / "checkpoint-1" / "model.safetensors").write_text("weights")
    (sealed / "README.md").write_text("card")
    entry = {"bytes": 5, "sha256": "0" * 64}
    write_classifier_marker(
        sealed, {"complete": True, "files": {"README.md": entry, "checkpoint-1/model.safetensors": entry}}
    )
    write_classifier_marker(earliest, {"complete": True, "files": ["README.md"]})
    write_classifier_marker(started, {"complete": False, "files": []})
    (work / "owner.json").write_text(json.dumps({"host": "elsewhere", "pid": 12}))

    record = read_record(sealed, AssertionError)
    assert record.tool == "elmo-train-classifier" and record.complete and record.name == ".elmo-train-classifier.json"
    assert unlisted_entries(sealed, record) == []
    (sealed / "notes.txt").write_text("mine")
    assert unlisted_entries(sealed, record) == ["notes.txt"]
    assert read_record(earliest, AssertionError).files == {"README.md": {}}
    assert not read_record(started, AssertionError).complete
    assert read_record(work, AssertionError) == FolderRecord(None, {}, {"host": "elsewhere", "pid": 12}, "owner.json")
    assert read_record(tmp_path / "none", AssertionError) is None
    (work / "owner.json").write_text("{not json")
    with pytest.raises(ValueError, match="owner.json is unreadable"):
        read_record(work, ValueError)


def test_a_run_folder_of_an_earlier_version_is_reused_and_its_record_replaced(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "README.md").write_text("card")
    write_classifier_marker(folder, {"complete": True, "files": {"README.md": file_entry(folder / "README.md")}})
    assert foreign_run_entries(folder, "elmo-train-classifier") == []
    assert foreign_run_entries(folder, "elmo-train-ner") == [".elmo-train-classifier.json", "README.md"]
    claim_run_folder(folder, "elmo-train-classifier")
    assert sorted(path.name for path in folder.iterdir()) == [FOLDER_RECORD, "README.md"]
    assert read_record(folder, AssertionError).owner == owner_record()
    seal_run_folder(folder, "elmo-train-classifier")
    record = read_record(folder, AssertionError)
    assert record == FolderRecord("elmo-train-classifier", {"README.md": file_entry(folder / "README.md")})


def test_unlisted_entries_are_the_one_check_of_what_a_folder_holds(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "empty").mkdir()
    for name in ("listed", "sub/listed", "other"):
        (tmp_path / name).write_text(name)
    (tmp_path / "link").symlink_to(tmp_path / "listed")
    record = FolderRecord("elmo-train-ner", {"listed": {}, "sub/listed": {}, "link": {}})
    assert unlisted_entries(tmp_path, record) == ["empty/", "link", "other"]
    assert unlisted_entries(tmp_path, None) == ["empty/", "link", "listed", "other", "sub/"]
