"""`elmo-convert` fed what a careless or hostile user might give it: options JSON with each key missing, null, of the
wrong type or out of range, or no JSON at all; HDF5 files with datasets missing, misshapen, of the wrong dtype,
non-finite, extra, truncated or corrupted; bad paths. Every refused case must end in one line on stderr naming the
file and the key or dataset, exit status 1, and nothing written (no output folder, no temporary folder)."""

import json
import math
import os
import random
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import transformers

from modeling_elmo.conversion.convert_command import main
from modeling_elmo.conversion.testing_utils import OriginalArchitecture, write_random_original_checkpoint

MICRO = OriginalArchitecture(
    dim=8, projection_dim=4, n_layers=1, char_dim=2, filters=[[1, 2], [2, 3]], n_highway=1, max_characters_per_token=10
)
MISSING = object()


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch):
    """Keep Transformers' progress bars off stderr, where the tests read the error line."""
    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Path]:
    return write_random_original_checkpoint(tmp_path_factory.mktemp("pristine"), MICRO)


@pytest.fixture
def checkpoint(pristine, tmp_path) -> tuple[Path, Path]:
    """A fresh copy of the micro checkpoint to damage: (options, weights)."""
    (tmp_path / "in").mkdir()
    return tuple(Path(shutil.copy(path, tmp_path / "in" / path.name)) for path in pristine)


def run(capsys, options: Path | str, weights: Path | str, output: Path | str, *extra: str) -> tuple[int, str]:
    """Run the command line; returns (exit status, stderr)."""
    status = main(["--options", str(options), "--weights", str(weights), "--output", str(output), *extra])
    return status, capsys.readouterr().err


def assert_refused(status: int, err: str, file: Path | str, *names: str) -> None:
    """One line on stderr that names `file` and at least one of `names`, and exit status 1."""
    assert status == 1
    assert err.startswith("elmo-convert: error: ") and err.count("\n") == 1, err
    assert str(file) in err and any(name in err for name in names), err


def assert_nothing_written(output: Path) -> None:
    assert not output.exists()
    assert [path.name for path in output.parent.iterdir() if path.name.startswith(f".{output.name}.")] == []


# --- the options JSON, key by key ----------------------------------------------------------------------------------

KEYS = [
    "lstm",
    "lstm.dim",
    "lstm.projection_dim",
    "lstm.n_layers",
    "lstm.cell_clip",
    "lstm.proj_clip",
    "lstm.use_skip_connections",
    "char_cnn",
    "char_cnn.embedding",
    "char_cnn.embedding.dim",
    "char_cnn.filters",
    "char_cnn.n_highway",
    "char_cnn.n_characters",
    "char_cnn.max_characters_per_token",
    "char_cnn.activation",
]
VALUES = {
    "missing": MISSING,
    "null": None,
    "string": "x",
    "list": [1],
    "object": {},
    "negative": -1,
    "zero": 0,
    "huge": 10**12,
    "nan": math.nan,
    "infinity": math.inf,
    "fraction": 1.5,
    "true": True,
}
FILTERS = {"pair-of-one": [[1]], "zero-width": [[0, 2]], "fraction": [[1, 2.5]], "string": [["1", 2]], "empty": []}
ACCEPTED = {
    *(
        (key, value)
        for key in ("lstm.cell_clip", "lstm.proj_clip")
        for value in ("missing", "null", "huge", "fraction")
    ),
    ("lstm.use_skip_connections", "missing"),
    ("lstm.use_skip_connections", "true"),
}
OPTION_CASES = [(key, name, value) for key in KEYS for name, value in VALUES.items()] + [
    ("char_cnn.filters", f"filters-{name}", value) for name, value in FILTERS.items()
]


def set_option(options: Path, key: str, value: object) -> None:
    data = json.loads(options.read_text())
    *parents, leaf = key.split(".")
    section = data
    for parent in parents:
        section = section[parent]
    if value is MISSING:
        del section[leaf]
    else:
        section[leaf] = value
    options.write_text(json.dumps(data))


@pytest.mark.parametrize(("key", "name", "value"), OPTION_CASES, ids=[f"{k}={n}" for k, n, _ in OPTION_CASES])
def test_each_option_key(checkpoint, tmp_path, capsys, key, name, value):
    options, weights = checkpoint
    set_option(options, key, value)
    output = tmp_path / "out"
    status, err = run(capsys, options, weights, output)
    if (key, name) in ACCEPTED:
        assert status == 0, err
        assert (output / "model.safetensors").is_file()
        return
    if key in err:
        assert_refused(status, err, options, key)
    else:  # a well-formed value that the weights contradict: the dataset that disagrees is named
        assert_refused(status, err, weights, "dataset '")
    assert_nothing_written(output)


# --- the options file as a whole -----------------------------------------------------------------------------------

OPTION_FILES = {
    "not-json": b"{ not json",
    "empty": b"",
    "whitespace": b"  \n",
    "non-utf8": b'{"lstm": "\xff\xfe"}',
    "utf16": json.dumps({"lstm": {}}).encode("utf-16"),
    "top-level-list": b"[]",
    "top-level-string": b'"options"',
    "top-level-null": b"null",
    "top-level-nan": b"NaN",
    "nested-too-deep": b"[" * 100_000,
    "hdf5-instead": b"\x89HDF\r\n\x1a\n" + bytes(64),
}


@pytest.mark.parametrize("content", OPTION_FILES.values(), ids=OPTION_FILES.keys())
def test_options_files_that_are_not_options(checkpoint, tmp_path, capsys, content):
    options, weights = checkpoint
    options.write_bytes(content)
    output = tmp_path / "out"
    assert_refused(*run(capsys, options, weights, output), options, "JSON", "UTF-8", "object", "lstm")
    assert_nothing_written(output)


def test_options_with_a_utf8_byte_order_mark_are_read(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    options.write_bytes(b"\xef\xbb\xbf" + options.read_bytes())
    status, err = run(capsys, options, weights, tmp_path / "out")
    assert status == 0, err


# --- the HDF5 weights, dataset by dataset --------------------------------------------------------------------------

DATASETS = [
    "char_embed",
    "CNN/W_cnn_0",
    "CNN/b_cnn_0",
    "CNN/W_cnn_1",
    "CNN/b_cnn_1",
    *(f"CNN_high_0/{name}" for name in ("W_carry", "b_carry", "W_transform", "b_transform")),
    "CNN_proj/W_proj",
    "CNN_proj/b_proj",
    *(f"RNN_{d}/RNN/MultiRNNCell/Cell0/LSTMCell/{name}" for d in (0, 1) for name in ("W_0", "B", "W_P_0")),
]
GROUP = object()


def with_value(value: float):
    """The dataset with its last entry set to `value`."""

    def change(data: np.ndarray) -> np.ndarray:
        data = data.copy()
        data.reshape(-1)[-1] = value
        return data

    return change


DATASET_CHANGES = {
    "missing": lambda data: None,
    "group": lambda data: GROUP,
    "wrong-shape": lambda data: np.zeros((data.shape[0] + 1, *data.shape[1:]), np.float32),
    "scalar": lambda data: np.float32(1.0),
    "int": lambda data: data.astype(np.int32),
    "bool": lambda data: data > 0,
    "string": lambda data: np.full(data.shape, b"x"),
    "nan": with_value(math.nan),
    "inf": with_value(-math.inf),
    "float64-overflow": lambda data: with_value(1e300)(data.astype(np.float64)),
}
DATASET_CASES = [(dataset, change) for dataset in DATASETS for change in DATASET_CHANGES]


def change_dataset(weights: Path, name: str, change) -> None:
    with h5py.File(weights, "a") as handle:
        replacement = change(handle[name][...])
        del handle[name]
        if replacement is GROUP:
            handle.create_group(name)
        elif replacement is not None:
            handle[name] = replacement


def test_the_dataset_list_is_the_micro_checkpoint(pristine):
    with h5py.File(pristine[1]) as handle:
        names = []
        handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
    assert sorted(names) == sorted(DATASETS)


@pytest.mark.parametrize(("dataset", "change"), DATASET_CASES, ids=[f"{d}:{c}" for d, c in DATASET_CASES])
def test_each_dataset(checkpoint, tmp_path, capsys, dataset, change):
    options, weights = checkpoint
    change_dataset(weights, dataset, DATASET_CHANGES[change])
    output = tmp_path / "out"
    assert_refused(*run(capsys, options, weights, output), weights, f"'{dataset}'")
    assert_nothing_written(output)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_read(checkpoint, tmp_path, capsys, dtype):
    options, weights = checkpoint
    change_dataset(weights, "CNN_high_0/W_carry", lambda data: data.astype(dtype))
    status, err = run(capsys, options, weights, tmp_path / "out")
    assert status == 0, err


EXTRA_DATASETS = {  # datasets the options do not describe: the two disagree
    "extra-layer": ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B", "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B"),
    "extra-highway": ("CNN_high_0/b_carry", "CNN_high_1/b_carry"),
    "extra-filter": ("CNN/b_cnn_1", "CNN/b_cnn_2"),
    "extra-direction": ("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B", "RNN_2/RNN/MultiRNNCell/Cell0/LSTMCell/B"),
    "extra-char-table": ("char_embed", "char_embed_2"),
}


@pytest.mark.parametrize("source_target", EXTRA_DATASETS.values(), ids=EXTRA_DATASETS.keys())
def test_extra_datasets_of_the_model_are_refused(checkpoint, tmp_path, capsys, source_target):
    options, weights = checkpoint
    source, target = source_target
    with h5py.File(weights, "a") as handle:
        handle[target] = handle[source][...]
    output = tmp_path / "out"
    assert_refused(*run(capsys, options, weights, output), weights, f"'{target}'")
    assert_nothing_written(output)


def test_unrelated_datasets_are_ignored(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    with h5py.File(weights, "a") as handle:
        handle["training/notes"] = np.arange(3)
        handle.attrs["comment"] = "dumped by bilm-tf"
    status, err = run(capsys, options, weights, tmp_path / "out")
    assert status == 0, err


# --- the HDF5 file as a whole --------------------------------------------------------------------------------------

TRUNCATIONS = [0, 1, 7, 8, 100, 512, 2048, 0.33, 0.5, 0.9, -1]


@pytest.mark.parametrize("cut", TRUNCATIONS)
def test_truncated_weights(checkpoint, tmp_path, capsys, cut):
    options, weights = checkpoint
    data = weights.read_bytes()
    weights.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    output = tmp_path / "out"
    assert_refused(*run(capsys, options, weights, output), weights, "HDF5")
    assert_nothing_written(output)


@pytest.mark.parametrize("seed", range(20))
def test_corrupted_weights_convert_or_are_refused_cleanly(checkpoint, tmp_path, capsys, seed):
    """Flipped bytes: HDF5 has no checksums, so damage to the numbers themselves cannot be seen; everything else must
    be a clean error."""
    options, weights = checkpoint
    data = bytearray(weights.read_bytes())
    rng = random.Random(seed)
    for _ in range(8):
        data[rng.randrange(len(data))] = rng.randrange(256)
    weights.write_bytes(bytes(data))
    output = tmp_path / "out"
    status, err = run(capsys, options, weights, output)
    if status == 0:
        assert (output / "model.safetensors").is_file()
    else:
        assert_refused(status, err, weights, "HDF5", "dataset '")
        assert_nothing_written(output)


NOT_HDF5 = {
    "text": b"this is not HDF5",
    "json": b'{"lstm": {}}',
    "safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    "hdf5-signature-only": b"\x89HDF\r\n\x1a\n",
}


@pytest.mark.parametrize("content", NOT_HDF5.values(), ids=NOT_HDF5.keys())
def test_weights_that_are_not_hdf5(checkpoint, tmp_path, capsys, content):
    options, weights = checkpoint
    weights.write_bytes(content)
    output = tmp_path / "out"
    assert_refused(*run(capsys, options, weights, output), weights, "HDF5")
    assert_nothing_written(output)


# --- paths ---------------------------------------------------------------------------------------------------------


def special_file(tmp_path: Path, kind: str) -> Path:
    """A path that is not a regular file: a directory, nothing, a FIFO, a device."""
    path = tmp_path / f"special-{kind}"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path(os.devnull)
    return path


SPECIAL = ["directory", "nonexistent", "fifo", "device"]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("which", ["options", "weights"])
def test_inputs_that_are_not_regular_files(checkpoint, tmp_path, capsys, which, kind):
    options, weights = checkpoint
    bad = special_file(tmp_path, kind)
    paths = {"options": options, "weights": weights, which: bad}
    output = tmp_path / "out"
    status, err = run(capsys, paths["options"], paths["weights"], output)
    assert_refused(status, err, bad, "not found", "not a file", "JSON", "HDF5")
    assert_nothing_written(output)


def test_output_that_is_a_file(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    for overwrite in ((), ("--overwrite",)):
        assert_refused(*run(capsys, options, weights, weights, *overwrite), weights, "not a directory", "exists")
        assert h5py.is_hdf5(weights)


def test_output_inside_an_input_file(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    assert_refused(*run(capsys, options, weights, weights / "out"), weights, "Not a directory", "not a directory")
    assert h5py.is_hdf5(weights)


def test_output_that_is_the_input_folder(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    assert_refused(*run(capsys, options, weights, options.parent, "--overwrite"), options.parent, "contains the input")
    assert options.is_file() and weights.is_file()


@pytest.mark.parametrize("target", ["directory", "dangling"])
def test_output_that_is_a_symbolic_link(checkpoint, tmp_path, capsys, target):
    options, weights = checkpoint
    output = tmp_path / "link"
    output.symlink_to(tmp_path / "empty" if target == "directory" else tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    assert_refused(*run(capsys, options, weights, output, "--overwrite"), output, "symbolic link")
    assert output.is_symlink() and list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("output", ["/", "", "."], ids=["root", "empty", "dot"])
def test_output_that_is_the_root_or_the_current_directory(checkpoint, tmp_path, monkeypatch, capsys, output):
    options, weights = checkpoint
    monkeypatch.chdir(tmp_path)
    status, err = run(capsys, options, weights, output, "--overwrite")
    assert_refused(status, err, output, "current directory")


def test_output_with_missing_parents_is_created(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    status, err = run(capsys, options, weights, tmp_path / "a" / "b" / "out/")
    assert status == 0, err
    assert (tmp_path / "a" / "b" / "out" / "model.safetensors").is_file()


def test_cache_dir_that_is_a_file(checkpoint, tmp_path, capsys):
    options, weights = checkpoint
    url = "http://127.0.0.1:9/options.json"
    output = tmp_path / "out"
    assert_refused(*run(capsys, url, weights, output, "--cache-dir", str(weights)), weights, "cache")
    assert_nothing_written(output)
