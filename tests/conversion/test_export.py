"""elmo-export: the original format written back from saved folders, bit for bit, and refusals that write nothing."""

import errno
import json
import os
import shutil
import stat
from importlib.metadata import entry_points
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModel

from modeling_elmo import ElmoConfig, ElmoForTokenClassification, ElmoModel, ElmoQuantizationConfig
from modeling_elmo.commands.elmo import SUBCOMMANDS, load
from modeling_elmo.conversion import export
from modeling_elmo.conversion.convert import CONVERTED_FOLDER, ConversionError, convert_checkpoint
from modeling_elmo.conversion.export import EXPORTED_FOLDER, ExportError, export_model, main
from modeling_elmo.conversion.testing_utils import ARCHITECTURES as PRESET_ARCHITECTURES
from modeling_elmo.formats.original_checkpoint import load_original_checkpoint, read_options
from modeling_elmo.foundation.folder_record import FOLDER_RECORD
from modeling_elmo.foundation.output_folder import prepare_output

FORGET_GATE = 2  # TensorFlow's gate order (i, j, f, o)


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch):
    """Keep Transformers' progress bars off stderr, where the tests read the error line."""
    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)


def datasets(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype, bytes]]:
    """Every dataset of an HDF5 file: name -> (shape, dtype, raw bytes)."""
    found = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, item: (
                found.__setitem__(name, (item.shape, item.dtype, item[...].tobytes()))
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    return found


def dataset_names(path: Path) -> list[str]:
    names = []
    with h5py.File(path, "r") as handle:
        handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
    return sorted(names)


def assert_same_datasets(original: Path, exported: Path) -> None:
    """The same dataset names (nothing missing, nothing extra), shapes, dtypes and bytes, one dataset at a time."""
    assert dataset_names(exported) == dataset_names(original)
    with h5py.File(original, "r") as expected, h5py.File(exported, "r") as found:
        for name in dataset_names(original):
            assert (found[name].shape, found[name].dtype) == (expected[name].shape, expected[name].dtype), name
            assert found[name][...].tobytes() == expected[name][...].tobytes(), f"{name} differs"


def options_fields(config: ElmoConfig) -> dict:
    return {key: value for key, value in config.to_dict().items() if key != "transformers_version"}


def assert_nothing_written(output: Path) -> None:
    assert not output.exists()
    assert [path.name for path in output.parent.iterdir() if path.name.startswith(f".{output.name}")] == []


def cli_error(capsys) -> str:
    """The one line `elmo-export` printed on stderr for a refused run."""
    err = capsys.readouterr().err
    assert err.startswith("elmo-export: error: ") and err.count("\n") == 1, err
    return err


def save_weights_and_config(folder: Path, config: ElmoConfig, state: dict[str, torch.Tensor]) -> Path:
    """A folder as save_pretrained writes it, built by hand: `config.json` and `model.safetensors`."""
    config.save_pretrained(folder)
    save_file(
        {name: tensor.contiguous() for name, tensor in state.items()}, folder / "model.safetensors", {"format": "pt"}
    )
    return folder


def edit_weights(folder: Path, edit) -> None:
    state = load_file(folder / "model.safetensors")
    edit(state)
    save_file(state, folder / "model.safetensors", {"format": "pt"})


# Round trip: original -> elmo-convert -> elmo-export gives back every dataset, bit for bit.


def test_the_fixture_round_trips_bit_for_bit(fixture_dir, converted_fixture, tmp_path):
    written = export_model(converted_fixture, tmp_path / "out")
    assert_same_datasets(fixture_dir / "lm_weights.hdf5", tmp_path / "out" / "lm_weights.hdf5")
    exported = json.loads((tmp_path / "out" / "options.json").read_text())
    assert exported == json.loads((fixture_dir / "options.json").read_text())  # the same JSON object, key for key
    listing = [FOLDER_RECORD, "lm_weights.hdf5", "options.json"]  # issue 46: and the record of what was written
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == listing
    assert written["lm_weights.hdf5"] == dataset_names(fixture_dir / "lm_weights.hdf5")


VARIANTS = {
    "no-highway-no-skip": dict(n_highway=0, n_layers=1, use_skip_connections=False),
    "three-highway-four-layers": dict(n_highway=3, n_layers=4, dim=24, projection_dim=8),
    "other-filters-tanh": dict(filters=[[2, 5], [4, 7], [7, 3]], activation="tanh", char_dim=6, n_highway=1),
    "projection-equals-dim": dict(dim=16, projection_dim=16, n_layers=3),
    "no-clips": dict(cell_clip=None, proj_clip=None),
    "short-words": dict(max_characters_per_token=20, filters=[[1, 4], [3, 6]]),
    "no-projection": dict(filters=[[1, 6], [2, 10]], projection_dim=16, write_projection=False),
    "no-projection-no-highway": dict(
        filters=[[1, 6], [2, 10]], projection_dim=16, n_highway=0, write_projection=False
    ),
}
VARIANTS.update({f"preset-{name}": vars(arch) for name, arch in PRESET_ARCHITECTURES.items()})


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_any_architecture_round_trips_bit_for_bit(random_checkpoint, tmp_path, variant):
    architecture = dict(variant)
    write_projection = architecture.pop("write_projection", True)
    options, weights = random_checkpoint(seed=len(str(variant)), write_projection=write_projection, **architecture)
    convert_checkpoint(str(options), str(weights), tmp_path / "converted")
    assert main([str(tmp_path / "converted"), "--output", str(tmp_path / "out")]) == 0
    assert_same_datasets(weights, tmp_path / "out" / "lm_weights.hdf5")
    assert ("CNN_proj/W_proj" in dataset_names(tmp_path / "out" / "lm_weights.hdf5")) == write_projection
    assert options_fields(read_options(tmp_path / "out" / "options.json")) == options_fields(read_options(options))


def test_negative_zeros_and_extreme_values_round_trip(random_checkpoint, tmp_path):
    """Bit for bit means the sign of zero and subnormals too, in the biases of the forget gate above all."""
    options, weights = random_checkpoint(seed=11)
    with h5py.File(weights, "r+") as handle:
        for name in ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B", "CNN_high_1/W_carry", "char_embed"):
            values = handle[name][...]
            values.reshape(-1)[::3] = -0.0
            values.reshape(-1)[1::7] = np.float32(-1e-45)  # the smallest subnormal
            values.reshape(-1)[2::11] = np.finfo(np.float32).max
            handle[name][...] = values
    convert_checkpoint(str(options), str(weights), tmp_path / "converted")
    export_model(tmp_path / "converted", tmp_path / "out")
    assert_same_datasets(weights, tmp_path / "out" / "lm_weights.hdf5")


def test_a_projection_other_than_the_identity_is_refused_when_bilm_tf_has_none(random_checkpoint, tmp_path, capsys):
    """Filters totalling projection_dim: bilm-tf builds no projection, so only the identity can be exported."""
    options, weights = random_checkpoint(filters=[[1, 6], [2, 10]], projection_dim=16, write_projection=True)
    convert_checkpoint(str(options), str(weights), tmp_path / "converted")
    assert main([str(tmp_path / "converted"), "--output", str(tmp_path / "out")]) == 1
    err = cli_error(capsys)
    assert "char_encoder.projection" in err and "identity" in err
    assert_nothing_written(tmp_path / "out")


# Folders other than a converted ElmoModel.


def softmax_folder(random_checkpoint, folder: Path, vocab_size: int = 7, **config_fields) -> tuple[Path, dict]:
    """A saved ElmoForPreTraining, built by hand: the biLM under `elmo.` and `softmax.weight`/`softmax.bias`."""
    options, weights = random_checkpoint(seed=3)
    config, state = load_original_checkpoint(options, weights)
    for field, value in {"lm_vocab_size": vocab_size, **config_fields}.items():
        setattr(config, field, value)
    generator = torch.Generator().manual_seed(0)
    softmax = {
        "softmax.weight": torch.randn(vocab_size, config.projection_dim, generator=generator),
        "softmax.bias": torch.randn(vocab_size, generator=generator),
    }
    save_weights_and_config(folder, config, {**{f"elmo.{name}": tensor for name, tensor in state.items()}, **softmax})
    words = ["<S>", "</S>", "<UNK>", "the", "naïve", "café", "."][:vocab_size] + [f"w{i}" for i in range(vocab_size)]
    (folder / "vocab.txt").write_text("\n".join(words[:vocab_size]) + "\n", encoding="utf-8")
    return weights, softmax


def shard(folder: Path) -> None:
    """Split `model.safetensors` into two shards with an index, as save_pretrained does for large models."""
    state = load_file(folder / "model.safetensors")
    names = sorted(state)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in halves.items():
        save_file({name: state[name] for name in part}, folder / file, {"format": "pt"})
    weight_map = {name: file for file, part in halves.items() for name in part}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "model.safetensors").unlink()


def move_in_index(folder: Path, name: str, file: str) -> None:
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"][name] = file
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def test_a_weight_in_two_shards_is_read_from_the_one_the_index_names(random_checkpoint, tmp_path):
    """As `from_pretrained` reads it; before, the first shard holding the name won: the export was another model."""
    softmax_folder(random_checkpoint, tmp_path / "pretrained")
    shard(tmp_path / "pretrained")
    name, first, second = (
        "elmo.bilm.layers.0.bias",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    )
    stale = load_file(tmp_path / "pretrained" / second)
    holder = load_file(tmp_path / "pretrained" / first)
    assert name not in stale and name in holder
    save_file({**stale, name: holder[name] + 1.0}, tmp_path / "pretrained" / second, {"format": "pt"})
    move_in_index(tmp_path / "pretrained", name, second)
    export_model(tmp_path / "pretrained", tmp_path / "out")
    _, state = load_original_checkpoint(tmp_path / "out" / "options.json", tmp_path / "out" / "lm_weights.hdf5")
    loaded = ElmoModel.from_pretrained(tmp_path / "pretrained")
    assert torch.equal(loaded.bilm.layers[0].bias, holder[name] + 1.0)  # what from_pretrained reads
    assert torch.equal(state["bilm.layers.0.bias"], loaded.bilm.layers[0].bias)


@pytest.mark.parametrize("layout", ["single-file", "sharded"])
def test_a_folder_with_a_softmax_exports_it_with_its_vocabulary(random_checkpoint, tmp_path, capsys, layout):
    original, softmax = softmax_folder(random_checkpoint, tmp_path / "pretrained", lm_num_negative_samples=5)
    if layout == "sharded":
        shard(tmp_path / "pretrained")
    assert main([str(tmp_path / "pretrained"), "--output", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert "softmax.hdf5 (2 datasets)" in capsys.readouterr().out
    assert sorted(path.name for path in out.iterdir()) == [
        FOLDER_RECORD,  # issue 46: the record of what was written
        "lm_weights.hdf5",
        "options.json",
        "softmax.hdf5",
        "vocab.txt",
    ]
    assert_same_datasets(original, out / "lm_weights.hdf5")
    found = datasets(out / "softmax.hdf5")
    assert sorted(found) == ["W", "b"]
    for name, key in (("W", "softmax.weight"), ("b", "softmax.bias")):
        assert found[name][:2] == (tuple(softmax[key].shape), np.dtype("float32"))
        assert found[name][2] == softmax[key].numpy().tobytes()
    assert (out / "vocab.txt").read_bytes() == (tmp_path / "pretrained" / "vocab.txt").read_bytes()
    options = json.loads((out / "options.json").read_text())
    assert (options["n_tokens_vocab"], options["n_negative_samples_batch"], options["dropout"]) == (7, 5, 0.1)
    assert options["bidirectional"] is True and "sample_softmax" not in options


def test_a_full_softmax_model_says_so_in_the_options(random_checkpoint, tmp_path):
    softmax_folder(random_checkpoint, tmp_path / "pretrained", lm_num_negative_samples=None, lm_dropout=0.25)
    export_model(tmp_path / "pretrained", tmp_path / "out")
    options = json.loads((tmp_path / "out" / "options.json").read_text())
    assert options["sample_softmax"] is False and "n_negative_samples_batch" not in options
    assert options["dropout"] == 0.25


def test_a_model_without_a_softmax_writes_the_bilm_and_says_so(converted_fixture, tmp_path, capsys):
    assert main([str(converted_fixture), "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"{converted_fixture} has no LM softmax, so no softmax.hdf5 or vocab.txt was written." in out
    assert f"Wrote {tmp_path / 'out'}: options.json, lm_weights.hdf5 (33 datasets)" in out


def test_a_fine_tuned_tagger_exports_its_biLM(converted_fixture, tmp_path):
    model = ElmoForTokenClassification.from_pretrained(converted_fixture, num_labels=3, freeze_elmo=False)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # stands in for fine-tuning: every biLM weight moves
        for parameter in model.elmo.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(tmp_path / "tagger")
    export_model(tmp_path / "tagger", tmp_path / "out")
    _, state = load_original_checkpoint(tmp_path / "out" / "options.json", tmp_path / "out" / "lm_weights.hdf5")
    expected = model.elmo.state_dict()
    expected["char_encoder.char_embeddings.weight"][0] = 0.0  # the padding row, which the original format lacks
    assert sorted(state) == sorted(expected)
    for name, tensor in state.items():
        assert torch.equal(tensor, expected[name]), name


def test_a_legacy_folder_with_the_forget_bias_folded_in_exports_tensorflows_bias(random_checkpoint, tmp_path):
    """Folders saved before `lstm_forget_bias` existed hold B + 1 on the forget gate and no such config field."""
    options, weights = random_checkpoint(seed=5)
    folder = tmp_path / "legacy"
    convert_checkpoint(str(options), str(weights), folder)
    config = json.loads((folder / "config.json").read_text())
    del config["lstm_forget_bias"]
    (folder / "config.json").write_text(json.dumps(config))

    def fold_forget_bias(state):
        for name in [name for name in state if name.endswith(".bias") and ".layers." in name]:
            state[name].unflatten(-1, (4, -1))[:, FORGET_GATE] += 1.0

    edit_weights(folder, fold_forget_bias)
    export_model(folder, tmp_path / "out")
    expected, found = datasets(weights), datasets(tmp_path / "out" / "lm_weights.hdf5")
    assert sorted(found) == sorted(expected)
    for name, (shape, dtype, data) in expected.items():
        assert found[name][:2] == (shape, dtype), name
        if name.endswith("/B"):  # B + 1 - 1: within float32 rounding of 1.0
            difference = np.frombuffer(found[name][2], np.float32) - np.frombuffer(data, np.float32)
            assert np.abs(difference).max() <= 2**-23, name
        else:
            assert found[name][2] == data, name


def test_another_forget_bias_is_moved_into_B(random_checkpoint, tmp_path):
    """With `lstm_forget_bias=0.25` the gates see bias + 0.25; TensorFlow adds 1.0, so B = bias - 0.75."""
    options, weights = random_checkpoint(seed=6)
    config, state = load_original_checkpoint(options, weights)
    config.lstm_forget_bias = 0.25
    folder = save_weights_and_config(tmp_path / "model", config, state)
    export_model(folder, tmp_path / "out")
    with h5py.File(weights, "r") as original, h5py.File(tmp_path / "out" / "lm_weights.hdf5", "r") as exported:
        name = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"
        expected = original[name][...].reshape(4, -1).astype(np.float64)
        expected[FORGET_GATE] -= 0.75
        np.testing.assert_array_equal(exported[name][...].reshape(4, -1), expected.astype(np.float32))


def test_an_old_folder_with_the_carry_name_of_the_highway_gate_exports(random_checkpoint, tmp_path):
    options, weights = random_checkpoint(seed=7)
    convert_checkpoint(str(options), str(weights), tmp_path / "old")

    def rename(state):
        for name in [name for name in state if ".transform_gate." in name]:
            state[name.replace(".transform_gate.", ".carry.")] = state.pop(name)

    edit_weights(tmp_path / "old", rename)
    export_model(tmp_path / "old", tmp_path / "out")
    assert_same_datasets(weights, tmp_path / "out" / "lm_weights.hdf5")


# Output safety: the guarantees of elmo-convert.


def test_an_existing_output_is_refused_unless_overwrite(converted_fixture, tmp_path, capsys):
    output = tmp_path / "out"
    export_model(converted_fixture, output)
    (output / "options.json").write_text((output / "options.json").read_text() + " ")  # still an export
    before = {path.name: path.read_bytes() for path in output.iterdir()}
    assert main([str(converted_fixture), "--output", str(output)]) == 1
    assert "already exists; pass --overwrite" in cli_error(capsys)
    assert {path.name: path.read_bytes() for path in output.iterdir()} == before
    assert main([str(converted_fixture), "--output", str(output), "--overwrite"]) == 0
    assert (output / "options.json").read_bytes() != before["options.json"]
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []


def test_overwrite_replaces_an_empty_folder(converted_fixture, tmp_path):
    (tmp_path / "out").mkdir()
    export_model(converted_fixture, tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / "lm_weights.hdf5").is_file()


@pytest.mark.parametrize("kind", ["other-files", "converted-model", "not-an-export"])
def test_overwrite_refuses_a_folder_that_is_not_an_export(converted_fixture, tmp_path, capsys, kind):
    output = tmp_path / "out"
    if kind == "converted-model":
        shutil.copytree(converted_fixture, output)
    else:
        export_model(converted_fixture, output)
        if kind == "other-files":
            (output / "notes.txt").write_text("user data")
        else:
            (output / "options.json").write_text('{"something": "else"}')
    before = {path.name: path.read_bytes() for path in output.iterdir()}
    assert main([str(converted_fixture), "--output", str(output), "--overwrite"]) == 1
    err = cli_error(capsys)
    assert "--overwrite replaces only a folder elmo-export wrote" in err and str(output) in err
    assert {path.name: path.read_bytes() for path in output.iterdir()} == before


def test_the_model_folder_itself_is_never_the_output(converted_fixture, tmp_path, capsys):
    assert main([str(converted_fixture), "--output", str(converted_fixture.parent), "--overwrite"]) == 1
    assert f"contains the input {converted_fixture}" in cli_error(capsys)
    assert (converted_fixture / "model.safetensors").is_file()


def test_a_write_failure_keeps_the_old_folder(random_checkpoint, tmp_path, monkeypatch, capsys):
    softmax_folder(random_checkpoint, tmp_path / "pretrained")
    output = tmp_path / "out"
    export_model(tmp_path / "pretrained", output)
    before = {path.name: path.read_bytes() for path in output.iterdir()}
    write = export.write_weights_hdf5

    def disk_full_on_the_softmax(path, arrays):
        if path.name == "softmax.hdf5":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        write(path, arrays)

    monkeypatch.setattr(export, "write_weights_hdf5", disk_full_on_the_softmax)
    assert main([str(tmp_path / "pretrained"), "--output", str(output), "--overwrite"]) == 1
    err = cli_error(capsys)
    assert "No space left on device" in err and "the existing folder is unchanged" in err
    assert {path.name: path.read_bytes() for path in output.iterdir()} == before
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []


def test_a_write_failure_removes_the_parent_folders_it_created(random_checkpoint, tmp_path, monkeypatch, capsys):
    softmax_folder(random_checkpoint, tmp_path / "pretrained")
    (tmp_path / "existing").mkdir()

    def disk_full(path, arrays):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(export, "write_weights_hdf5", disk_full)
    output = tmp_path / "existing" / "new" / "deeper" / "out"
    assert main([str(tmp_path / "pretrained"), "--output", str(output)]) == 1
    assert "No space left on device" in cli_error(capsys)
    assert list((tmp_path / "existing").iterdir()) == []


def test_prepare_output_checks_the_kind_of_folder_it_may_replace(converted_fixture, tmp_path):
    exported = tmp_path / "exported"
    export_model(converted_fixture, exported)
    with pytest.raises(ConversionError, match="--overwrite replaces only a folder elmo-convert wrote"):
        prepare_output(exported, True, (str(converted_fixture),), CONVERTED_FOLDER)
    prepare_output(exported, True, (str(converted_fixture),), EXPORTED_FOLDER)
    with pytest.raises(ConversionError, match="--overwrite replaces only a folder elmo-export wrote"):
        prepare_output(converted_fixture, True, (), EXPORTED_FOLDER)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_get_the_permissions_of_the_umask(random_checkpoint, tmp_path, umask):
    softmax_folder(random_checkpoint, tmp_path / "pretrained")
    previous = os.umask(umask)
    try:
        export_model(tmp_path / "pretrained", tmp_path / "out")
    finally:
        os.umask(previous)
    assert oct(stat.S_IMODE((tmp_path / "out").stat().st_mode)) == oct(0o777 & ~umask)
    modes = {path.name: oct(stat.S_IMODE(path.stat().st_mode)) for path in (tmp_path / "out").iterdir()}
    assert modes == dict.fromkeys(modes, oct(0o666 & ~umask)) and len(modes) == 5  # issue 46: and the record


# Bad input: one line naming the problem, nothing written.


def drop(*names: str):
    return lambda folder: edit_weights(folder, lambda state: [state.pop(name) for name in names])


def poison(name: str):
    def edit(state):
        state[name].view(-1)[3] = float("nan")

    return lambda folder: edit_weights(folder, edit)


def reshape(name: str, shape: tuple[int, ...]):
    return lambda folder: edit_weights(folder, lambda state: state.__setitem__(name, torch.zeros(shape)))


def edit_config(**fields):
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **fields}))

    return edit


def write(file: str, text: str | None):
    return lambda folder: (folder / file).write_text(text) if text is not None else (folder / file).unlink()


CHAR_ENCODER = [f"elmo.char_encoder.{name}" for name in ("char_embeddings.weight", "projection.weight")]
BAD_FOLDERS = {
    "missing-lstm-weight": (
        drop("elmo.bilm.layers.1.weight_hh"),
        "the weight 'elmo.bilm.layers.1.weight_hh' is missing",
    ),
    "missing-body": (drop(*CHAR_ENCODER), "the weight 'char_encoder.char_embeddings.weight' is missing"),
    "missing-projection": (drop(CHAR_ENCODER[1]), f"the weight '{CHAR_ENCODER[1]}' is missing"),
    "missing-softmax-bias": (drop("softmax.bias"), "the weight 'softmax.bias' is missing"),
    "nan-weight": (
        poison("elmo.char_encoder.highways.0.transform.weight"),
        "the weight 'elmo.char_encoder.highways.0.transform.weight' has 1 non-finite value(s)",
    ),
    "nan-softmax": (poison("softmax.weight"), "the weight 'softmax.weight' has 1 non-finite value(s)"),
    "wrong-shape": (
        reshape("elmo.bilm.layers.0.bias", (2, 8)),
        "'elmo.bilm.layers.0.bias' has shape (2, 8), but its config.json implies (2, 256)",
    ),
    "vocabulary-too-short": (write("vocab.txt", "<S>\n</S>\n<UNK>\na\nb\nc\n"), "has 6 tokens, but the softmax has 7"),
    # bilm-tf cannot read these vocabularies: it needs <S>, </S> and <UNK>, and skips its end marker !!!MAXTERMID
    "vocabulary-without-markers": (write("vocab.txt", "a\nb\nc\nd\ne\nf\ng\n"), "has no <S>, </S>, <UNK>"),
    "vocabulary-with-a-duplicate": (
        write("vocab.txt", "<S>\n</S>\n<UNK>\na\nb\nc\na\n"),
        "'a' is on line 4 and again on line 7",
    ),
    "vocabulary-with-the-end-marker": (
        write("vocab.txt", "<S>\n</S>\n<UNK>\na\nb\nc\n!!!MAXTERMID\n"),
        "has 6 tokens, but the softmax has 7",
    ),
    # the config describes a smaller model than the weights hold: exporting would drop weights
    "more-layers-than-the-config": (
        edit_config(num_hidden_layers=1),
        "the weight 'elmo.bilm.layers.1.bias' (and 3 more) is not part of the model its config.json describes",
    ),
    "more-highways-than-the-config": (
        edit_config(num_highway_layers=1),
        "the weight 'elmo.char_encoder.highways.1.transform.bias' (and 3 more) is not part of the model",
    ),
    "vocabulary-missing": (write("vocab.txt", None), "vocab.txt (its vocabulary) is missing"),
    "no-weights": (write("model.safetensors", None), "no model.safetensors (nor model.safetensors.index.json)"),
    "damaged-weights": (write("model.safetensors", "not safetensors"), "not a readable safetensors file"),
    "missing-shard": (
        lambda folder: [shard(folder), (folder / "model-00002-of-00002.safetensors").unlink()],
        "the shard model-00002-of-00002.safetensors is missing",
    ),
    "index-names-the-wrong-shard": (
        lambda folder: [shard(folder), move_in_index(folder, "softmax.bias", "model-00001-of-00002.safetensors")],
        "the weight 'softmax.bias' is listed in model-00001-of-00002.safetensors, which does not hold it",
    ),
    "not-elmo": (write("config.json", '{"model_type": "bert"}'), "model_type must be 'elmo', got 'bert'"),
    "bad-config": (write("config.json", '{"model_type": "elmo", "projection_dim": 0}'), "projection_dim must be"),
}


@pytest.mark.parametrize("case", BAD_FOLDERS.values(), ids=BAD_FOLDERS.keys())
def test_bad_folders_are_refused_naming_the_problem_and_nothing_is_written(random_checkpoint, tmp_path, capsys, case):
    damage, message = case
    folder = tmp_path / "pretrained"
    softmax_folder(random_checkpoint, folder)
    damage(folder)
    assert main([str(folder), "--output", str(tmp_path / "out")]) == 1
    err = cli_error(capsys)
    assert message in err and str(folder) in err
    assert_nothing_written(tmp_path / "out")


def test_a_missing_model_folder_is_refused(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere"), "--output", str(tmp_path / "out")]) == 1
    assert "nowhere: not a folder" in cli_error(capsys)
    assert_nothing_written(tmp_path / "out")


def test_a_quantized_folder_is_refused_in_one_line_naming_quantization(converted_fixture, tmp_path, capsys):
    """A folder saved from a quantized model holds int8 weights (and scales), which bilm-tf's float32 format cannot:
    refused from its config.json before any weight is read, not as a damaged save, and nothing written."""
    folder = tmp_path / "int8"
    quantized = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
    quantized.save_pretrained(folder)
    capsys.readouterr()
    assert main([str(folder), "--output", str(tmp_path / "out")]) == 1
    err = cli_error(capsys)
    assert f"{folder} holds a quantized biLM ('int8')" in err and "export the float32 folder" in err, err
    assert "shape" not in err and "\x1b" not in err
    assert_nothing_written(tmp_path / "out")


def test_a_softmax_without_lm_vocab_size_is_refused(random_checkpoint, tmp_path):
    folder = tmp_path / "pretrained"
    softmax_folder(random_checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    config["lm_vocab_size"] = None
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ExportError, match="no lm_vocab_size"):
        export_model(folder, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_the_console_script_is_installed():
    (script,) = entry_points(group="console_scripts", name="elmo-export")
    assert script.value == "modeling_elmo.commands.elmo:export"
    assert load(SUBCOMMANDS["export"].run) is main


def test_the_exported_model_computes_what_the_saved_one_does(converted_fixture, tmp_path):
    """The whole chain once more, by outputs: the exported files, read back, give the saved model's layers."""
    export_model(converted_fixture, tmp_path / "out")
    config, state = load_original_checkpoint(tmp_path / "out" / "options.json", tmp_path / "out" / "lm_weights.hdf5")
    reloaded = ElmoModel(config).eval()
    reloaded.load_state_dict(state)
    saved = ElmoModel.from_pretrained(converted_fixture).eval()
    input_ids = torch.randint(1, 262, (2, 5, 50), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = saved(input_ids=input_ids, output_hidden_states=True).hidden_states
        found = reloaded(input_ids=input_ids, output_hidden_states=True).hidden_states
    for layer_expected, layer_found in zip(expected, found, strict=True):
        assert torch.equal(layer_expected, layer_found)
