"""`elmo-embed`: output layout, batching, resume after kill -9, multi-process shards + merge, errors."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from modeling_elmo.embed import main
from modeling_elmo.embed_batching import Sentence, bucketed_batches

LAYER_WIDTH = 32  # the fixture model: 2 * projection_dim 16


@pytest.fixture(scope="module")
def corpus(fixture_dir, tmp_path_factory) -> list[str]:
    """The fixture's 30 sentences, with an empty line and a blank one among them."""
    sentences = [sentence for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]
    return [*sentences[:5], "", *sentences[5:20], "   ", *sentences[20:], "Zürich 's café ."]


def _write(path, lines: list[str]):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read(path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    with h5py.File(path, "r") as handle:
        mapping = json.loads(handle["sentence_to_index"][0])
        return {name: handle[name][...] for name in handle if name != "sentence_to_index"}, mapping


def _embed(input_path, output_path, model_dir, *extra: str) -> int:
    return main([str(input_path), str(output_path), "--model", str(model_dir), "--no-progress", *extra])


def _direct_layers(model_dir, words: list[str]) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    with torch.no_grad():
        hidden = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True)
    return torch.stack(hidden.hidden_states, dim=1)[0].numpy()  # (layers, words, width)


def test_layout_matches_allennlp_elmo(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(input_path, tmp_path / "all.hdf5", converted_fixture, "--batch-size", "4") == 0
    datasets, mapping = _read(tmp_path / "all.hdf5")
    assert sorted(datasets, key=int) == [str(index) for index in range(len(corpus))]
    for index, line in enumerate(corpus):
        assert datasets[str(index)].shape == (3, len(line.split()), LAYER_WIDTH)
        assert datasets[str(index)].dtype == np.float32
    assert mapping[corpus[0]] == "0" and mapping[""] == "21"  # the last of the two empty lines wins, as in allennlp
    np.testing.assert_allclose(datasets["7"], _direct_layers(converted_fixture, corpus[7].split()), atol=1e-5)

    assert _embed(input_path, tmp_path / "top.hdf5", converted_fixture, "--layers", "top") == 0
    assert _embed(input_path, tmp_path / "mean.hdf5", converted_fixture, "--layers", "average") == 0
    top, _ = _read(tmp_path / "top.hdf5")
    average, _ = _read(tmp_path / "mean.hdf5")
    for index, line in enumerate(corpus):
        assert top[str(index)].shape == average[str(index)].shape == (len(line.split()), LAYER_WIDTH)
    np.testing.assert_allclose(top["3"], datasets["3"][-1], atol=1e-5)
    np.testing.assert_allclose(average["3"], datasets["3"].mean(axis=0), atol=1e-5)


def test_max_tokens_batches_and_raw_text(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", ["Hello, world!", "", "It's 3.5 km."])
    assert _embed(input_path, tmp_path / "raw.hdf5", converted_fixture, "--raw", "--max-tokens-per-batch", "5") == 0
    datasets, mapping = _read(tmp_path / "raw.hdf5")
    assert datasets["0"].shape == (3, 4, LAYER_WIDTH)  # Hello , world !
    assert datasets["1"].shape == (3, 0, LAYER_WIDTH)
    assert mapping == {"Hello, world!": "0", "": "1", "It's 3.5 km.": "2"}


def test_bucketing_groups_by_length_and_respects_limits():
    sentences = [Sentence(index, "", ["w"] * length) for index, length in enumerate([5, 1, 9, 1, 3, 7, 2])]
    batches = list(bucketed_batches(iter(sentences), max_tokens=8, window=4))
    assert [[s.index for s in batch.sentences] for batch in batches] == [[1, 3, 0], [2], [6, 4], [5]]
    assert [batch.name for batch in batches][:2] == ["00000000-00000", "00000000-00001"]
    shard = list(bucketed_batches(iter(sentences), batch_size=2, window=2, shard=(1, 2)))
    assert sorted(s.index for batch in shard for s in batch.sentences) == [2, 3, 6]
    with pytest.raises(ValueError, match="exactly one"):
        next(bucketed_batches(iter(sentences), batch_size=2, max_tokens=3))


def test_resume_after_kill_matches_uninterrupted_run(tmp_path, corpus, converted_fixture, monkeypatch):
    lines = [line for _ in range(8) for line in corpus]  # 272 lines in 68 batches: long enough to be killed mid-run
    input_path = _write(tmp_path / "in.txt", lines)
    args = ["--batch-size", "4", "--window", "64", "--word-cache", "0"]
    assert _embed(input_path, tmp_path / "full.hdf5", converted_fixture, *args) == 0

    output, parts = tmp_path / "resumed.hdf5", tmp_path / "resumed.hdf5.parts"
    command = [sys.executable, "-m", "modeling_elmo.embed", str(input_path), str(output)]
    process = subprocess.Popen(
        [*command, "--model", str(converted_fixture), "--no-progress", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while len(list(parts.glob("part-*.h5"))) < 5 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done = {name for part in parts.glob("part-*.h5") for name in h5py.File(part, "r")}
    assert 0 < len(done) < len(lines) and not output.exists()

    from modeling_elmo import embed

    computed = []
    original = embed.embed_batch
    monkeypatch.setattr(
        embed, "embed_batch", lambda *a: computed.extend(s.index for s in a[2].sentences) or original(*a)
    )
    assert _embed(input_path, output, converted_fixture, *args) == 0
    assert not parts.exists()
    assert set(map(str, computed)).isdisjoint(done)  # finished sentences were not recomputed
    assert len(computed) + len(done) == len(lines)
    full, full_mapping = _read(tmp_path / "full.hdf5")
    resumed, resumed_mapping = _read(output)
    assert resumed_mapping == full_mapping and resumed.keys() == full.keys()
    for name, values in full.items():
        np.testing.assert_array_equal(resumed[name], values)
    assert output.read_bytes() == (tmp_path / "full.hdf5").read_bytes()


def test_rerun_with_other_arguments_is_refused(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    (tmp_path / "out.hdf5.parts").mkdir()
    (tmp_path / "out.hdf5.parts" / "manifest.json").write_text(json.dumps({"layers": "top"}))
    assert _embed(input_path, tmp_path / "out.hdf5", converted_fixture) == 1
    assert "other arguments (differs in: " in capsys.readouterr().err


def test_errors_are_clear(tmp_path, corpus, converted_fixture, capsys):
    input_path = _write(tmp_path / "in.txt", corpus)
    assert _embed(tmp_path / "missing.txt", tmp_path / "out.hdf5", converted_fixture) == 1
    assert "Input file not found" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_bytes(b"fine\n\xff\xfe broken\n")
    assert _embed(tmp_path / "bad.txt", tmp_path / "bad.hdf5", converted_fixture) == 1
    assert "line 2 is not UTF-8" in capsys.readouterr().err
    assert _embed(input_path, tmp_path / "out.hdf5", tmp_path / "no-model") == 1
    assert "Cannot load model" in capsys.readouterr().err
    (tmp_path / "exists.hdf5").write_bytes(b"")
    assert _embed(input_path, tmp_path / "exists.hdf5", converted_fixture) == 1
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "merged.hdf5"), str(tmp_path / "in.txt")]) == 1
    assert "Cannot read shard" in capsys.readouterr().err


def test_two_processes_then_merge_equal_single_run(tmp_path, corpus, converted_fixture):
    input_path = _write(tmp_path / "in.txt", corpus)
    args = ["--batch-size", "3", "--window", "4"]
    assert _embed(input_path, tmp_path / "single.hdf5", converted_fixture, *args) == 0
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
    single, single_mapping = _read(tmp_path / "single.hdf5")
    merged, merged_mapping = _read(output)
    assert merged_mapping == single_mapping and merged.keys() == single.keys()
    for name, values in single.items():
        np.testing.assert_allclose(merged[name], values, atol=1e-5)
    assert main(["merge", str(tmp_path / "twice.hdf5"), str(shards[0]), str(shards[0])]) == 1
