"""Of two runs into one output, one proceeds and the other refuses at once, in one line naming the output and the run
holding it (issue 46, item 1), for every command family: conversion (`elmo-convert`, `elmo-export`,
`elmo-export-onnx`), embedding (`elmo-embed` HDF5 and Parquet, `to-parquet`) and the Trainer commands
(`elmo-train-ner`). Real processes: the first run is the real command, paused by a barrier right after it took its
output's claim (before it checks the output), so that the second always starts while the first holds it; then the
first is released and finishes. Merging, where one process's claim stands for the other run, is tested in-process."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import pytest
from safetensors.torch import load_file

from modeling_elmo.foundation import owned_files
from modeling_elmo.foundation.folder_record import FOLDER_RECORD

pytestmark = pytest.mark.integration

# the real command, paused once it holds its output's claim: writes argv[1] (its pid) and waits for argv[2] to exist
PAUSED_RUN = """
import contextlib, os, sys, time
from pathlib import Path
from modeling_elmo.foundation import owned_files
from modeling_elmo.foundation.folder_record import FOLDER_RECORD
from modeling_elmo.commands.elmo import main

ready, release = Path(sys.argv[1]), Path(sys.argv[2])
claimed = owned_files.claimed

@contextlib.contextmanager
def paused(path, *args, **kwargs):
    with claimed(path, *args, **kwargs):
        if path.name.endswith(".claim"):
            ready.write_text(str(os.getpid()))
            while not release.exists():
                time.sleep(0.05)
        yield

owned_files.claimed = paused
sys.exit(main(sys.argv[3:]))
"""
ELMO = "import sys; from modeling_elmo.commands.elmo import main; sys.exit(main())"  # `elmo ARGS...`
ENVIRONMENT = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def two_runs(tmp_path: Path, first: list[str], second: list[str]) -> tuple[subprocess.CompletedProcess, str, int]:
    """Start `elmo FIRST...` paused under its claim, run `elmo SECOND...` to its end meanwhile, then release the
    first; the first's outcome, the second's standard error and the first's pid."""
    ready, release = tmp_path / "ready", tmp_path / "release"
    command = [sys.executable, "-c", PAUSED_RUN, str(ready), str(release), *first]
    holder = subprocess.Popen(command, env=ENVIRONMENT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the first run never took its claim"
            time.sleep(0.05)
        refused = subprocess.run(
            [sys.executable, "-c", ELMO, *second],
            env=ENVIRONMENT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert refused.returncode in (1, 2), refused  # the exit status of the command's other output refusals
        release.touch()
        out, err = holder.communicate(timeout=300)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    return subprocess.CompletedProcess(first, holder.returncode, out, err), refused.stderr, int(ready.read_text())


def assert_refused(stderr: str, output: Path, holder: int) -> None:
    """One line naming the output and the process holding it."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert str(output) in lines[0] and f"pid {holder} on " in lines[0], lines[0]


def test_two_conversions_into_one_output(tmp_path, fixture_dir, random_checkpoint, converted_fixture):
    output = tmp_path / "out"
    options, weights = random_checkpoint()
    fixture = ["--options", str(fixture_dir / "options.json"), "--weights", str(fixture_dir / "lm_weights.hdf5")]
    first = ["convert", *fixture, "--output", str(output)]
    second = ["convert", "--options", str(options), "--weights", str(weights), "--output", str(output)]
    done, refused, holder = two_runs(tmp_path, first, second)
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)
    written = load_file(output / "model.safetensors")
    expected = load_file(converted_fixture / "model.safetensors")
    assert written.keys() == expected.keys() and all(written[key].equal(expected[key]) for key in expected)
    assert not list(tmp_path.glob(".out.claim"))


def test_two_exports_into_one_output(tmp_path, converted_fixture):
    output = tmp_path / "exported"
    command = ["export", str(converted_fixture), "--output", str(output), "--overwrite"]
    done, refused, holder = two_runs(tmp_path, command, command)
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)
    assert sorted(path.name for path in output.iterdir()) == [FOLDER_RECORD, "lm_weights.hdf5", "options.json"]


def test_two_onnx_exports_into_one_file(tmp_path, converted_fixture):
    pytest.importorskip("onnxruntime")
    output = tmp_path / "elmo.onnx"
    command = ["export-onnx", str(converted_fixture), str(output)]
    done, refused, holder = two_runs(tmp_path, command, command)
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)
    assert output.is_file()


@pytest.mark.parametrize("output_format", ["hdf5", "parquet"])
def test_two_embeddings_into_one_output(tmp_path, converted_fixture, output_format):
    first_input, second_input = tmp_path / "first.txt", tmp_path / "second.txt"
    first_input.write_text("the bank closed .\nriver boats\n", encoding="utf-8")
    second_input.write_text("a different corpus\n", encoding="utf-8")
    output = tmp_path / ("out.hdf5" if output_format == "hdf5" else "out")
    options = ["--model", str(converted_fixture), "--format", output_format, "--no-progress"]
    done, refused, holder = two_runs(
        tmp_path,
        ["embed", str(first_input), str(output), *options],
        ["embed", str(second_input), str(output), *options],
    )
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)
    if output_format == "hdf5":
        with h5py.File(output) as handle:
            assert sorted(key for key in handle if key.isdigit()) == ["0", "1"]  # the first run's two lines
    else:
        import pyarrow.dataset

        assert sorted(pyarrow.dataset.dataset(output).to_table()["id"].to_pylist()) == [0, 1]


def test_two_conversions_to_parquet_into_one_folder(tmp_path, converted_fixture):
    from modeling_elmo.embed import cli

    corpus, hdf5 = tmp_path / "corpus.txt", tmp_path / "corpus.hdf5"
    corpus.write_text("the bank closed .\nriver boats\n", encoding="utf-8")
    assert cli.main([str(corpus), str(hdf5), "--model", str(converted_fixture), "--no-progress"]) == 0
    output = tmp_path / "parquet"
    command = ["embed", "to-parquet", str(hdf5), str(output)]
    done, refused, holder = two_runs(tmp_path, command, command)
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)


def test_two_trainer_runs_into_one_output_dir(tmp_path, converted_fixture):
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n", encoding="utf-8")
    output = tmp_path / "ner"
    command = [
        "train-ner",
        f"--model_name_or_path={converted_fixture}",
        f"--train_file={train}",
        f"--output_dir={output}",
        "--max_steps=1",
        "--report_to=none",
    ]
    done, refused, holder = two_runs(tmp_path, command, command)
    assert done.returncode == 0, done.stderr
    assert_refused(refused, output, holder)
    assert (output / "model.safetensors").is_file()


def test_a_merge_into_a_claimed_output_is_refused(tmp_path):
    """`elmo-embed merge` claims its output before reading a shard: with another thread of this process holding the
    claim (standing for the other run), it refuses in one line naming this pid, and writes nothing."""
    from modeling_elmo.embed import cli

    output, holding, release = tmp_path / "merged.hdf5", threading.Event(), threading.Event()

    def hold() -> None:
        with owned_files.output_claimed(output, "elmo-embed merge", RuntimeError):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holding.wait(30)
        with pytest.raises(cli.ToolError) as refusal:
            cli._merge([str(output), str(tmp_path / "missing.shard-00000-of-00002.hdf5")])
    finally:
        release.set()
        holder.join()
    assert f"{output} is being written by another elmo-embed merge run (pid {os.getpid()} on " in str(refusal.value)
    assert sorted(path.name for path in tmp_path.iterdir()) == []
