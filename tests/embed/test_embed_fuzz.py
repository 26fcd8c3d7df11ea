"""`elmo-embed` used carelessly or with hostile input: each case gives one error line naming the culprit, a nonzero
exit, and no output file nor temporary file."""

import fcntl
import json
import shutil
from pathlib import Path

import h5py
import pytest
from test_embed import _leftovers, _run_shards, _write

from modeling_elmo.embed import cli as embed
from modeling_elmo.embed.cli import main
from modeling_elmo.foundation.owned_files import claim_file

TEXT = ["the cat sat on the mat .", "", "a dog barked ."]


@pytest.fixture
def place(tmp_path, converted_fixture) -> Path:
    """A folder with files to misuse: good input, empty, binary, a folder, broken models, a stray HDF5 file."""
    _write(tmp_path / "ok.txt", TEXT)
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)))
    (tmp_path / "adir").mkdir()
    (tmp_path / "bad-config").mkdir()
    (tmp_path / "bad-config" / "config.json").write_text("{not json")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    shutil.copytree(converted_fixture, tmp_path / "bad-weights")
    (tmp_path / "bad-weights" / "model.safetensors").write_bytes(b"\x00 not safetensors")
    with h5py.File(tmp_path / "stray.h5", "w") as handle:
        handle["0"] = [1.0]
    return tmp_path


def _check_error(place: Path, capsys, code: int, expected: list[str], output: Path | None) -> None:
    error = capsys.readouterr().err.strip()
    assert code != 0 and len(error.splitlines()) == 1 and error.startswith("elmo-embed"), (code, error)
    assert all(text in error for text in expected), error
    assert not _leftovers(place) and (output is None or not output.exists())


EMBED_CASES = {
    "empty input": (["empty.txt", "out.h5"], {}, ["empty.txt", "empty"]),
    "binary input": (["binary.txt", "out.h5"], {}, ["binary.txt", "line 2", "not UTF-8"]),
    "missing input": (["missing.txt", "out.h5"], {}, ["missing.txt", "not found"]),
    "input is a folder": (["adir", "out.h5"], {}, ["adir", "not a regular file"]),
    "input is the output": (["ok.txt", "ok.txt", "--overwrite"], {}, ["ok.txt", "is the input"]),
    "missing model": (["ok.txt", "out.h5", "--model", "{place}/no-model"], {}, ["Model folder not found", "no-model"]),
    "broken model config": (["ok.txt", "out.h5", "--model", "{place}/bad-config"], {}, ["bad-config"]),
    "damaged weights": (["ok.txt", "out.h5", "--model", "{place}/bad-weights"], {}, ["bad-weights", "Safetensor"]),
    "not an ELMo model": (["ok.txt", "out.h5", "--model", "{place}/bert"], {}, ["bert", "not an ELMo model"]),
    "batch size 0": (["ok.txt", "out.h5", "--batch-size", "0"], {}, ["--batch-size", "positive integer", "'0'"]),
    "batch size -1": (["ok.txt", "out.h5", "--batch-size", "-1"], {}, ["--batch-size", "positive integer"]),
    "batch size abc": (["ok.txt", "out.h5", "--batch-size", "abc"], {}, ["--batch-size", "'abc'"]),
    "batch size 1.5": (["ok.txt", "out.h5", "--batch-size", "1.5"], {}, ["--batch-size", "'1.5'"]),
    "max tokens 0": (["ok.txt", "out.h5", "--max-tokens-per-batch", "0"], {}, ["--max-tokens-per-batch"]),
    "both batch limits": (
        ["ok.txt", "out.h5", "--batch-size", "2", "--max-tokens-per-batch", "5"],
        {},
        ["not allowed"],
    ),
    "window nan": (["ok.txt", "out.h5", "--window", "nan"], {}, ["--window", "'nan'"]),
    "word cache -1": (["ok.txt", "out.h5", "--word-cache", "-1"], {}, ["--word-cache", "'-1'"]),
    "unknown device": (["ok.txt", "out.h5", "--device", "abacus"], {}, ["abacus", "device"]),
    "unusable device": (["ok.txt", "out.h5", "--device", "cuda:99"], {}, ["cuda:99", "device"]),
    "meta device": (["ok.txt", "out.h5", "--device", "meta"], {}, ["meta", "device"]),
    "unknown layers": (["ok.txt", "out.h5", "--layers", "middle"], {}, ["--layers", "middle"]),
    "unknown option": (["ok.txt", "out.h5", "--frobnicate"], {}, ["--frobnicate"]),
    "no arguments": ([], {}, ["required"]),
    "output is a folder": (["ok.txt", "adir", "--overwrite"], {}, ["adir", "is a directory"]),
    "output folder missing": (["ok.txt", "nowhere/out.h5"], {}, ["nowhere", "does not exist"]),
    "output exists": (["ok.txt", "stray.h5"], {}, ["stray.h5", "--overwrite"]),
    "rank not a number": (["ok.txt", "out.h5"], {"RANK": "one", "WORLD_SIZE": "2"}, ["RANK=one", "WORLD_SIZE=2"]),
    "rank too high": (["ok.txt", "out.h5"], {"RANK": "2", "WORLD_SIZE": "2"}, ["RANK=2", "WORLD_SIZE=2"]),
    "no processes": (["ok.txt", "out.h5"], {"RANK": "0", "WORLD_SIZE": "0"}, ["WORLD_SIZE=0"]),
}


@pytest.mark.parametrize("case", EMBED_CASES)
def test_embed_misuse(place, converted_fixture, monkeypatch, capsys, case):
    arguments, environment, expected = EMBED_CASES[case]
    monkeypatch.chdir(place)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    if arguments and "--model" not in arguments:
        arguments = [*arguments, "--model", str(converted_fixture)]
    before = (place / "ok.txt").read_bytes(), (place / "stray.h5").read_bytes()
    code = main([argument.format(place=place) for argument in arguments] + ["--no-progress"] * bool(arguments))
    _check_error(place, capsys, code, expected, place / "out.h5")
    assert not list(place.glob("*.parts"))  # the checks come before anything is written
    assert ((place / "ok.txt").read_bytes(), (place / "stray.h5").read_bytes()) == before


def test_work_folder_problems(place, converted_fixture, capsys):
    def run(output: str, *extra: str) -> int:
        arguments = [str(place / "ok.txt"), str(place / output), "--model", str(converted_fixture), "--no-progress"]
        return main([*arguments, *extra])

    (place / "file.h5.parts").write_text("a file where the work folder goes")
    _check_error(place, capsys, run("file.h5"), ["file.h5.parts", "not an elmo-embed work folder"], place / "file.h5")
    _check_error(place, capsys, run("file.h5", "--overwrite"), ["file.h5.parts"], place / "file.h5")
    assert (place / "file.h5.parts").read_text() == "a file where the work folder goes"

    (place / "broken.h5.parts").mkdir()
    (place / "broken.h5.parts" / "manifest.json").write_text('{"trunc')
    _check_error(place, capsys, run("broken.h5"), ["manifest.json", "--overwrite"], place / "broken.h5")
    assert run("broken.h5", "--overwrite") == 0

    (place / "busy.h5.parts").mkdir()
    with open(claim_file(place / "busy.h5"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process is writing there: it holds the claim
        _check_error(place, capsys, run("busy.h5"), ["busy.h5", "another elmo-embed run"], None)


@pytest.fixture(scope="module")
def shards(tmp_path_factory, converted_fixture) -> list[Path]:
    """The 2 shards of a 2-process run of a small input."""
    folder = tmp_path_factory.mktemp("fuzz-shards")
    return _run_shards(
        _write(folder / "in.txt", TEXT * 3), folder / "run.h5", converted_fixture, 2, "--batch-size", "2"
    )


def _truncated(shard: Path, fraction: float, place: Path) -> Path:
    data = shard.read_bytes()
    target = place / f"cut-{fraction}.h5"
    target.write_bytes(data[: int(len(data) * fraction)])
    return target


MERGE_CASES = {
    "no shards": (lambda p, s: ["out.h5"], ["required"]),
    "shard missing": (lambda p, s: ["out.h5", s[0], "nothere.h5"], ["nothere.h5", "not found"]),
    "shard not HDF5": (lambda p, s: ["out.h5", s[0], p / "ok.txt"], ["ok.txt", "Cannot read shard"]),
    "shard is a folder": (lambda p, s: ["out.h5", s[0], p / "adir"], ["adir"]),
    "HDF5 but no shard": (lambda p, s: ["out.h5", p / "stray.h5"], ["stray.h5", "not an elmo-embed output"]),
    "empty shard file": (lambda p, s: ["out.h5", s[0], _truncated(s[1], 0, p)], ["cut-0.h5"]),
    "cut after 1%": (lambda p, s: ["out.h5", s[0], _truncated(s[1], 0.01, p)], ["cut-0.01.h5"]),
    "cut in half": (lambda p, s: ["out.h5", s[0], _truncated(s[1], 0.5, p)], ["cut-0.5.h5"]),
    "cut at 90%": (lambda p, s: ["out.h5", s[0], _truncated(s[1], 0.9, p)], ["cut-0.9.h5"]),
    "last byte cut": (lambda p, s: ["out.h5", s[0], _truncated(s[1], 0.9999, p)], ["cut-0.9999.h5"]),
    "same shard twice": (lambda p, s: ["out.h5", s[0], s[0], s[1]], ["run.shard-00000-of-00002.h5", "given twice"]),
    "one shard of two": (lambda p, s: ["out.h5", s[1]], ["shard 0 of 2", "run.shard-00000-of-00002.h5"]),
    "output is a shard": (
        lambda p, s: [s[0], s[0], s[1], "--overwrite"],
        ["run.shard-00000-of-00002.h5", "one of the shards"],
    ),
    "output is a folder": (lambda p, s: [p / "adir", *s, "--overwrite"], ["adir", "is a directory"]),
    "output folder missing": (lambda p, s: [p / "nowhere" / "out.h5", *s], ["nowhere", "does not exist"]),
    "output exists": (lambda p, s: [p / "stray.h5", *s], ["stray.h5", "--overwrite"]),
}


@pytest.mark.parametrize("case", MERGE_CASES)
def test_merge_misuse(place, shards, monkeypatch, capsys, case):
    make_arguments, expected = MERGE_CASES[case]
    monkeypatch.chdir(place)
    before = [shard.read_bytes() for shard in shards]
    code = main(["merge", *map(str, make_arguments(place, shards))])
    _check_error(place, capsys, code, expected, place / "out.h5")
    assert [shard.read_bytes() for shard in shards] == before


def test_input_changed_during_the_run(place, converted_fixture, monkeypatch, capsys):
    original = embed.embed_batch

    def appending(*args):
        with open(place / "ok.txt", "a") as handle:
            handle.write("one more line\n")
        return original(*args)

    monkeypatch.setattr(embed, "embed_batch", appending)
    code = main([str(place / "ok.txt"), str(place / "out.h5"), "--model", str(converted_fixture), "--no-progress"])
    _check_error(place, capsys, code, ["ok.txt", "changed during the run"], place / "out.h5")
