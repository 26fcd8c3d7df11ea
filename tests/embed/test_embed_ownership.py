"""Issue 41's data-loss cases and small things of `elmo-embed`: a Parquet folder owns only the files its run record
lists (with size and sha256), a listed part that fails its checksum is computed again, small inputs are shared by
every process of a multi-process run, and tok/s counts from the first batch."""

import argparse
import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from modeling_elmo.embed import cli as embed
from modeling_elmo.embed.batching import Batch, Sentence
from modeling_elmo.embed.cli import main


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _embed(input_path: Path, output: Path, model_dir: Path, *extra: str) -> int:
    return main([str(input_path), str(output), "--model", str(model_dir), "--no-progress", *extra])


def _parquet(input_path: Path, output: Path, model_dir: Path, *extra: str) -> int:
    return _embed(input_path, output, model_dir, "--format", "parquet", *extra)


def _users_part(path: Path, ids: list[int]) -> bytes:
    """A Parquet file of the user's, named like one of elmo-embed's parts."""
    pq.write_table(pa.table({"id": ids, "note": [f"mine {i}" for i in ids]}), path)
    return path.read_bytes()


def _one_line(capsys) -> str:
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    return error


@pytest.fixture(scope="module")
def four_lines(fixture_dir) -> list[str]:
    return [row[0] for row in json.loads((fixture_dir / "sentences.json").read_text())][:3] + ["a last line ."]


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_users_part_file_in_the_output_folder_is_never_overwritten(
    tmp_path, four_lines, converted_fixture, capsys, overwrite
):
    input_path = _write(tmp_path / "in.txt", four_lines)
    (tmp_path / "out").mkdir()
    mine = _users_part(tmp_path / "out" / "part-00000000.parquet", [0, 1])
    assert _parquet(input_path, tmp_path / "out", converted_fixture, *overwrite) == 1
    error = _one_line(capsys)
    assert "part-00000000.parquet" in error and "did not write" in error, error
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["part-00000000.parquet"]
    assert (tmp_path / "out" / "part-00000000.parquet").read_bytes() == mine


def test_a_stray_part_is_never_read_into_the_result_nor_the_run_called_complete(
    tmp_path, four_lines, converted_fixture, capsys
):
    input_path = _write(tmp_path / "in.txt", four_lines)
    assert _parquet(input_path, tmp_path / "out", converted_fixture) == 0
    stray = _users_part(tmp_path / "out" / "part-00000007.parquet", [7])
    capsys.readouterr()
    for command in (
        [str(input_path), str(tmp_path / "out"), "--model", str(converted_fixture), "--format", "parquet"],
        [
            str(input_path),
            str(tmp_path / "out"),
            "--model",
            str(converted_fixture),
            "--format",
            "parquet",
            "--overwrite",
        ],
        ["merge", str(tmp_path / "merged"), str(tmp_path / "out")],
    ):
        assert main([*command, "--no-progress"] if command[0] != "merge" else command) == 1
        error = _one_line(capsys)
        assert "part-00000007.parquet" in error and "(complete)" not in error, error
    assert (tmp_path / "out" / "part-00000007.parquet").read_bytes() == stray
    assert (tmp_path / "out" / "part-00000000.parquet").exists() and not (tmp_path / "merged").exists()
    record = json.loads((tmp_path / "out" / ".elmo-embed-run.json").read_text())
    assert record["files"] == {
        "part-00000000.parquet": {
            "bytes": (tmp_path / "out" / "part-00000000.parquet").stat().st_size,
            "sha256": hashlib.sha256((tmp_path / "out" / "part-00000000.parquet").read_bytes()).hexdigest(),
        }
    }


def test_a_listed_part_that_fails_its_checksum_is_computed_again(tmp_path, four_lines, converted_fixture):
    input_path = _write(tmp_path / "in.txt", four_lines)
    assert _parquet(input_path, tmp_path / "out", converted_fixture, "--window", "2") == 0
    part = tmp_path / "out" / "part-00000001.parquet"
    original = part.read_bytes()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF  # a value's bits: still a readable part with the right ids
    part.write_bytes(bytes(damaged))
    assert _parquet(input_path, tmp_path / "out", converted_fixture, "--window", "2") == 0
    assert part.read_bytes() == original


def _shard_lines(path: Path) -> int:
    with h5py.File(path, "r") as handle:
        return sum(name != "sentence_to_index" for name in handle)


def test_three_ranks_share_400_lines_and_merge_into_a_single_run(
    tmp_path, fixture_dir, converted_fixture, monkeypatch
):
    sentences = [sentence for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]
    input_path = _write(tmp_path / "in.txt", [sentences[line % len(sentences)] for line in range(400)])
    monkeypatch.setenv("WORLD_SIZE", "3")
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        assert _embed(input_path, tmp_path / "multi.hdf5", converted_fixture) == 0
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    shards = [embed.shard_output(tmp_path / "multi.hdf5", rank, 3) for rank in range(3)]
    assert [_shard_lines(shard) for shard in shards] == [133, 133, 134]  # windows of 400 // 3 lines
    with h5py.File(shards[0], "r") as handle:
        assert json.loads(handle.attrs["elmo_embed_run"])["window"] == 133
    assert main(["merge", str(tmp_path / "merged.hdf5"), *map(str, shards)]) == 0
    assert _embed(input_path, tmp_path / "single.hdf5", converted_fixture, "--window", "133") == 0
    assert (tmp_path / "merged.hdf5").read_bytes() == (tmp_path / "single.hdf5").read_bytes()


def test_a_single_process_keeps_the_requested_window(tmp_path, fixture_dir, converted_fixture):
    input_path = _write(tmp_path / "in.txt", ["a b c ."] * 200)
    assert _embed(input_path, tmp_path / "single.hdf5", converted_fixture) == 0
    with h5py.File(tmp_path / "single.hdf5", "r") as handle:
        assert json.loads(handle.attrs["elmo_embed_run"])["window"] == 4096


def test_tok_per_second_counts_from_the_first_batch(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(embed.time, "perf_counter", lambda: now[0])

    def embed_batch(model, tokenizer, batch, layers, pooling) -> dict[int, np.ndarray]:
        now[0] += 1.0  # one second per batch
        return {sentence.index: np.zeros((len(sentence.words), 4), np.float32) for sentence in batch.sentences}

    monkeypatch.setattr(embed, "embed_batch", embed_batch)
    args = argparse.Namespace(layers="top", pooling="none", dtype="float32", vector_dtype="float32")
    embedder = embed._Embedder(args, _write(tmp_path / "in.txt", ["x"]))
    now[0] = 100.0  # the model took 100 s to load
    embedder.embed(Batch(0, [Sentence(0, "ten words", ["w"] * 10)]))
    assert embedder.rate() == "10 tok/s"
    embedder.embed(Batch(1, [Sentence(1, "thirty words", ["w"] * 30)]))
    assert embedder.rate() == "20 tok/s"
