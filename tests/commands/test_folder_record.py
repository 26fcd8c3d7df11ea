"""The one ownership rule of a folder written whole (issue 46, item 2): it carries the record of what the tool wrote
(names, sizes, SHA-256); `--overwrite` replaces only such a folder; one written by an earlier version (no record)
still loads, and the refusal to replace it says what to do."""

import json
import shutil

import pytest

from modeling_elmo import ElmoModel
from modeling_elmo.conversion.convert import ConversionError, convert_checkpoint
from modeling_elmo.conversion.export import export_model
from modeling_elmo.foundation.file_hash import sha256_of
from modeling_elmo.foundation.output_folder import FOLDER_RECORD


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
