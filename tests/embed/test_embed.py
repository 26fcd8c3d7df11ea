"""`elmo-embed`: output layout, batching, resume after kill -9, multi-process shards + merge (small inputs shared by
every process), write failures, the progress bar's tok/s."""

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from killed_run import embed_killed_after

from modeling_elmo.embed import cli as embed
from modeling_elmo.embed import run_identity
from modeling_elmo.embed import store as embed_store
from modeling_elmo.embed.batching import Batch, Sentence, bucketed_batches
from modeling_elmo.embed.cli import main
from modeling_elmo.foundation.folder_record import FOLDER_RECORD, read_record, unlisted_entries

LAYER_WIDTH = 32  # the fixture model: 2 * projection_dim 16
SMALL_BATCHES = ("--batch-size", "4")  # 9 batches for the 34 lines of `corpus`


@pytest.fixture(scope="module")
def corpus(fixture_dir) -> list[str]:
    """The fixture's 30 sentences, with an empty line and a blank one among them."""
    sentences = [sentence for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]
    return [*sentences[:5], "", *sentences[5:20], "   ", *sentences[20:], "Zürich 's café ."]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    with h5py.File(path, "r") as handle:
        mapping = json.loads(handle["sentence_to_index"][0])
        return {name: handle[name][...] for name in handle if name != "sentence_to_index"}, mapping


def _embed(input_path: Path, output_path: Path, model_dir: Path, *extra: str) -> int:
    return main([str(input_path), str(output_path), "--model", str(model_dir), "--no-progress", *extra])


def _assert_same_embeddings(path: Path, expected_path: Path) -> None:
    """Same datasets and map, every value bit for bit (a NaN or a last-bit difference fails)."""
    datasets, mapping = _read(path)
    expected, expected_mapping = _read(expected_path)
    assert mapping == expected_mapping and datasets.keys() == expected.keys()
    for name, values in expected.items():
        assert datasets[name].shape == values.shape and datasets[name].tobytes() == values.tobytes(), name


def _stop_after(monkeypatch, batches: int) -> None:
    """Make the run stop like Ctrl-C before its `batches + 1`-th computed batch."""
    original, calls = embed.embed_batch, []

    def stopping(*args):
        calls.append(1)
        if len(calls) > batches:
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(embed, "embed_batch", stopping)


def _leftovers(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.name.endswith(".tmp"))


def _direct_layers(model_dir: Path, words: list[str]) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    with torch.no_grad():
        hidden = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True)
    return torch.stack(hidden.hidden_states, dim=1)[0].numpy()  # (layers, words, width)


def test_layout_matches_allennlp_elmo(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "all.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    datasets, mapping = _read(tmp_path / "all.hdf5")
    assert sorted(datasets, key=int) == [str(index) for index in range(len(corpus))]
    for index, line in enumerate(corpus):
        assert datasets[str(index)].shape == (3, len(line.split()), LAYER_WIDTH)
        assert datasets[str(index)].dtype == np.float32 and np.isfinite(datasets[str(index)]).all()
    assert mapping[corpus[0]] == "0" and mapping[""] == "21"  # the last of the two empty lines wins, as in allennlp
    direct = _direct_layers(converted_fixture, corpus[7].split())
    np.testing.assert_allclose(datasets["7"], direct, atol=1e-5, equal_nan=False)

    assert _embed(input_path, tmp_path / "top.hdf5", converted_fixture, "--layers", "top") == 0
    assert _embed(input_path, tmp_path / "mean.hdf5", converted_fixture, "--layers", "average") == 0
    top, _ = _read(tmp_path / "top.hdf5")
    average, _ = _read(tmp_path / "mean.hdf5")
    for index, line in enumerate(corpus):
        assert top[str(index)].shape == average[str(index)].shape == (len(line.split()), LAYER_WIDTH)
    np.testing.assert_allclose(top["3"], datasets["3"][-1], atol=1e-5, equal_nan=False)
    np.testing.assert_allclose(average["3"], datasets["3"].mean(axis=0), atol=1e-5, equal_nan=False)


def test_max_tokens_batches_and_raw_text(tmp_path, converted_fixture):
    input_path = tmp_path / "in.txt"
    input_path.write_bytes("\ufeffHello, world!\r\n\nIt's 3.5 km.".encode())  # BOM, CRLF, no final newline
    assert _embed(input_path, tmp_path / "raw.hdf5", converted_fixture, "--raw", "--max-tokens-per-batch", "5") == 0
    datasets, mapping = _read(tmp_path / "raw.hdf5")
    assert datasets["0"].shape == (3, 4, LAYER_WIDTH)  # Hello , world !
    assert datasets["1"].shape == (3, 0, LAYER_WIDTH)
    assert mapping == {"Hello, world!": "0", "": "1", "It's 3.5 km.": "2"}


def test_bucketing_groups_by_length_and_numbers_batches_by_window():
    sentences = [Sentence(index, "", ["w"] * length) for index, length in enumerate([5, 1, 9, 1, 3, 7, 2])]
    batches = list(bucketed_batches(iter(sentences), max_tokens=8, window=4, first_window=3))
    assert [[s.index for s in batch.sentences] for batch in batches] == [[1, 3, 0], [2], [6, 4], [5]]
    assert [(batch.window, batch.number) for batch in batches] == [(3, 0), (3, 1), (4, 0), (4, 1)]
    assert batches[0].name < batches[1].name < batches[2].name < batches[3].name
    with pytest.raises(ValueError, match="exactly one"):
        next(bucketed_batches(iter(sentences), batch_size=2, max_tokens=3))


@pytest.mark.integration
def test_resume_after_kill_matches_uninterrupted_run(tmp_path, corpus, converted_fixture, monkeypatch):
    lines = [line for _ in range(8) for line in corpus]  # 272 lines in 68 batches: long enough to be killed mid-run
    input_path = _write(tmp_path / "in.txt", lines)
    args = [*SMALL_BATCHES, "--window", "64"]  # with the word cache (on by default)
    assert _embed(input_path, tmp_path / "full.hdf5", converted_fixture, *args) == 0

    output, parts = tmp_path / "resumed.hdf5", tmp_path / "resumed.hdf5.parts"
    arguments = [str(input_path), str(output), "--model", str(converted_fixture), *args]
    embed_killed_after(arguments, parts, "part-*.h5", 5, tmp_path / "stderr.txt")
    done = set()
    for part in parts.glob("part-*.h5"):
        with h5py.File(part, "r") as handle:
            done.update(handle)
    assert 0 < len(done) < len(lines) and not output.exists()

    computed = []
    original = embed.embed_batch
    monkeypatch.setattr(
        embed, "embed_batch", lambda *a: computed.extend(s.index for s in a[2].sentences) or original(*a)
    )
    assert _embed(input_path, output, converted_fixture, *args) == 0
    assert not parts.exists()
    assert set(map(str, computed)).isdisjoint(done)  # finished sentences were not recomputed
    assert len(computed) + len(done) == len(lines)
    _assert_same_embeddings(output, tmp_path / "full.hdf5")
    assert output.read_bytes() == (tmp_path / "full.hdf5").read_bytes()


@pytest.mark.parametrize("batches_before_stop", [1, 6])
def test_resume_is_bit_identical_with_the_word_cache(
    tmp_path, corpus, converted_fixture, monkeypatch, capsys, batches_before_stop
):
    input_path = _write(tmp_path / "in.txt", corpus * 2)
    args = ["--batch-size", "3", "--window", "20"]
    assert _embed(input_path, tmp_path / "full.hdf5", converted_fixture, *args) == 0
    with monkeypatch.context() as patch:
        _stop_after(patch, batches_before_stop)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *args) == 130
    assert "interrupted" in capsys.readouterr().err
    assert len(list((tmp_path / "out.hdf5.parts").glob("part-*.h5"))) == batches_before_stop
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *args) == 0
    assert (tmp_path / "out.hdf5").read_bytes() == (tmp_path / "full.hdf5").read_bytes()


def _change_one_value(part: Path) -> None:
    """Other bytes of the same size, still a readable part holding the same lines: only its checksum tells."""
    size = part.stat().st_size
    with h5py.File(part, "r+") as handle:
        first = next(iter(handle))
        handle[first][...] = handle[first][...] + 1
    assert part.stat().st_size == size


@pytest.mark.parametrize("damage", ["truncated", "checksum"])
def test_damaged_part_is_computed_again(tmp_path, corpus, converted_fixture, monkeypatch, damage):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "full.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    with monkeypatch.context() as patch:
        _stop_after(patch, 3)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 130
    damaged = sorted((tmp_path / "out.hdf5.parts").glob("part-*.h5"))[1]
    if damage == "truncated":
        damaged.write_bytes(damaged.read_bytes()[:100])
    else:
        _change_one_value(damaged)
    computed = []
    original = embed.embed_batch
    monkeypatch.setattr(embed, "embed_batch", lambda *a: computed.append(a[2].name) or original(*a))
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    assert computed[0] == damaged.stem.removeprefix("part-") and len(computed) == 9 - 2
    assert (tmp_path / "out.hdf5").read_bytes() == (tmp_path / "full.hdf5").read_bytes()


def test_rerun_with_other_arguments_is_refused(tmp_path, corpus, converted_fixture, capsys, monkeypatch):
    input_path = _write(tmp_path / "in.txt", corpus)
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--layers", "top", *SMALL_BATCHES) == 130
    capsys.readouterr()
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 1
    assert "other arguments (differs in: layers 'top' vs 'all')" in capsys.readouterr().err


def test_resume_with_other_model_files_is_refused(tmp_path, corpus, converted_fixture, capsys, monkeypatch):
    """The same model path holding other files (converted again) is another run: no mixing of two models; the same
    files written again (a new modification time, as a copy on another machine) are the same run."""
    model = shutil.copytree(converted_fixture, tmp_path / "model")
    input_path = _write(tmp_path / "in.txt", corpus)
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        assert _embed(input_path, tmp_path / "out.hdf5", model, *SMALL_BATCHES) == 130
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes())  # rewritten: a new modification time, the same bytes
    config = model / "config.json"
    config.write_text(config.read_text() + " ")
    capsys.readouterr()
    assert _embed(input_path, tmp_path / "out.hdf5", model, *SMALL_BATCHES) == 1
    assert "differs in: model_sha256" in capsys.readouterr().err
    config.write_text(config.read_text()[:-1])
    assert _embed(input_path, tmp_path / "out.hdf5", model, *SMALL_BATCHES) == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--quantization", "int4"], "argument --quantization: invalid choice: 'int4'"),
        (["--quantization", "int8", "--dtype", "bfloat16"], "leave --dtype at float32 (got --dtype bfloat16)"),
        (["--quantization", "bf16", "--device", "cuda"], "runs on the CPU: use --device cpu (got cuda)"),
    ],
)
def test_a_quantization_it_cannot_run_is_one_line(tmp_path, corpus, converted_fixture, capsys, options, message):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *options) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and message in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


def test_the_quantization_is_in_the_run_record_and_a_resume_keeps_it(
    tmp_path, corpus, converted_fixture, capsys, monkeypatch
):
    """The choice is recorded (an exact run's as "none"); resuming with another is refused naming both; the
    quantized vectors are not the exact ones and the exact run's are unchanged by the option."""
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "exact.hdf5", converted_fixture, "--layers", "top") == 0
    assert (
        _embed(input_path, tmp_path / "none.hdf5", converted_fixture, "--layers", "top", "--quantization", "none") == 0
    )
    assert (tmp_path / "none.hdf5").read_bytes() == (tmp_path / "exact.hdf5").read_bytes()
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        options = ("--layers", "top", "--quantization", "int8", *SMALL_BATCHES)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *options) == 130
    capsys.readouterr()
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--layers", "top", *SMALL_BATCHES) == 1
    error = capsys.readouterr().err
    assert "other arguments (differs in: quantization 'int8' vs 'none')" in error, error
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *options) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert json.loads(handle.attrs[embed_store.RUN_RECORD])["quantization"] == "int8"
    with h5py.File(tmp_path / "exact.hdf5", "r") as handle:
        assert json.loads(handle.attrs[embed_store.RUN_RECORD])["quantization"] == "none"
    quantized, _ = _read(tmp_path / "out.hdf5")
    exact, _ = _read(tmp_path / "exact.hdf5")
    assert quantized.keys() == exact.keys()
    assert any(not np.array_equal(quantized[name], exact[name]) for name in exact)


def test_the_differences_name_both_values_of_an_option():
    found = {"quantization": "int8", "layers": "all", "model_sha256": "ab" * 32, "pooling": "none", "window": 8}
    wanted = {**found, "quantization": "none", "model_sha256": "cd" * 32, "window": None}
    described = run_identity.describe_differences(found, wanted)
    assert described == "model_sha256, quantization 'int8' vs 'none', window 8 vs None"
    assert run_identity.describe_differences(found, found) == ""


def test_overwrite_starts_over_and_deletes_only_our_work_folder(tmp_path, corpus, converted_fixture, monkeypatch):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "fresh.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    with monkeypatch.context() as patch:  # an interrupted run with other arguments
        _stop_after(patch, 2)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--layers", "top", *SMALL_BATCHES) == 130
    with monkeypatch.context() as patch:  # and the work folder of another output: rank 0 of a 2-process run
        _stop_after(patch, 2)
        patch.setenv("WORLD_SIZE", "2")
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--window", "8", *SMALL_BATCHES) == 130
    other_parts = tmp_path / "out.shard-00000-of-00002.hdf5.parts"
    kept = sorted(other_parts.iterdir())
    (tmp_path / "out.hdf5").write_bytes(b"an old output")

    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--overwrite", *SMALL_BATCHES) == 0
    assert (tmp_path / "out.hdf5").read_bytes() == (tmp_path / "fresh.hdf5").read_bytes()
    assert not (tmp_path / "out.hdf5.parts").exists() and sorted(other_parts.iterdir()) == kept


def test_overwrite_refuses_to_delete_a_folder_that_is_not_ours(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    (tmp_path / "out.hdf5.parts").mkdir()
    (tmp_path / "out.hdf5.parts" / "notes.txt").write_text("mine")
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, "--overwrite") == 1
    assert "not an elmo-embed work folder" in capsys.readouterr().err
    assert (tmp_path / "out.hdf5.parts" / "notes.txt").read_text() == "mine"


def test_a_part_its_journal_does_not_list_is_foreign(tmp_path, corpus, converted_fixture, capsys, monkeypatch):
    """The work folder is owned by content: a `part-*.h5` of the user's is never read, overwritten or deleted."""
    input_path = _write(tmp_path / "in.txt", corpus)
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 130
    parts = tmp_path / "out.hdf5.parts"
    listed = sorted(parts.glob("part-*.h5"))
    stray = parts / "part-99.h5"
    stray.write_bytes(listed[0].read_bytes())  # a readable part file that no run of ours finished
    capsys.readouterr()
    for extra in [(), ("--overwrite",)]:
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES, *extra) == 1
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and "part-99.h5" in error, error
    assert stray.read_bytes() == listed[0].read_bytes() and sorted(parts.glob("part-*.h5")) == [*listed, stray]
    assert not (tmp_path / "out.hdf5").exists()


def _run_shards(input_path: Path, output: Path, model_dir: Path, world: int, *extra: str) -> list[Path]:
    """Run every rank of a `world`-process run one after the other (ranks set in the environment like torchrun)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORLD_SIZE", str(world))
        for rank in range(world):
            patch.setenv("RANK", str(rank))
            assert _embed(input_path, output, model_dir, *extra) == 0
    return [embed.shard_output(output, rank, world) for rank in range(world)]


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory, corpus, converted_fixture) -> tuple[Path, list[Path]]:
    """A single-process run's file and the 3 shards of a 3-process run of the same command, on a small input (5
    windows of 8 lines: the processes take 1, 2 and 2)."""
    folder = tmp_path_factory.mktemp("shards")
    input_path = _write(folder / "in.txt", corpus)
    args = [*SMALL_BATCHES, "--window", "8"]
    assert _embed(input_path, folder / "single.hdf5", converted_fixture, *args) == 0
    shards = _run_shards(input_path, folder / "multi.hdf5", converted_fixture, 3, *args)
    return folder / "single.hdf5", shards


def test_shards_split_a_small_input_and_merge_equals_a_single_run(tmp_path, three_shards, corpus):
    single, shards = three_shards
    counts = []
    for shard in shards:
        datasets, _ = _read(shard)
        counts.append(len(datasets))
    assert counts == [8, 16, len(corpus) - 24], counts
    assert main(["merge", str(tmp_path / "merged.hdf5"), *map(str, reversed(shards))]) == 0
    _assert_same_embeddings(tmp_path / "merged.hdf5", single)
    assert (tmp_path / "merged.hdf5").read_bytes() == single.read_bytes()


def _with_record(source: Path, target: Path, **changes) -> Path:
    """A copy of the shard `source` whose run record has `changes`."""
    shutil.copy(source, target)
    with h5py.File(target, "r+") as handle:
        record = json.loads(handle.attrs[embed_store.RUN_RECORD])
        handle.attrs[embed_store.RUN_RECORD] = json.dumps({**record, **changes})
    return target


def test_merge_refuses_missing_mixed_or_overlapping_shards(tmp_path, three_shards, corpus, converted_fixture, capsys):
    _, (first, second, third) = three_shards
    other_run = _run_shards(
        _write(tmp_path / "in.txt", corpus), tmp_path / "other.hdf5", converted_fixture, 3, "--layers", "top"
    )
    overlapping = _with_record(first, tmp_path / "overlap.hdf5", rank=1)
    with h5py.File(overlapping, "r+") as handle, h5py.File(second, "r") as source:
        del handle[next(name for name in handle if name.isdigit())]
        source.copy(source[next(name for name in source if name.isdigit())], handle)
    renamed_copy = shutil.copy(first, tmp_path / "multi.shard-00001-of-00003.hdf5")
    cases = [
        ([first, third], ["shard 1 of 3", "multi.shard-00001-of-00003.hdf5"]),
        ([first, other_run[1], third], ["different runs", "layers 'all' vs 'top'"]),
        (
            [first, _with_record(second, tmp_path / "int8.hdf5", quantization="int8"), third],
            ["quantization 'none' vs 'int8'"],
        ),
        ([first, first, second, third], ["given twice"]),
        ([first, renamed_copy, third], ["shard 0 of 3"]),
        ([overlapping, first, third], ["is in both"]),
    ]
    for shards, expected in cases:
        assert main(["merge", str(tmp_path / "merged.hdf5"), *map(str, shards)]) == 1, shards
        error = capsys.readouterr().err
        assert len(error.strip().splitlines()) == 1 and all(text in error for text in expected), error
        assert not (tmp_path / "merged.hdf5").exists() and not _leftovers(tmp_path)


@pytest.mark.integration
def test_two_processes_then_merge_equal_single_run(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    args = ["--batch-size", "3", "--window", "4"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in each process torchrun starts (OMP_NUM_THREADS=1): the same bits need the same
    try:
        assert _embed(input_path, tmp_path / "single.hdf5", converted_fixture, *args) == 0
    finally:
        torch.set_num_threads(threads)
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable))
    if accelerate is None:
        pytest.skip("accelerate is not installed")
    launch = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    launch += ["--mixed_precision", "no", "--dynamo_backend", "no", "-m", "modeling_elmo.embed"]
    output = tmp_path / "multi.hdf5"
    command = [*launch, str(input_path), str(output), "--model", str(converted_fixture), "--no-progress", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    shards = sorted(tmp_path.glob("multi.shard-*-of-00002.hdf5"))
    assert len(shards) == 2 and not output.exists()
    assert main(["merge", str(output), *map(str, shards)]) == 0
    _assert_same_embeddings(output, tmp_path / "single.hdf5")
    assert output.read_bytes() == (tmp_path / "single.hdf5").read_bytes()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES])
@pytest.mark.parametrize("stage", ["part", "output"])
def test_write_failure_is_one_line_and_keeps_finished_parts(
    tmp_path, corpus, converted_fixture, monkeypatch, capsys, code, stage
):
    input_path = _write(tmp_path / "in.txt", corpus)
    fail_at = 6 if stage == "part" else len(corpus) + 1  # in the 2nd part (4 lines each), or in the output file
    original, calls = embed_store.write_line, []

    def failing(*args) -> None:
        calls.append(1)
        if len(calls) == fail_at:
            raise OSError(code, os.strerror(code))
        original(*args)

    with monkeypatch.context() as patch:
        patch.setattr(embed_store, "write_line", failing)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 1
    error = capsys.readouterr().err.strip()
    target = "out.hdf5.parts/part-" if stage == "part" else "out.hdf5:"
    assert len(error.splitlines()) == 1 and target in error and os.strerror(code) in error, error
    assert not (tmp_path / "out.hdf5").exists() and not _leftovers(tmp_path)
    parts = list((tmp_path / "out.hdf5.parts").glob("part-*.h5"))
    assert len(parts) == (1 if stage == "part" else 9)

    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    assert _embed(input_path, tmp_path / "fresh.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    assert (tmp_path / "out.hdf5").read_bytes() == (tmp_path / "fresh.hdf5").read_bytes()


@pytest.mark.integration
def test_real_file_size_limit_gives_one_line(tmp_path, corpus, converted_fixture):
    """HDF5 itself failing to write (here: over RLIMIT_FSIZE, as on a full disk) in a child process."""
    input_path = _write(tmp_path / "in.txt", corpus)
    output = tmp_path / "out.hdf5"
    child = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1])); "
        "from modeling_elmo.embed.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    arguments = [str(input_path), str(output), "--model", str(converted_fixture), "--no-progress", "--batch-size", "2"]
    result = subprocess.run([sys.executable, "-c", child, *arguments], capture_output=True, text=True, timeout=300)
    error = [line for line in result.stderr.splitlines() if line.strip() and "Loading weights" not in line]
    assert result.returncode == 1 and len(error) == 1, result.stderr[-3000:]
    assert f"Cannot write {output}: File too large" in error[0]
    assert not output.exists() and not _leftovers(tmp_path)
    assert len(list((tmp_path / "out.hdf5.parts").glob("part-*.h5"))) == 17


REAL_FAILURES = """
import contextlib, io, json, sys
from pathlib import Path
from modeling_elmo.embed.cli import main
results = {}
for output in sys.argv[3:]:
    error = io.StringIO()
    with contextlib.redirect_stderr(error):
        code = main([sys.argv[1], output, "--model", sys.argv[2], "--no-progress", "--batch-size", "4"])
    results[output] = [code, error.getvalue(), sorted(str(path) for path in Path(output).parent.rglob("*"))]
print(json.dumps(results))
"""


@pytest.mark.integration
def test_real_full_disk_and_read_only_folder(tmp_path, corpus, converted_fixture):
    """A 150 KiB tmpfs and a read-only one, mounted in a private mount namespace (skipped where that is refused)."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-Urm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here")
    input_path = _write(tmp_path / "in.txt", corpus)
    full, read_only = tmp_path / "full", tmp_path / "read-only"
    full.mkdir()
    read_only.mkdir()
    mounts = f'mount -t tmpfs -o size=150k tmpfs {full} && mount -t tmpfs -o ro tmpfs {read_only} && exec "$@"'
    outputs = [str(full / "out.hdf5"), str(read_only / "out.hdf5")]
    command = [unshare, "-Urm", "sh", "-c", mounts, "sh", sys.executable, "-c", REAL_FAILURES]
    result = subprocess.run(
        [*command, str(input_path), str(converted_fixture), *outputs], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.splitlines()[-1])
    for output, cause in zip(outputs, ["No space left on device", "Read-only file system"], strict=True):
        code, error, files = results[output]
        assert code == 1 and len(error.strip().splitlines()) == 1 and f"Cannot write {output}" in error, error
        assert cause in error and output not in files and not [name for name in files if name.endswith(".tmp")]
    assert any(name.endswith(".h5") for name in results[outputs[0]][2])  # finished parts are kept


def test_read_only_folder_gives_one_line(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("the folder stays writable (running as root)")
        assert _embed(input_path, folder / "out.hdf5", converted_fixture) == 1
    finally:
        folder.chmod(0o755)
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(folder) in error and "Permission denied" in error, error
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_get_the_permissions_of_the_umask(tmp_path, corpus, converted_fixture, monkeypatch, umask):
    input_path = _write(tmp_path / "in.txt", corpus)
    previous = os.umask(umask)
    try:
        with monkeypatch.context() as patch:
            _stop_after(patch, 2)
            assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 130
        parts = tmp_path / "out.hdf5.parts"
        files = [*parts.glob("part-*.h5"), parts / ".elmo-files.json"]
        modes = {path.name: path.stat().st_mode & 0o777 for path in files}
        modes["parts/"] = parts.stat().st_mode & 0o777
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 0
        shards = _run_shards(input_path, tmp_path / "multi.hdf5", converted_fixture, 2, *SMALL_BATCHES)
        assert main(["merge", str(tmp_path / "merged.hdf5"), *map(str, shards)]) == 0
        for path in [tmp_path / "out.hdf5", *shards, tmp_path / "merged.hdf5"]:
            modes[path.name] = path.stat().st_mode & 0o777
    finally:
        os.umask(previous)
    assert modes == {name: (0o777 if name == "parts/" else 0o666) & ~umask for name in modes}


def test_nan_from_the_model_is_refused(tmp_path, corpus, converted_fixture, capsys):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(converted_fixture)
    with torch.no_grad():
        next(model.bilm.parameters()).fill_(float("nan"))
    model.save_pretrained(tmp_path / "nan-model")
    AutoTokenizer.from_pretrained(converted_fixture).save_pretrained(tmp_path / "nan-model")
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "out.hdf5", tmp_path / "nan-model", *SMALL_BATCHES) == 1
    error = capsys.readouterr().err
    assert "NaN or infinite values" in error and "line " in error and not (tmp_path / "out.hdf5").exists()


def test_each_process_of_a_multi_gpu_run_takes_its_own_accelerator(monkeypatch):
    from modeling_elmo.embed.cli import process_device

    monkeypatch.setenv("LOCAL_RANK", "1")
    assert process_device(torch.device("cuda"), world=2) == torch.device("cuda", 1)
    assert process_device(torch.device("cuda", 0), world=2) == torch.device("cuda", 0)  # named explicitly: kept
    assert process_device(torch.device("cuda"), world=1) == torch.device("cuda")
    assert process_device(torch.device("cpu"), world=2) == torch.device("cpu")


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


def test_a_folder_saved_quantized_is_recorded_with_its_method(tmp_path, corpus, converted_fixture):
    """Without `--quantization`, a folder saved quantized still loads quantized (its config.json says so): the run
    record names that method, not "none", and its vectors are those of `--quantization int8` on the float32 folder."""
    from modeling_elmo import ElmoModel, ElmoQuantizationConfig

    quantized = tmp_path / "int8-folder"
    ElmoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8")).save_pretrained(
        quantized
    )
    shutil.copy(converted_fixture / "tokenizer_config.json", quantized)
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "saved.hdf5", quantized, "--layers", "top") == 0
    asked = ("--layers", "top", "--quantization", "int8")
    assert _embed(input_path, tmp_path / "asked.hdf5", converted_fixture, *asked) == 0
    with h5py.File(tmp_path / "saved.hdf5", "r") as handle:
        assert json.loads(handle.attrs[embed_store.RUN_RECORD])["quantization"] == "int8"
    saved, _ = _read(tmp_path / "saved.hdf5")
    asked_vectors, _ = _read(tmp_path / "asked.hdf5")
    assert saved.keys() == asked_vectors.keys()
    assert all(np.array_equal(saved[name], asked_vectors[name]) for name in saved)


@pytest.mark.parametrize(
    ("text", "asked", "expected"),
    [
        ('{"quantization_config": {"quant_method": "elmo", "method": "bf16"}}', "none", "bf16"),
        ('{"quantization_config": {"quant_method": "elmo", "method": "bf16"}}', "int8", "int8"),
        ('{"hidden_size": 16}', "none", "none"),
        ('{"quantization_config": "int8"}', "none", "none"),
        ('{"quantization_config": {"quant_method": "elmo"}}', "none", "none"),
        ('["not", "a", "config"]', "none", "none"),
        ('{"quantization_config": ', "none", "none"),
        (b"\xff\xfe not utf-8", "none", "none"),
    ],
)
def test_the_run_records_the_asked_method_where_the_folder_names_none_or_its_config_is_unreadable(
    tmp_path, text, asked, expected
):
    """`run_quantization` reads a saved folder's method; a corrupt config.json falls back to the asked value (the
    loading step then names the problem)."""
    config = tmp_path / "config.json"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert run_identity.run_quantization(str(tmp_path), asked) == expected


def test_a_folder_with_a_corrupt_config_is_refused_in_one_line_and_writes_nothing(
    tmp_path, corpus, converted_fixture, capsys
):
    model = tmp_path / "model"
    shutil.copytree(converted_fixture, model)
    (model / "config.json").write_text('{"quantization_config": ', encoding="utf-8")
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "out.hdf5", model, "--layers", "top") == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "config.json' is not a valid JSON file" in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt", "model"]


def test_the_work_folder_record_is_read_by_the_one_reader_and_an_earlier_versions_resumes(
    tmp_path, corpus, converted_fixture, monkeypatch
):
    """Issue 52: the work folder keeps the one record (its run, its parts in the journal), read by
    `folder_record.read_record`; one an earlier version left (the run alone in `manifest.json`) still resumes."""
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "whole.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 130
    parts = tmp_path / "out.hdf5.parts"
    record = read_record(parts, AssertionError)
    assert record.tool == "elmo-embed" and record.journal == "parts.jsonl" and len(record.files) == 2
    assert record.run["world"] == 1 and unlisted_entries(parts, record) == ["parts.jsonl"]
    (parts / "manifest.json").write_text(json.dumps(record.run, indent=1, sort_keys=True))  # as earlier versions
    (parts / FOLDER_RECORD).unlink()
    (parts / "lock").touch()  # the lock file of earlier versions
    assert read_record(parts, AssertionError) == replace(record, name="manifest.json")
    with monkeypatch.context() as patch:
        _stop_after(patch, len(corpus) // 4 + 1 - 2)  # only the batches still missing are computed
        assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture, *SMALL_BATCHES) == 0
    assert (tmp_path / "out.hdf5").read_bytes() == (tmp_path / "whole.hdf5").read_bytes() and not parts.exists()
