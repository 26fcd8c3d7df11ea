"""`elmo-embed --format parquet`, `elmo-embed to-parquet`, and multi-process runs identified by content: resume after
kill -9, a finished folder left alone, another run's folder refused, the folder read by the data tools, and shards of
two "machines" (their own copies of input and model) merged into a single process's output bit for bit; issue 41's
data-loss cases: the folder owns only the files its run record lists (with size and sha256)."""

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from killed_run import embed_killed_after

from modeling_elmo.embed import cli as embed
from modeling_elmo.embed.cli import main
from modeling_elmo.foundation.folder_record import FOLDER_RECORD, read_record, unlisted_entries

WINDOW = ("--batch-size", "3", "--window", "8")  # 5 windows of up to 8 lines for the 37 lines of `corpus`


@pytest.fixture(scope="module")
def corpus(fixture_dir) -> list[str]:
    """The fixture's sentences with empty and blank lines, Unicode, a repeated line and a 600-word line."""
    sentences = [sentence for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]
    long_line = " ".join(sentences[3].split() * 60)[:4000]
    unicode = "Zürich 's café — naïve 東京 ."
    return ["", *sentences[:9], "   ", unicode, *sentences[9:], long_line, sentences[0], "", "😀"]


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _embed(input_path: Path, output: Path, model_dir: Path, *extra: str) -> int:
    return main([str(input_path), str(output), "--model", str(model_dir), "--no-progress", *extra])


def _parquet(input_path: Path, output: Path, model_dir: Path, *extra: str) -> int:
    return _embed(input_path, output, model_dir, "--format", "parquet", *extra)


def _rows(folder: Path) -> pa.Table:
    """The folder's rows in line order (`ORDER BY id`)."""
    return ds.dataset(folder, format="parquet").to_table().sort_by("id")


def _hdf5_arrays(path: Path) -> dict[int, np.ndarray]:
    with h5py.File(path, "r") as handle:
        return {int(name): handle[name][...] for name in handle if name != "sentence_to_index"}


def _per_word(table: pa.Table, row: int, columns: list[str]) -> np.ndarray:
    """Row `row`'s vectors, stacked like elmo-embed's HDF5 arrays: (layers, words, width) or (words, width)."""
    values = [np.array(table[name][row].as_py(), dtype=np.float32).reshape(-1, 32) for name in columns]
    return np.stack(values) if len(columns) > 1 else values[0]


def _parts(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("part-*.parquet"))}


def test_parquet_holds_the_hdf5_values_bit_for_bit(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *WINDOW) == 0
    assert _parquet(input_path, tmp_path / "out", converted_fixture, *WINDOW) == 0
    expected, table = _hdf5_arrays(tmp_path / "out.hdf5"), _rows(tmp_path / "out")
    assert table["id"].to_pylist() == list(range(len(corpus)))
    assert table["num_words"].to_pylist() == [len(line.split()) for line in corpus]
    assert table.column_names == ["id", "num_words", "layer_0", "layer_1", "layer_2"]
    for row in range(len(corpus)):
        values = _per_word(table, row, ["layer_0", "layer_1", "layer_2"])
        assert values.shape == expected[row].shape and values.tobytes() == expected[row].tobytes(), row
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        ".elmo-files.json",
        *[f"part-{window:08d}.parquet" for window in range(5)],
    ]

    args = ["--layers", "top", "--pooling", "mean", "--vector-dtype", "float16", *WINDOW]
    assert _embed(input_path, tmp_path / "pooled.hdf5", converted_fixture, *args) == 0
    assert _parquet(input_path, tmp_path / "pooled", converted_fixture, *args) == 0
    expected, table = _hdf5_arrays(tmp_path / "pooled.hdf5"), _rows(tmp_path / "pooled")
    assert table.schema.field("embedding").type == pa.list_(pa.float16(), 32)
    pooled = np.array(table["embedding"].to_pylist(), dtype=np.float16)
    assert expected[0].dtype == np.float16 and not pooled[0].any()  # an empty line: zeros
    assert pooled.tobytes() == np.stack([expected[row] for row in range(len(corpus))]).tobytes()


def test_the_data_tools_read_the_folder_as_one_dataset(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _parquet(input_path, tmp_path / "out", converted_fixture, "--layers", "top", *WINDOW) == 0
    expected = _rows(tmp_path / "out")
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "out").sort_values("id")
    assert frame["id"].tolist() == list(range(len(corpus)))
    assert np.array_equal(np.stack(frame["embedding"].iloc[2]), _per_word(expected, 2, ["embedding"]))

    from datasets import load_dataset

    loaded = load_dataset("parquet", data_dir=str(tmp_path / "out"), split="train", cache_dir=str(tmp_path / "c"))
    assert sorted(loaded["id"]) == list(range(len(corpus)))
    row = loaded.filter(lambda example: example["id"] == 2)[0]
    assert np.array_equal(np.array(row["embedding"], np.float32), _per_word(expected, 2, ["embedding"]))

    if os.environ.get("ELMO_REQUIRE_DUCKDB") and importlib.util.find_spec("duckdb") is None:
        pytest.fail("ELMO_REQUIRE_DUCKDB is set but duckdb is not installed")
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (an optional reader)")
    ids = duckdb.sql(f"SELECT id FROM read_parquet('{tmp_path / 'out'}/*.parquet') ORDER BY id").fetchall()
    assert [row[0] for row in ids] == list(range(len(corpus)))


@pytest.mark.integration
def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path, corpus, converted_fixture, monkeypatch):
    lines = corpus * 4  # 148 lines: 19 windows of 8
    input_path = _write(tmp_path / "in.txt", lines)
    assert _parquet(input_path, tmp_path / "full", converted_fixture, *WINDOW) == 0

    output = tmp_path / "resumed"
    arguments = [str(input_path), str(output), "--format", "parquet", "--model", str(converted_fixture), *WINDOW]
    embed_killed_after(arguments, output, "part-*.parquet", 4, tmp_path / "stderr.txt")
    kept = _parts(output)
    assert 4 <= len(kept) < 19

    computed = []
    original = embed.embed_batch
    counting = lambda *a: computed.extend(s.index for s in a[2].sentences) or original(*a)  # noqa: E731
    monkeypatch.setattr(embed, "embed_batch", counting)
    assert _parquet(input_path, output, converted_fixture, *WINDOW) == 0
    finished = {index for name in kept for index in range(int(name[5:13]) * 8, int(name[5:13]) * 8 + 8)}
    assert finished.isdisjoint(computed) and len(computed) + len(finished) == len(lines)
    assert _parts(output) == _parts(tmp_path / "full")  # the same bytes, part for part
    assert not [path for path in output.iterdir() if path.name.endswith(".tmp")]
    assert _rows(output)["id"].to_pylist() == list(range(len(lines)))


def test_a_finished_folder_is_left_as_it_is(tmp_path, corpus, converted_fixture, monkeypatch, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _parquet(input_path, tmp_path / "out", converted_fixture, *WINDOW) == 0
    before = {path.name: (path.stat().st_mtime_ns, path.read_bytes()) for path in (tmp_path / "out").iterdir()}
    capsys.readouterr()
    monkeypatch.setattr(embed, "load_model", lambda *a, **k: pytest.fail("a finished folder needs no model"))
    assert _parquet(input_path, tmp_path / "out", converted_fixture, *WINDOW) == 0
    assert "(complete)" in capsys.readouterr().out
    after = {path.name: (path.stat().st_mtime_ns, path.read_bytes()) for path in (tmp_path / "out").iterdir()}
    assert after == before


def test_another_runs_folder_or_foreign_files_are_refused(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _parquet(input_path, tmp_path / "out", converted_fixture, *WINDOW) == 0
    before = _parts(tmp_path / "out")
    capsys.readouterr()
    other_input = _write(tmp_path / "other.txt", corpus[:-1])
    cases = [
        ([input_path, "--layers", "top"], "differs in: layers 'all' vs 'top')"),
        ([other_input], f"input_lines {len(corpus)} vs {len(corpus) - 1}, input_sha256)"),
        ([input_path, "--vector-dtype", "float16"], "differs in: vector_dtype 'float32' vs 'float16')"),
        ([input_path, "--quantization", "bf16"], "differs in: quantization 'none' vs 'bf16')"),
    ]
    for (source, *options), expected in cases:
        assert _parquet(source, tmp_path / "out", converted_fixture, *WINDOW, *options) == 1
        error = capsys.readouterr().err
        assert len(error.strip().splitlines()) == 1 and "holds another run" in error and expected in error, error
    assert _parts(tmp_path / "out") == before

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    for overwrite in ([], ["--overwrite"]):
        assert _parquet(input_path, tmp_path / "mine", converted_fixture, *overwrite) == 1
        error = capsys.readouterr().err
        assert "holds files elmo-embed did not write (notes.txt)" in error and len(error.strip().splitlines()) == 1
    assert [path.name for path in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_to_parquet_converts_hdf5_outputs(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *WINDOW) == 0
    assert main(["to-parquet", str(tmp_path / "out.hdf5"), str(tmp_path / "out"), "--rows-per-part", "20"]) == 0
    expected, table = _hdf5_arrays(tmp_path / "out.hdf5"), _rows(tmp_path / "out")
    assert len(list((tmp_path / "out").glob("part-*.parquet"))) == 2
    assert table["id"].to_pylist() == list(range(len(corpus)))
    for row in range(len(corpus)):
        assert _per_word(table, row, ["layer_0", "layer_1", "layer_2"]).tobytes() == expected[row].tobytes()
    before = _parts(tmp_path / "out")
    assert main(["to-parquet", str(tmp_path / "out.hdf5"), str(tmp_path / "out"), "--rows-per-part", "20"]) == 0
    assert _parts(tmp_path / "out") == before

    with h5py.File(tmp_path / "out.hdf5", "r+") as handle:  # a line missing: refused, naming the file
        del handle["7"]
    capsys.readouterr()
    assert main(["to-parquet", str(tmp_path / "out.hdf5"), str(tmp_path / "gap")]) == 1
    error = capsys.readouterr().err
    assert "out.hdf5 is not a per-line output" in error and not (tmp_path / "gap").exists()
    assert _embed(input_path, tmp_path / "pooled.hdf5", converted_fixture, "--pooling", "mean") == 0
    assert main(["to-parquet", str(tmp_path / "pooled.hdf5"), str(tmp_path / "pooled")]) == 1
    assert "holds pooled vectors" in capsys.readouterr().err


def _machine(root: Path, corpus: list[str], model: Path) -> tuple[Path, Path]:
    """A "machine": its own copy of the input and the model, at its own paths, with new modification times."""
    input_path = _write(root / "data" / "in.txt", corpus)
    copy = shutil.copytree(model, root / "models" / "elmo")
    for path in copy.iterdir():
        os.utime(path, ns=(1_000_000_000 * (len(str(root)) + 7), 1_000_000_000 * (len(str(root)) + 7)))
    return input_path, copy


@pytest.mark.parametrize("output_format", ["hdf5", "parquet"])
def test_two_machines_with_their_own_copies_merge_into_a_single_run(
    tmp_path, corpus, converted_fixture, monkeypatch, output_format
):
    single_input = _write(tmp_path / "in.txt", corpus)
    suffix = ".hdf5" if output_format == "hdf5" else ""
    options = ["--format", output_format, *WINDOW]
    assert _embed(single_input, tmp_path / f"single{suffix}", converted_fixture, *options) == 0

    read, original = [], embed.read_sentences
    counting = lambda *a, **k: (read.append(s.index) or s for s in original(*a, **k))  # noqa: E731
    monkeypatch.setattr(embed, "read_sentences", counting)
    outputs, shares = [], []
    for rank in range(2):
        input_path, model = _machine(tmp_path / f"machine-{rank}", corpus, converted_fixture)
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        read.clear()
        output = input_path.parent / f"out{suffix}"
        assert _embed(input_path, output, model, *options) == 0
        shares.append(sorted(read))
        outputs.append(embed.shard_output(output, rank, 2) if output_format == "hdf5" else output)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert shares == [list(range(16)), list(range(16, len(corpus)))]  # each reads its windows, nothing else

    assert main(["merge", str(tmp_path / f"merged{suffix}"), *map(str, outputs)]) == 0
    if output_format == "hdf5":
        assert (tmp_path / "merged.hdf5").read_bytes() == (tmp_path / "single.hdf5").read_bytes()
    else:
        assert _parts(tmp_path / "merged") == _parts(tmp_path / "single")
        assert json.loads((tmp_path / "merged" / ".elmo-files.json").read_text()) == json.loads(
            (tmp_path / "single" / ".elmo-files.json").read_text()
        )


def test_parquet_merge_refuses_missing_or_mixed_folders(tmp_path, corpus, converted_fixture, monkeypatch, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    folders = []
    monkeypatch.setenv("WORLD_SIZE", "3")
    for rank, layers in enumerate(["all", "all", "top"]):
        monkeypatch.setenv("RANK", str(rank))
        assert _parquet(input_path, tmp_path / f"rank-{rank}", converted_fixture, *WINDOW, "--layers", layers) == 0
        folders.append(tmp_path / f"rank-{rank}")
    capsys.readouterr()
    cases = [
        (folders[:2], "No folder holds lines 24..31"),
        (folders, "come from different runs (they differ in: layers 'all' vs 'top')"),
        ([folders[0], folders[0], folders[1]], "hold the same window"),
    ]
    for given, expected in cases:
        assert main(["merge", str(tmp_path / "merged"), *map(str, given)]) == 1
        error = capsys.readouterr().err
        assert len(error.strip().splitlines()) == 1 and expected in error, error
        assert not (tmp_path / "merged").exists()


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
    record = json.loads((tmp_path / "out" / ".elmo-files.json").read_text())
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


def test_the_folder_record_is_read_by_the_one_reader_and_an_earlier_versions_folder_resumes(
    tmp_path, corpus, converted_fixture, monkeypatch
):
    """Issue 52: the Parquet folder keeps the one record (its run, its parts), read by `folder_record.read_record`;
    a folder an earlier version wrote (the run's fields and `files` in `.elmo-embed-run.json`) resumes, nothing
    computed again, and its record is written again as this version's."""
    input_path = _write(tmp_path / "in.txt", corpus)
    output = tmp_path / "out"
    assert _parquet(input_path, output, converted_fixture, *WINDOW) == 0
    record = read_record(output, AssertionError)
    assert record.tool == "elmo-embed" and record.complete and sorted(record.files) == sorted(_parts(output))
    assert record.run["window"] == 8 and unlisted_entries(output, record) == []
    earlier = {**record.run, "files": record.files}
    (output / ".elmo-embed-run.json").write_text(json.dumps(earlier, indent=1, sort_keys=True))
    (output / FOLDER_RECORD).unlink()
    (output / ".elmo-embed.lock").touch()  # the lock file of earlier versions
    assert read_record(output, AssertionError).files == record.files
    parts = _parts(output)
    monkeypatch.setattr(embed, "embed_batch", None)  # nothing is computed again
    assert _parquet(input_path, output, converted_fixture, *WINDOW) == 0
    assert _parts(output) == parts and read_record(output, AssertionError) == record
    assert sorted(path.name for path in output.glob(".*")) == [".elmo-embed.lock", FOLDER_RECORD]
    assert main(["merge", str(tmp_path / "merged"), str(output)]) == 0  # a merge reads it
    assert _parts(tmp_path / "merged") == parts
