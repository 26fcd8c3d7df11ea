"""`elmo-convert --model-dir`: NLPL models as ZIPs and extracted folders, their cards and bad input."""

import functools
import gzip
import hashlib
import http.server
import json
import threading
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import transformers
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from modeling_elmo.conversion.convert import convert_checkpoint
from modeling_elmo.conversion.convert_command import main
from modeling_elmo.conversion.presets import NLPL_CITATION
from modeling_elmo.embed.token_embeddings import cache_vocabulary

VOCABULARY = "<S>\n</S>\n<UNK>\n!!!MAXTERMID\nog\ni\nsom\nbank\n"
META = {
    "id": 210,
    "handle": "http://vectors.nlpl.eu/repository/20/210.zip",
    "corpus": [{"description": "Norsk Aviskorpus", "language": "nob", "tokens": 1234567}],
}


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch):
    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)


def write_zip(path: Path, members: dict[str, bytes | Path]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content.read_bytes() if isinstance(content, Path) else content)
    return path


def write_folder(path: Path, members: dict[str, bytes | Path]) -> Path:
    path.mkdir()
    for name, content in members.items():
        (path / name).write_bytes(content.read_bytes() if isinstance(content, Path) else content)
    return path


def nlpl_members(options: Path, weights: Path, **extra: bytes) -> dict[str, bytes | Path]:
    """An NLPL model's files: options.json, model.hdf5, a gzipped vocabulary, meta.json, README."""
    return {
        "options.json": options,
        "model.hdf5": weights,
        "vocab.txt.gz": gzip.compress(VOCABULARY.encode()),
        "meta.json": json.dumps(META).encode(),
        "README": b"Norwegian ELMo, trained with bilm-tf.",
        **extra,
    }


def with_n_characters(options: Path, n_characters: int) -> bytes:
    data = json.loads(options.read_text())
    data["char_cnn"]["n_characters"] = n_characters
    return json.dumps(data).encode()


def assert_same_weights(folder: Path, reference: Path) -> None:
    found, expected = load_file(folder / "model.safetensors"), load_file(reference / "model.safetensors")
    assert found.keys() == expected.keys()
    assert all(torch.equal(found[name], expected[name]) for name in expected)
    assert json.loads((folder / "config.json").read_text()) == json.loads((reference / "config.json").read_text())


@pytest.mark.parametrize("packaging", ["zip", "folder"])
@pytest.mark.parametrize("n_characters", [261, 262])
def test_zip_and_folder_convert_like_the_plain_files(random_checkpoint, tmp_path, packaging, n_characters):
    options, weights = random_checkpoint(seed=3)
    convert_checkpoint(str(options), str(weights), tmp_path / "plain")
    members = nlpl_members(options, weights) | {"options.json": with_n_characters(options, n_characters)}
    source = (write_zip if packaging == "zip" else write_folder)(tmp_path / f"210.{packaging}", members)
    assert main(["--model-dir", str(source), "--output", str(tmp_path / "out")]) == 0
    assert_same_weights(tmp_path / "out", tmp_path / "plain")
    assert (tmp_path / "out" / "vocab.txt").read_text() == VOCABULARY
    AutoTokenizer.from_pretrained(tmp_path / "out")  # the kept vocabulary does not disturb loading


def test_single_hdf5_of_another_name_is_the_weights(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(seed=4)
    convert_checkpoint(str(options), str(weights), tmp_path / "plain")
    source = write_folder(tmp_path / "model", {"options.json": options, "elmo_weights.hdf5": weights})
    assert main(["--model-dir", str(source), "--output", str(tmp_path / "out")]) == 0
    assert_same_weights(tmp_path / "out", tmp_path / "plain")
    assert not (tmp_path / "out" / "vocab.txt").exists()


def test_nlpl_zip_of_the_fixture_reproduces_the_original_outputs(fixture_dir, tmp_path):
    """The original TensorFlow run's top layer, from the fixture biLM packaged the way NLPL ships models."""
    archive = write_zip(
        tmp_path / "fixture.zip",
        {"options.json": fixture_dir / "options.json", "model.hdf5": fixture_dir / "lm_weights.hdf5"},
    )
    assert main(["--model-dir", str(archive), "--output", str(tmp_path / "out")]) == 0
    words = json.loads((fixture_dir / "sentences.json").read_text())[0][0].split()
    with h5py.File(fixture_dir / "lm_embeddings_0.hdf5", "r") as handle:
        expected = np.concatenate(list(handle["0"][...]), axis=-1)
    model, tokenizer = AutoModel.from_pretrained(tmp_path / "out"), AutoTokenizer.from_pretrained(tmp_path / "out")
    with torch.no_grad():
        top = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt")).last_hidden_state[0]
    assert top.shape == expected.shape
    assert np.abs(top.numpy() - expected).max() <= 2e-6


def test_kept_vocabulary_fills_the_token_embedding_table_without_changing_outputs(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(seed=5)
    archive = write_zip(tmp_path / "210.zip", nlpl_members(options, weights))
    assert main(["--model-dir", str(archive), "--output", str(tmp_path / "out")]) == 0
    model, tokenizer = AutoModel.from_pretrained(tmp_path / "out"), AutoTokenizer.from_pretrained(tmp_path / "out")
    batch = tokenizer(
        [["og", "bank", "i", "elv"], ["som"]], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        expected = model(**batch, output_hidden_states=True).hidden_states
        assert cache_vocabulary(model, tmp_path / "out" / "vocab.txt", limit=5) == 5  # <S> </S> <UNK> og i
        assert len(model.char_encoder.token_embedding_table) == 5
        found = model(**batch, output_hidden_states=True).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(expected, found, strict=True))


def test_card_states_the_source_facts_and_hashes(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(seed=6)
    members = nlpl_members(options, weights)
    archive = write_zip(tmp_path / "210.zip", members)
    assert main(["--model-dir", str(archive), "--output", str(tmp_path / "plain")]) == 0
    assert main(["--model-dir", str(archive), "--output", str(tmp_path / "verified"), "--verify"]) == 0

    card = ModelCard.load(tmp_path / "verified" / "README.md")
    assert card.data.language == "nb"  # meta.json's ISO 639-3 'nob' as its ISO 639-1 code
    assert "Norsk Aviskorpus (1,234,567 tokens)" in card.text and "# ELMo (NLPL 210)" in card.text
    assert card.data.license == "unknown" and "license: not stated in meta.json" in card.text
    assert NLPL_CITATION in card.text and "Norwegian ELMo, trained with bilm-tf." in card.text
    assert f"| 210.zip | {archive} | `{hashlib.sha256(archive.read_bytes()).hexdigest()}` |" in card.text
    for name, content in members.items():
        data = content.read_bytes() if isinstance(content, Path) else content
        assert f"| 210.zip: {name} | member of 210.zip | `{hashlib.sha256(data).hexdigest()}` |" in card.text
    assert "max abs difference of" in card.text

    unverified = (tmp_path / "plain" / "README.md").read_text()
    assert "max abs difference" not in unverified and "Conversion check: not run" in unverified


def test_folder_without_meta_json_states_no_language(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(seed=7)
    source = write_folder(tmp_path / "model", {"options.json": options, "model.hdf5": weights})
    assert main(["--model-dir", str(source), "--output", str(tmp_path / "out")]) == 0
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert card.data.language is None and "not stated (no corpus" in card.text
    assert (
        f"| model.hdf5 | {source / 'model.hdf5'} | `{hashlib.sha256(weights.read_bytes()).hexdigest()}` |" in card.text
    )


# -- bad input: one line naming the problem, exit 1, nothing written ------------------------------------------------


def corrupt_member(path: Path) -> Path:
    """A ZIP whose model.hdf5 member's stored bytes are damaged (its CRC no longer matches)."""
    data = bytearray(path.read_bytes())
    start = data.index(b"\x89HDF\r\n\x1a\n")  # the HDF5 signature, stored uncompressed
    data[start + 200 : start + 216] = bytes(value ^ 0xFF for value in data[start + 200 : start + 216])
    path.write_bytes(bytes(data))
    return path


BAD_ARCHIVES = {
    "no-options": (lambda o, w, tmp: write_zip(tmp / "m.zip", {"model.hdf5": w}), "m.zip: no options.json"),
    "no-hdf5": (lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o}), "m.zip: no .hdf5 weights file"),
    "several-hdf5": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "a.hdf5": w, "b.hdf5": w}),
        "several .hdf5 files (a.hdf5, b.hdf5) and none named model.hdf5",
    ),
    "not-a-zip": (
        lambda o, w, tmp: (tmp / "m.zip").write_bytes(b"PK\x03\x04 truncated") and tmp / "m.zip",
        "m.zip: not a readable ZIP archive",
    ),
    "damaged-member": (
        lambda o, w, tmp: corrupt_member(write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": w})),
        "m.zip: cannot read its member model.hdf5",
    ),
    "path-traversal": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": w, "../escape.txt": b"x"}),
        "member '../escape.txt' has a path outside the archive",
    ),
    "absolute-member": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": w, "/etc/evil": b"x"}),
        "member '/etc/evil' has a path outside the archive",
    ),
    "bad-meta": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": w, "meta.json": b"[1]"}),
        "meta.json: must be a JSON object",
    ),
    "bad-language": (
        lambda o, w, tmp: write_zip(
            tmp / "m.zip", {"options.json": o, "model.hdf5": w, "meta.json": b'{"corpus": [{"language": "N0"}]}'}
        ),
        "meta.json: corpus[0].language: 'n0' is not an ISO 639 language code",
    ),
    "bad-vocabulary": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": w, "vocab.txt.gz": b"plain"}),
        "m.zip: vocab.txt.gz: cannot read the vocabulary",
    ),
    "weights-disagree": (
        lambda o, w, tmp: write_zip(tmp / "m.zip", {"options.json": o, "model.hdf5": o}),
        "m.zip: model.hdf5: not a readable HDF5 file",
    ),
}


@pytest.mark.parametrize("case", BAD_ARCHIVES.values(), ids=BAD_ARCHIVES.keys())
def test_bad_archive_is_one_line_exit_1_nothing_written(random_checkpoint, tmp_path, capsys, case):
    make, message = case
    options, weights = random_checkpoint(seed=8)
    (tmp_path / "downloads").mkdir()
    archive = make(options, weights, tmp_path / "downloads")
    before = sorted(path.name for path in (tmp_path / "downloads").iterdir())
    output = tmp_path / "out"
    assert main(["--model-dir", str(archive), "--output", str(output)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("elmo-convert: error: ") and message in error
    assert sorted(path.name for path in (tmp_path / "downloads").iterdir()) == before
    assert not output.exists() and [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []
    assert not (tmp_path / "escape.txt").exists()


def test_missing_model_dir_and_mixed_sources_are_refused(random_checkpoint, tmp_path, capsys):
    assert main(["--model-dir", str(tmp_path / "absent.zip"), "--output", str(tmp_path / "out")]) == 1
    assert "absent.zip: no such folder or ZIP archive" in capsys.readouterr().err
    options, _ = random_checkpoint()
    with pytest.raises(SystemExit):
        main(["--model-dir", str(tmp_path), "--options", str(options), "--output", str(tmp_path / "out")])
    assert "--from nlpl takes --model-dir (and no --options" in capsys.readouterr().err


def test_zip_url_is_cached_and_overwrite_replaces_a_converted_folder(random_checkpoint, tmp_path, monkeypatch):
    from huggingface_hub import constants

    if hasattr(constants, "is_offline_mode"):  # huggingface_hub 1.x; 0.x (under Transformers 4.x) reads a constant
        monkeypatch.setattr(constants, "is_offline_mode", lambda: False)
    else:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # only 127.0.0.1 is reached
    options, weights = random_checkpoint(seed=9)
    (tmp_path / "served").mkdir()
    archive = write_zip(tmp_path / "served" / "210.zip", nlpl_members(options, weights))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(archive.parent))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/210.zip"
    try:
        arguments = ["--model-dir", url, "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
        assert main(arguments) == 0
        assert main(arguments) == 1  # the output exists
        assert main([*arguments, "--overwrite"]) == 0  # a folder elmo-convert wrote, vocab.txt included
    finally:
        server.shutdown()
        server.server_close()
    assert main(["--model-dir", str(archive), "--output", str(tmp_path / "local")]) == 0
    assert_same_weights(tmp_path / "out", tmp_path / "local")
    assert [path.name for path in (tmp_path / "cache").rglob("*.zip")] == ["210.zip"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"| 210.zip | {url} | `{hashlib.sha256(archive.read_bytes()).hexdigest()}` |" in card
