"""The converter: any architecture in the original format, the CLI, URLs, and bad input."""

import functools
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from original_numpy import original_layers
from transformers import AutoModel

from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.convert import PRESETS, ConversionError, convert_checkpoint, main, resolve_source
from modeling_elmo.original_checkpoint import OriginalCheckpointError

REPO_ROOT = Path(__file__).resolve().parent.parent
SENTENCE = ["Conversion", "must", "not", "depend", "on", "sizes", ",", "naïve", "café", "!"]


def top_layers(folder: Path, words: list[str]) -> np.ndarray:
    """All layers of `words` from a converted folder: (n_layers + 1, n_words, 2 * projection_dim)."""
    model = AutoModel.from_pretrained(folder)
    input_ids = torch.tensor([[word_to_char_ids(word, model.config.max_characters_per_token) for word in words]])
    with torch.no_grad():
        output = model(input_ids=input_ids, output_hidden_states=True)
    return torch.stack(output.hidden_states)[:, 0].double().numpy()


def assert_no_leftovers(output: Path) -> None:
    assert not output.exists()
    assert [p.name for p in output.parent.iterdir() if p.name.startswith(f".{output.name}")] == []


ARCHITECTURES = {
    "no-highway-no-skip": dict(n_highway=0, n_layers=1, use_skip_connections=False),
    "three-highway-four-layers": dict(n_highway=3, n_layers=4, dim=24, projection_dim=8),
    "other-filters-tanh": dict(filters=[[2, 5], [4, 7], [7, 3]], activation="tanh", char_dim=6, n_highway=1),
    "projection-equals-dim": dict(dim=16, projection_dim=16, n_layers=3),
    "tight-clips-no-skip": dict(cell_clip=0.5, proj_clip=0.25, use_skip_connections=False, n_layers=2),
    "no-clips": dict(cell_clip=None, proj_clip=None),
    "short-words": dict(max_characters_per_token=20, filters=[[1, 4], [3, 6]]),
}


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES.keys())
def test_any_architecture_converts_and_matches_the_original_formulas(random_checkpoint, tmp_path, architecture):
    options, weights = random_checkpoint(seed=len(str(architecture)), **architecture)
    result = convert_checkpoint(str(options), str(weights), tmp_path / "out", verify=True)
    assert result.max_abs_difference <= 1e-6
    words = [w[: architecture.get("max_characters_per_token", 50) - 2] for w in SENTENCE]
    found = top_layers(tmp_path / "out", words)
    expected = original_layers(options, weights, words)
    assert found.shape == expected.shape == (architecture.get("n_layers", 2) + 1, len(words), found.shape[-1])
    assert np.abs(found - expected).max() <= 2e-6


def test_missing_projection_in_hdf5_means_identity(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(filters=[[1, 6], [2, 10]], projection_dim=16, write_projection=False)
    with h5py.File(weights) as handle:
        assert "CNN_proj" not in handle
    convert_checkpoint(str(options), str(weights), tmp_path / "out")
    expected = original_layers(options, weights, SENTENCE)
    assert np.abs(top_layers(tmp_path / "out", SENTENCE) - expected).max() <= 2e-6


def test_output_folder_is_complete(converted_fixture):
    names = {p.name for p in converted_fixture.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"} <= names
    config = json.loads((converted_fixture / "config.json").read_text())
    assert config["model_type"] == "elmo"
    assert config["char_filters"] == [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]]
    assert (config["lstm_cell_size"], config["projection_dim"], config["num_hidden_layers"]) == (64, 16, 2)
    assert (config["cell_clip"], config["proj_clip"], config["use_skip_connections"]) == (3, 3, True)
    from safetensors import safe_open

    with safe_open(converted_fixture / "model.safetensors", "pt") as handle:
        assert {handle.get_slice(key).get_dtype() for key in handle.keys()} == {"F32"}
    assert "sha256" in (converted_fixture / "README.md").read_text()


def test_existing_output_is_refused_unless_overwrite(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("user data")
    with pytest.raises(ConversionError, match="already exists.*--overwrite"):
        convert_checkpoint(str(options), str(weights), output)
    assert (output / "keep.txt").read_text() == "user data"
    convert_checkpoint(str(options), str(weights), output, overwrite=True)
    assert not (output / "keep.txt").exists() and (output / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def corrupt(kind: str, options: Path, weights: Path) -> tuple[Path, Path]:
    """Damage a valid checkpoint in one way."""
    if kind == "missing-weights":
        weights.unlink()
    elif kind == "truncated-weights":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif kind == "not-hdf5":
        weights.write_text("this is not HDF5")
    elif kind == "invalid-json":
        options.write_text("{ not json")
    elif kind == "missing-key":
        data = json.loads(options.read_text())
        del data["lstm"]["projection_dim"]
        options.write_text(json.dumps(data))
    elif kind == "bad-value":
        data = json.loads(options.read_text())
        data["lstm"]["n_layers"] = "two"
        options.write_text(json.dumps(data))
    elif kind == "shape-mismatch":
        with h5py.File(weights, "a") as handle:
            del handle["CNN_high_1/W_carry"]
            handle["CNN_high_1/W_carry"] = np.zeros((124, 120), np.float32)
    elif kind == "options-disagree":
        data = json.loads(options.read_text())
        data["lstm"]["dim"] = 32
        options.write_text(json.dumps(data))
    elif kind == "missing-dataset":
        with h5py.File(weights, "a") as handle:
            del handle["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]
    return options, weights


BAD_INPUTS = {
    "missing-weights": r"Weights file not found: .*lm_weights\.hdf5",
    "truncated-weights": r"lm_weights\.hdf5: not a readable HDF5 file",
    "not-hdf5": r"lm_weights\.hdf5: not a readable HDF5 file",
    "invalid-json": r"options\.json: not valid JSON",
    "missing-key": r"options\.json: missing key 'lstm\.projection_dim'",
    "bad-value": r"options\.json: 'lstm\.n_layers' must be a non-negative integer, got 'two'",
    "shape-mismatch": r"dataset 'CNN_high_1/W_carry' has shape \(124, 120\), but the options imply \(124, 124\)",
    "options-disagree": r"dataset 'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(32, 256\), .* \(32, 128\)",
    "missing-dataset": r"dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0' is missing",
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_checkpoints_give_clear_errors_and_write_nothing(random_checkpoint, tmp_path, kind):
    options, weights = corrupt(kind, *random_checkpoint(filters=[[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]]))
    output = tmp_path / "out"
    with pytest.raises(OriginalCheckpointError, match=BAD_INPUTS[kind]):
        convert_checkpoint(str(options), str(weights), output)
    assert_no_leftovers(output)


def test_cli_reports_errors_without_traceback(random_checkpoint, tmp_path, capsys):
    options, weights = corrupt("missing-key", *random_checkpoint())
    assert main(["--options", str(options), "--weights", str(weights), "--output", str(tmp_path / "out")]) == 1
    assert "elmo-convert: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--output", str(tmp_path / "out")])


@pytest.mark.parametrize(
    "command",
    [["elmo-convert"], [sys.executable, str(REPO_ROOT / "conversion" / "convert_elmo_original_to_hf.py")]],
    ids=["console-script", "conversion-script"],
)
def test_command_line_verify(random_checkpoint, tmp_path, command):
    if command[0] == "elmo-convert":
        command = [str(Path(sys.executable).with_name("elmo-convert"))]
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    arguments = ["--options", str(options), "--weights", str(weights), "--output", str(output), "--verify"]
    completed = subprocess.run(command + arguments, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    difference = float(completed.stdout.split("max abs difference to the original weights = ")[1].split()[0])
    assert difference <= 1e-6
    assert (output / "model.safetensors").is_file()


@pytest.fixture
def served_checkpoint(random_checkpoint):
    """Serve a random checkpoint's folder on 127.0.0.1; yields (base_url, server)."""
    options, _ = random_checkpoint()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(options.parent))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", options.parent
    server.shutdown()
    server.server_close()


@pytest.fixture
def online_loopback(monkeypatch):
    """Allow huggingface_hub's HTTP client for 127.0.0.1 in this test (the suite runs with HF_HUB_OFFLINE=1)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "is_offline_mode", lambda: False)


def test_urls_are_downloaded_once_into_the_cache(served_checkpoint, online_loopback, tmp_path):
    base_url, source = served_checkpoint
    cache = tmp_path / "cache"
    result = convert_checkpoint(
        f"{base_url}/options.json", f"{base_url}/lm_weights.hdf5", tmp_path / "out", cache_dir=cache
    )
    cached = sorted(cache.rglob("*.*"), key=lambda path: path.name)
    assert [p.name for p in cached] == ["lm_weights.hdf5", "options.json"]
    assert (cached[0].read_bytes(), cached[1].read_bytes()) == (
        (source / "lm_weights.hdf5").read_bytes(),
        (source / "options.json").read_bytes(),
    )
    assert result.sources["weights"]["location"] == f"{base_url}/lm_weights.hdf5"
    for path in source.iterdir():  # the second conversion must not need the server's files
        path.unlink()
    convert_checkpoint(f"{base_url}/options.json", f"{base_url}/lm_weights.hdf5", tmp_path / "again", cache_dir=cache)
    assert (tmp_path / "again" / "model.safetensors").is_file()


def test_unreachable_url_is_a_clear_error(served_checkpoint, online_loopback, tmp_path):
    base_url, _ = served_checkpoint
    output = tmp_path / "out"
    with pytest.raises(ConversionError, match=r"Could not download http://127\.0\.0\.1:\d+/missing\.hdf5"):
        convert_checkpoint(f"{base_url}/options.json", f"{base_url}/missing.hdf5", output, cache_dir=tmp_path / "c")
    assert_no_leftovers(output)
    assert [p.name for p in (tmp_path / "c").rglob("*") if p.is_file() and p.name != "options.json"] == []


def test_offline_mode_blocks_url_downloads(tmp_path):
    with pytest.raises(ConversionError, match="offline mode is enabled"):
        resolve_source("https://example.invalid/options.json", cache_dir=tmp_path)


def test_preset_uses_the_official_urls_and_the_cache(random_checkpoint, tmp_path, capsys):
    preset = PRESETS["small"]
    assert preset.options_url.endswith("/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json")
    assert preset.weights_url.endswith("/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5")
    options, weights = random_checkpoint()
    cache = tmp_path / "cache"
    # Place the files where a previous download of the preset URLs would have left them.
    for url, path in ((preset.options_url, options), (preset.weights_url, weights)):
        target = resolve_source_target(url, cache)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    assert main(["--preset", "small", "--output", str(tmp_path / "out"), "--cache-dir", str(cache)]) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    assert preset.weights_url in card and "1 Billion Word" in card


def resolve_source_target(url: str, cache: Path) -> Path:
    """Where `resolve_source` keeps a downloaded URL (its documented cache layout)."""
    import hashlib

    return cache / hashlib.sha256(url.encode()).hexdigest()[:16] / url.rsplit("/", 1)[1]
