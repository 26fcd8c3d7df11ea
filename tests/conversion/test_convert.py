"""The converter: any architecture in the original format, the CLI, URLs, and bad input."""

import errno
import functools
import http.server
import json
import math
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import transformers
from original_numpy import original_layers
from safetensors import SafetensorError
from transformers import AutoModel

from modeling_elmo import ElmoModel
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.conversion import convert
from modeling_elmo.conversion.convert import ConversionError, convert_checkpoint, resolve_source
from modeling_elmo.conversion.convert_command import main
from modeling_elmo.conversion.presets import PRESETS
from modeling_elmo.formats.original_checkpoint import OriginalCheckpointError, load_original_checkpoint
from modeling_elmo.foundation.folder_record import FOLDER_RECORD, LEGACY_OWNER_FILE, FolderRecord

REPO_ROOT = Path(__file__).resolve().parents[2]
SENTENCE = ["Conversion", "must", "not", "depend", "on", "sizes", ",", "naïve", "café", "!"]


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch):
    """Keep Transformers' progress bars off stderr, where the tests read the error line."""
    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)


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
    convert_checkpoint(str(options), str(weights), output)
    (output / "README.md").write_text("edited")
    with pytest.raises(ConversionError, match="already exists.*--overwrite"):
        convert_checkpoint(str(options), str(weights), output)
    assert (output / "README.md").read_text() == "edited"
    convert_checkpoint(str(options), str(weights), output, overwrite=True)
    assert (output / "README.md").read_text() != "edited" and (output / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_overwrite_replaces_an_empty_folder(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    (tmp_path / "out").mkdir()
    convert_checkpoint(str(options), str(weights), tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / "model.safetensors").is_file()


def cli_error(capsys) -> str:
    """The one line `elmo-convert` printed on stderr for a refused run."""
    err = capsys.readouterr().err
    assert err.startswith("elmo-convert: error: ") and err.count("\n") == 1, err
    return err


def test_overwrite_refuses_a_folder_holding_anything_else(random_checkpoint, tmp_path, capsys):
    options, weights = random_checkpoint()
    output = tmp_path / "mydir"
    convert_checkpoint(str(options), str(weights), output)
    (output / "notes.txt").write_text("user data")
    (output / "checkpoints").mkdir()
    (output / "checkpoints" / "step-1.bin").write_bytes(b"training state")
    arguments = ["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]
    assert main(arguments) == 1
    err = cli_error(capsys)
    assert str(output) in err and "checkpoints/, notes.txt" in err and "model.safetensors" not in err
    assert (output / "notes.txt").read_text() == "user data"
    assert (output / "checkpoints" / "step-1.bin").read_bytes() == b"training state"


@pytest.mark.parametrize(
    "config", [None, '{"model_type": "bert"}', "{not json", "[]"], ids=["no-config", "bert", "bad-json", "list"]
)
def test_overwrite_refuses_a_folder_without_an_elmo_config(random_checkpoint, tmp_path, capsys, config):
    options, weights = random_checkpoint()
    output = tmp_path / "mydir"
    output.mkdir()
    (output / "model.safetensors").write_bytes(b"someone else's weights")
    if config is not None:
        (output / "config.json").write_text(config)
    arguments = ["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]
    assert main(arguments) == 1
    assert "config.json" in cli_error(capsys)
    assert (output / "model.safetensors").read_bytes() == b"someone else's weights"


def test_overwrite_refuses_a_fine_tuned_model(random_checkpoint, tmp_path, capsys):
    """A tagger saved with save_pretrained holds only files a conversion writes too: its config tells it apart."""
    from modeling_elmo import ElmoForTokenClassification, ElmoTokenizer

    options, weights = random_checkpoint()
    output = tmp_path / "ner-model"
    config, _ = load_original_checkpoint(options, weights)
    ElmoForTokenClassification(config).save_pretrained(output)
    ElmoTokenizer().save_pretrained(output)
    before = (output / "model.safetensors").read_bytes()
    arguments = ["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]
    assert main(arguments) == 1
    assert "ElmoForTokenClassification" in cli_error(capsys)
    assert (output / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize("target", [".", "", "..", "absolute"])
def test_the_current_directory_and_its_ancestors_are_refused(random_checkpoint, tmp_path, monkeypatch, capsys, target):
    options, weights = random_checkpoint()
    work = tmp_path / "work" / "elmo"
    convert_checkpoint(str(options), str(weights), work)  # a converted folder: replaceable, but it is the cwd
    monkeypatch.chdir(work)
    before = sorted(path.name for path in work.iterdir())
    output = str(work) if target == "absolute" else target
    assert main(["--options", str(options), "--weights", str(weights), "--output", output, "--overwrite"]) == 1
    assert "current directory" in cli_error(capsys)
    assert sorted(path.name for path in work.iterdir()) == before
    assert [path.name for path in work.parent.iterdir()] == ["elmo"]
    assert [path.name for path in (tmp_path / "work").parent.iterdir() if path.name.startswith(".")] == []


def test_an_output_folder_holding_an_input_is_refused(random_checkpoint, tmp_path, capsys):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    weights = weights.replace(output / "model.safetensors")  # replaceable by name, but it is the input
    assert main(["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]) == 1
    assert f"{output} contains the input {weights}" in cli_error(capsys)
    assert h5py.is_hdf5(weights)


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
    "bad-value": r"options\.json: lstm\.n_layers must be a positive integer, got \"two\"",
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


@pytest.mark.integration
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

    if hasattr(constants, "is_offline_mode"):  # huggingface_hub 1.x; 0.x (under Transformers 4.x) reads a constant
        monkeypatch.setattr(constants, "is_offline_mode", lambda: False)
    else:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


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


BAD_OPTIONS = {
    "negative-clip": ("lstm", "cell_clip", -3, r"lstm\.cell_clip must be a positive number or null, got -3$"),
    "zero-clip": ("lstm", "proj_clip", 0, r"lstm\.proj_clip must be a positive number or null, got 0$"),
    "nan-clip": ("lstm", "proj_clip", math.nan, r"lstm\.proj_clip must be a positive number or null, got NaN$"),
    "string-clip": ("lstm", "cell_clip", "three", r"lstm\.cell_clip must be a positive number or null, got \"three\""),
    "string-boolean": (
        "lstm",
        "use_skip_connections",
        "false",
        r"lstm\.use_skip_connections must be a boolean, got \"false\"$",
    ),
    "integer-boolean": ("lstm", "use_skip_connections", 1, r"lstm\.use_skip_connections must be a boolean, got 1$"),
    "zero-layers": ("lstm", "n_layers", 0, r"lstm\.n_layers must be a positive integer, got 0$"),
    "float-size": ("lstm", "projection_dim", 16.0, r"lstm\.projection_dim must be a positive integer, got 16\.0$"),
    "null-filters": ("char_cnn", "filters", None, r"char_cnn\.filters must be a non-empty list of .*, got null$"),
    "short-words": (
        "char_cnn",
        "max_characters_per_token",
        3,
        r"char_cnn\.max_characters_per_token must be at least 5 \(the widest character filter\), got 3$",
    ),
    "list-section": ("lstm", None, [], r"lstm must be a JSON object, got \[\]$"),
}


@pytest.mark.parametrize("case", BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_every_option_is_checked_with_one_clear_message(random_checkpoint, tmp_path, case):
    section, key, value, message = case
    options, weights = random_checkpoint()
    data = json.loads(options.read_text())
    if key is None:
        data[section] = value
    else:
        data[section][key] = value
    options.write_text(json.dumps(data))
    with pytest.raises(OriginalCheckpointError, match=rf"^{re.escape(str(options))}: {message}"):
        convert_checkpoint(str(options), str(weights), tmp_path / "out")
    assert_no_leftovers(tmp_path / "out")


def test_token_input_models_are_refused_clearly(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    data = json.loads(options.read_text())
    del data["char_cnn"]
    options.write_text(json.dumps(data))
    message = r"options\.json: no 'char_cnn' section: token-embedding \(word-input\) biLMs are not supported.*charac"
    with pytest.raises(OriginalCheckpointError, match=message):
        convert_checkpoint(str(options), str(weights), tmp_path / "out")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused(random_checkpoint, tmp_path, value):
    options, weights = random_checkpoint()
    with h5py.File(weights, "a") as handle:
        handle["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"][7] = value
    message = (
        r"lm_weights\.hdf5: dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B' has 1 non-finite value\(s\) \(NaN, inf"
    )
    with pytest.raises(OriginalCheckpointError, match=message):
        convert_checkpoint(str(options), str(weights), tmp_path / "out")
    assert_no_leftovers(tmp_path / "out")


def test_verification_fails_when_the_difference_is_nan(random_checkpoint, tmp_path, monkeypatch, capsys):
    options, weights = random_checkpoint()
    monkeypatch.setattr(convert, "max_difference_to_original", lambda folder, reference: math.nan)
    output = tmp_path / "out"
    assert main(["--options", str(options), "--weights", str(weights), "--output", str(output), "--verify"]) == 1
    assert "Verification failed" in cli_error(capsys)
    assert_no_leftovers(output)


def test_max_difference_keeps_a_nan_of_any_layer(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    convert_checkpoint(str(options), str(weights), tmp_path / "out")
    config, state_dict = load_original_checkpoint(options, weights)
    state_dict[f"bilm.layers.{config.num_hidden_layers - 1}.weight_proj"][0, 0, 0] = math.nan  # top layer only
    reference = ElmoModel(config)
    reference.load_state_dict(state_dict)
    assert math.isnan(convert.max_difference_to_original(tmp_path / "out", reference.eval()))


def failing(error: BaseException):
    """A stand-in for a writer that fails with `error`."""

    def fail(*args, **kwargs):
        raise error

    return fail


NO_SPACE = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
WRITE_FAILURES = {
    "disk-full": ("transformers.modeling_utils.safe_save_file", NO_SPACE, "No space left on device"),
    "safetensors-error": (
        "transformers.modeling_utils.safe_save_file",
        SafetensorError('Error while serializing: IoError(Os { code: 28, message: "No space left on device" })'),
        "No space left on device",
    ),
    "tokenizer-disk-full": (
        "modeling_elmo.conversion.convert.ElmoTokenizer.save_pretrained",
        NO_SPACE,
        "No space left on device",
    ),
    "read-only": ("tempfile.mkdtemp", OSError(errno.EROFS, os.strerror(errno.EROFS)), "Read-only file system"),
}


@pytest.mark.parametrize("case", WRITE_FAILURES.values(), ids=WRITE_FAILURES.keys())
def test_write_failures_are_one_line_and_keep_the_old_folder(random_checkpoint, tmp_path, monkeypatch, capsys, case):
    target, error, cause = case
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    old = {path.name: path.read_bytes() for path in output.iterdir()}
    monkeypatch.setattr(target, failing(error))
    assert main(["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]) == 1
    monkeypatch.undo()
    err = cli_error(capsys)
    assert str(output) in err and cause in err
    assert {path.name: path.read_bytes() for path in output.iterdir()} == old
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []


def test_a_failed_swap_puts_the_old_folder_back(random_checkpoint, tmp_path, monkeypatch, capsys):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    old = {path.name: path.read_bytes() for path in output.iterdir()}
    replace, failures = os.replace, []

    def replace_failing_once_into_output(source, target):
        if Path(target) == output and not failures:
            failures.append(source)
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_failing_once_into_output)
    assert main(["--options", str(options), "--weights", str(weights), "--output", str(output), "--overwrite"]) == 1
    monkeypatch.undo()
    assert "Invalid cross-device link" in cli_error(capsys) and ".out.partial-" in str(failures[0])
    assert {path.name: path.read_bytes() for path in output.iterdir()} == old
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_output_permissions_follow_the_umask(random_checkpoint, tmp_path, umask):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    previous = os.umask(umask)
    try:
        convert_checkpoint(str(options), str(weights), output)
    finally:
        os.umask(previous)
    assert oct(stat.S_IMODE(output.stat().st_mode)) == oct(0o777 & ~umask)
    modes = {path.name: oct(stat.S_IMODE(path.stat().st_mode)) for path in output.iterdir()}
    assert modes == dict.fromkeys(modes, oct(0o666 & ~umask)) and "model.safetensors" in modes


def write_owner(folder: Path, pid: int, host: str | None = None, legacy: bool = False) -> None:
    """Mark `folder` as the work folder of an `elmo-convert` process, as the converter does (`legacy`: as earlier
    versions did, an owner file alone)."""
    folder.mkdir()
    owner = {"pid": pid, "host": host or socket.gethostname()}
    if legacy:
        (folder / LEGACY_OWNER_FILE).write_text(json.dumps(owner))
    else:
        (folder / FOLDER_RECORD).write_text(FolderRecord("elmo-convert", {}, owner).text())


@pytest.mark.integration
def test_a_killed_conversion_leaves_a_partial_folder_that_the_next_run_removes(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    killed = (
        "import os, signal, sys\n"
        "from modeling_elmo.conversion import convert, convert_command\n"
        "convert.ElmoTokenizer.save_pretrained = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)\n"
        "convert_command.main(sys.argv[1:])\n"
    )
    arguments = ["--options", str(options), "--weights", str(weights), "--output", str(output)]
    completed = subprocess.run([sys.executable, "-c", killed, *arguments], capture_output=True, timeout=300)
    assert completed.returncode == -signal.SIGKILL, completed.stderr
    partial = [path for path in tmp_path.iterdir() if path.name.startswith(".out.partial-")]
    assert len(partial) == 1 and list(partial[0].rglob("model.safetensors"))
    assert main(arguments) == 0
    assert_no_leftovers(tmp_path / "never-written")
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_only_dead_partial_folders_of_this_output_are_removed(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = finished.pid
    write_owner(tmp_path / ".out.partial-dead", dead)
    write_owner(tmp_path / ".out.partial-dead-earlier", dead, legacy=True)
    write_owner(tmp_path / ".out.partial-alive", os.getpid())
    write_owner(tmp_path / ".out.partial-elsewhere", dead, host="another-host")
    write_owner(tmp_path / ".other.partial-dead", dead)
    write_owner(tmp_path / "out.partial-dead", dead)
    write_owner(tmp_path / "linked", dead)
    (tmp_path / ".out.partial-link").symlink_to(tmp_path / "linked")
    (tmp_path / ".out.partial-unmarked").mkdir()
    (tmp_path / ".out.partial-garbage").mkdir()
    (tmp_path / ".out.partial-garbage" / FOLDER_RECORD).write_text("{not json")
    kept = sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith(".out.partial-dead"))
    convert_checkpoint(str(options), str(weights), tmp_path / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*kept, "out"])
    assert (tmp_path / "linked" / FOLDER_RECORD).is_file()


def test_a_run_killed_mid_swap_gets_the_old_folder_back(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    old = {path.name: path.read_bytes() for path in output.iterdir()}
    finished = subprocess.Popen(["true"])
    finished.wait()
    write_owner(tmp_path / ".out.partial-killed", finished.pid)
    output.rename(tmp_path / ".out.partial-killed" / "old")  # where a run killed between its two renames left it
    with pytest.raises(ConversionError, match="already exists"):  # put back first, so --overwrite is still needed
        convert_checkpoint(str(options), str(weights), output)
    assert {path.name: path.read_bytes() for path in output.iterdir()} == old
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_when_the_old_folder_cannot_be_put_back_it_is_kept_and_named(random_checkpoint, tmp_path, monkeypatch):
    options, weights = random_checkpoint()
    output = tmp_path / "out"
    convert_checkpoint(str(options), str(weights), output)
    old = {path.name: path.read_bytes() for path in output.iterdir()}
    replace = os.replace

    def replace_never_into_output(source, target):
        if Path(target) == output:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_never_into_output)
    with pytest.raises(ConversionError, match=r"nor the previous one back; the previous one is in (\S+)\.$") as error:
        convert_checkpoint(str(options), str(weights), output, overwrite=True)
    kept = Path(re.search(r"the previous one is in (\S+)\.$", str(error.value))[1])
    assert kept.parent.name.startswith(".out.partial-")
    assert {path.name: path.read_bytes() for path in kept.iterdir()} == old
