"""What a new user meets (issue 46, item 7): an original checkpoint's folder given as `--model`, `elmo --help`'s
line for `embed`, a real work folder holding a foreign file, and what a resumed Parquet run reused."""

import shutil
import subprocess
import sys

import pytest

from modeling_elmo.embed import cli
from modeling_elmo.foundation.errors import ToolError
from modeling_elmo.foundation.model_location import NOT_A_MODEL_FOLDER


def test_an_original_checkpoint_folder_as_the_model_is_named_so(tmp_path, fixture_dir, capsys):
    corpus = tmp_path / "in.txt"
    corpus.write_text("a b\n", encoding="utf-8")
    assert cli.main([str(corpus), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir), "--no-progress"]) != 0
    error = capsys.readouterr().err
    assert "not a model folder: it has no config.json" in error and "None" not in error


def test_elmo_export_onnx_gives_an_original_checkpoint_folder_the_reason_elmo_embed_gives(tmp_path, fixture_dir):
    from modeling_elmo.deploy.arguments import check_onnx_export_command_line
    from modeling_elmo.inference.pretrained import ModelLoadError, load_pretrained_model

    with pytest.raises(ModelLoadError) as loading:  # what elmo-embed, the embedder and the drop-ins report
        load_pretrained_model(fixture_dir)
    with pytest.raises(ToolError) as caught:
        check_onnx_export_command_line([str(fixture_dir), str(tmp_path / "out.onnx")])
    assert (
        loading.value.reason == NOT_A_MODEL_FOLDER and str(caught.value) == f"{fixture_dir} is {NOT_A_MODEL_FOLDER}."
    )


def test_elmo_help_names_both_output_formats():
    help_text = subprocess.run(
        [sys.executable, "-c", "from modeling_elmo.commands.elmo import main; main(['--help'])"],
        capture_output=True,
        text=True,
    ).stdout
    line = next(line for line in help_text.splitlines() if line.strip().startswith("embed "))
    assert "HDF5 or Parquet" in line and "to-parquet" in line


def test_a_foreign_file_in_a_real_work_folder_is_named_as_such(tmp_path, converted_fixture, capsys):
    corpus, output = tmp_path / "in.txt", tmp_path / "out.hdf5"
    corpus.write_text("the bank\nriver boats\n", encoding="utf-8")
    arguments = [str(corpus), str(output), "--model", str(converted_fixture), "--no-progress", "--batch-size", "1"]
    assert cli.main(arguments) == 0
    shutil.move(output, tmp_path / "first.hdf5")
    work = tmp_path / "out.hdf5.parts"
    # an interrupted run's work folder: start the same run and stop it after its first batch
    from modeling_elmo.embed import store

    write = store.PartStore.write

    def one_then_stop(self, *args, **kwargs):
        write(self, *args, **kwargs)
        raise KeyboardInterrupt

    store.PartStore.write = one_then_stop
    try:
        assert cli.main(arguments) == 130
    finally:
        store.PartStore.write = write
    (work / "notes.txt").write_text("mine", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(arguments) != 0
    error = capsys.readouterr().err
    assert "holds files elmo-embed did not write (notes.txt)" in error and "not an elmo-embed work folder" not in error
    assert (work / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_resumed_parquet_run_says_what_it_reused(tmp_path, converted_fixture, capsys):
    corpus, output = tmp_path / "in.txt", tmp_path / "out"
    corpus.write_text("the bank\nriver boats\na\n", encoding="utf-8")
    arguments = [str(corpus), str(output), "--model", str(converted_fixture), "--format", "parquet", "--window", "1"]
    assert cli.main([*arguments, "--no-progress"]) == 0
    (output / "part-00000002.parquet").unlink()  # as if the run had been stopped before its last part
    capsys.readouterr()
    assert cli.main([*arguments, "--no-progress"]) == 0
    assert "(1 part(s); 2 finished part(s) reused)" in capsys.readouterr().out
