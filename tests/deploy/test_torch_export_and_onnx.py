"""torch.export and ONNX export of ElmoModel (the padded path of `padded_recurrence`) and `elmo-export-onnx`.

Every exported program is run on batches of other shapes than the traced one (left and right padding, gaps in the
mask, one-word sentences, batch 1) and compared with the eager model (the packed path), all layers, within 1e-5.
"""

import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.export import Dim
from transformers import AutoModel, AutoTokenizer

from modeling_elmo import ElmoConfig, ElmoModel, ElmoQuantizationConfig
from modeling_elmo import modeling_elmo as modeling
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.deploy import onnx_export
from modeling_elmo.padded_recurrence import padded_bilm_layers

TOLERANCE = 1e-5
TINY = dict(  # as tests/test_modeling_elmo_upstream.py's tester
    char_embedding_dim=4,
    char_filters=[[1, 4], [2, 8]],
    num_highway_layers=1,
    projection_dim=8,
    lstm_cell_size=16,
    num_hidden_layers=2,
)
CONFIGS = {
    "clips-skip": dict(max_characters_per_token=12, cell_clip=0.5, proj_clip=0.3, use_skip_connections=True),
    "no-clips-mixes": dict(
        max_characters_per_token=7,
        cell_clip=None,
        proj_clip=None,
        use_skip_connections=False,
        num_hidden_layers=3,
        num_output_representations=2,
        scalar_mix_layer_norm=True,
    ),
}
# Rows (number of words, padding side or a mask with gaps) of the traced batch and of the batches checked after.
TRACED = [(5, "right"), (3, "right")]
CHECKED = [
    [(7, "right"), (1, "right"), (4, "left"), (6, "gaps")],
    [(1, "right")],
    [(9, "left")],
    [(2, "left"), (2, "right"), (1, "left"), (3, "gaps"), (8, "right")],
]


def make_batch(rows: list[tuple[int, str]], max_characters: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random words: input_ids (batch, width, max_characters), attention_mask (batch, width). "gaps": the row's
    words at every other column (the model takes the masked words in order, wherever they are)."""
    rng = random.Random(seed)
    width = max(2 * length - 1 if side == "gaps" else length for length, side in rows)
    input_ids = torch.zeros(len(rows), width, max_characters, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for row, (length, side) in enumerate(rows):
        columns = {"right": range(length), "left": range(width - length, width), "gaps": range(0, 2 * length, 2)}
        for column in columns[side]:
            word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz.-") for _ in range(rng.randint(1, 14)))
            input_ids[row, column] = torch.tensor(word_to_char_ids(word, max_characters))
            attention_mask[row, column] = 1
    return input_ids, attention_mask


def tiny_model(name: str, seed: int = 0) -> ElmoModel:
    """A random tiny model whose LSTM weights are large enough for the clips to act, biases random too."""
    torch.manual_seed(seed)
    model = ElmoModel(ElmoConfig(**{**TINY, **CONFIGS[name]})).eval()
    with torch.no_grad():
        for layer in model.bilm.layers:
            for weight in (layer.weight_ih, layer.weight_hh, layer.weight_proj):
                weight.mul_(3.0)
            layer.bias.normal_()
        for mix in model.scalar_mixes:
            mix.scalar_parameters.normal_()
    return model


def export(
    model: ElmoModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, strict: bool = False
) -> torch.nn.Module:
    """`torch.export.export` with dynamic batch and words; the program as a module."""
    batch, words = Dim("batch"), Dim("words")
    program = torch.export.export(
        model,
        (),
        {"input_ids": input_ids, "attention_mask": attention_mask, "output_hidden_states": True},
        dynamic_shapes={
            "input_ids": {0: batch, 1: words},
            "attention_mask": {0: batch, 1: words},
            "output_hidden_states": None,
        },
        strict=strict,
    )
    return program.module()


def max_difference(expected: tuple[torch.Tensor, ...], actual: tuple[torch.Tensor, ...]) -> float:
    """Max abs difference over the pairs of equal shapes (0 for empty ones); NaN if any value is NaN."""
    assert len(expected) == len(actual)
    for left, right in zip(expected, actual, strict=True):
        assert left.shape == right.shape
    differences = [(left - right).detach().abs().reshape(-1) for left, right in zip(expected, actual, strict=True)]
    return float(torch.cat([torch.zeros(1), *differences]).max())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_padded_layers_equal_packed_ones(name):
    """The padded recurrence itself (run eagerly, Python loop) against the packed path, on many batches."""
    model = tiny_model(name)
    chars = model.config.max_characters_per_token
    for seed, rows in enumerate(CHECKED):
        input_ids, attention_mask = make_batch(rows, chars, seed)
        with torch.inference_mode():
            expected = model(input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
            actual = padded_bilm_layers(
                model.char_encoder,
                model.bilm,
                model.char_encoder.boundary_char_ids(input_ids.device),
                input_ids,
                attention_mask,
            )
        assert len(actual) == model.config.num_hidden_layers + 1
        assert max_difference(expected, actual) <= TOLERANCE
        assert all(float(layer[attention_mask == 0].abs().sum()) == 0 for layer in actual)


@pytest.mark.parametrize(("name", "strict"), [("clips-skip", False), ("no-clips-mixes", False), ("clips-skip", True)])
def test_exported_program_runs_other_shapes(name, strict):
    """Non-strict export (the default, and the ONNX exporter's) and strict (Dynamo) export."""
    model = tiny_model(name)
    chars = model.config.max_characters_per_token
    exported = export(model, *make_batch(TRACED, chars), strict=strict)
    for seed, rows in enumerate(CHECKED, start=1):
        input_ids, attention_mask = make_batch(rows, chars, seed)
        with torch.inference_mode():
            expected = model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
        actual = exported(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        assert max_difference(expected.hidden_states, actual.hidden_states) <= TOLERANCE
        assert max_difference((expected.last_hidden_state,), (actual.last_hidden_state,)) <= TOLERANCE
        if model.scalar_mixes:
            assert max_difference(expected.elmo_representations, actual.elmo_representations) <= TOLERANCE


def test_exported_fixture_model(converted_fixture):
    model = AutoModel.from_pretrained(converted_fixture).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted_fixture)

    def encode(sentences: list[list[str]], padding_side: str = "right") -> dict[str, torch.Tensor]:
        encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        if padding_side == "left":  # move every row's words to the end
            for row, length in enumerate(encoded["attention_mask"].sum(dim=1).tolist()):
                for key in ("input_ids", "attention_mask"):
                    encoded[key][row] = encoded[key][row].roll(encoded[key].shape[1] - length, dims=0)
        return {key: encoded[key] for key in ("input_ids", "attention_mask")}

    exported = export(model, **encode([["The", "bank", "closed", "."], ["Hello", "world"]]))
    batches = [
        encode([["A"]]),
        encode([["Stocks", "fell", "sharply", "on", "Monday", "in", "Tokyo", "."], ["Yes"], ["He", "left", "."]]),
        encode([["ELMo", "exports", "now"], ["Straße", "und", "Ärger", "!", "?"]], padding_side="left"),
    ]
    for batch in batches:
        with torch.inference_mode():
            expected = model(**batch, output_hidden_states=True).hidden_states
        actual = exported(**batch, output_hidden_states=True).hidden_states
        assert max_difference(expected, actual) <= TOLERANCE


def test_stateful_model_is_refused_for_export():
    model = tiny_model("clips-skip")
    model.config.stateful = True
    with pytest.raises(ValueError, match="stateful"):
        export(model, *make_batch(TRACED, model.config.max_characters_per_token))


def test_eager_calls_keep_the_packed_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the padded path ran outside torch.export")

    monkeypatch.setattr(modeling, "padded_bilm_layers", refuse)
    model = tiny_model("clips-skip")
    model(*make_batch(TRACED, model.config.max_characters_per_token), output_hidden_states=True)


# --- ONNX: elmo-export-onnx ----------------------------------------------------------------------------------------


def onnx_session(path: Path):
    onnxruntime = pytest.importorskip("onnxruntime")
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def require_onnx_extra() -> None:
    for package in ("onnxruntime", "onnxscript", "onnx"):
        pytest.importorskip(package, reason=f"{package} is not installed: pip install -e '.[onnx]'")


def check_onnx_file(path: Path, model: ElmoModel, batches: list[dict[str, torch.Tensor]]) -> None:
    """The file's graph (inputs, output, dynamic axes) and its outputs on `batches` against the eager model."""
    session = onnx_session(path)
    assert [(i.name, i.type, i.shape[:2]) for i in session.get_inputs()] == [
        ("input_ids", "tensor(int64)", ["batch", "words"]),
        ("attention_mask", "tensor(int64)", ["batch", "words"]),
    ]
    assert [o.name for o in session.get_outputs()] == ["hidden_states", "last_hidden_state"]
    for batch in batches:
        hidden_states, last_hidden_state = session.run(None, {key: value.numpy() for key, value in batch.items()})
        with torch.inference_mode():
            expected = model(**batch, output_hidden_states=True)
        actual = tuple(torch.from_numpy(hidden_states).unbind(dim=1))
        assert max_difference(expected.hidden_states, actual) <= TOLERANCE
        assert max_difference((expected.last_hidden_state,), (torch.from_numpy(last_hidden_state),)) <= TOLERANCE


def test_onnx_cli_tiny_model(tmp_path, capsys):
    require_onnx_extra()
    model = tiny_model("clips-skip")
    model.save_pretrained(tmp_path / "tiny")
    output = tmp_path / "out" / "tiny.onnx"
    output.parent.mkdir()
    output.write_bytes(b"an older export")
    assert onnx_export.main([str(tmp_path / "tiny"), str(output), "--overwrite", "--opset", "18"]) == 0
    assert "max abs difference from PyTorch over all layers" in capsys.readouterr().out
    assert [path.name for path in output.parent.iterdir()] == ["tiny.onnx"]  # no temporary file left
    chars = model.config.max_characters_per_token
    batches = []
    for seed, rows in enumerate(CHECKED):
        input_ids, attention_mask = make_batch(rows, chars, seed)
        batches.append({"input_ids": input_ids, "attention_mask": attention_mask})
    check_onnx_file(output, model, batches + edge_batches(chars))


def edge_batches(max_characters: int) -> list[dict[str, torch.Tensor]]:
    """Batches at the edges: one word of one character, words longer than `max_characters` (cut as the tokenizer
    cuts them), a row of padding only beside a full one, a batch of padding only, and no words at all."""

    def encode(rows: list[list[str]]) -> dict[str, torch.Tensor]:
        width = max(map(len, rows))
        input_ids = torch.zeros(len(rows), width, max_characters, dtype=torch.long)
        for row, words in enumerate(rows):
            for column, word in enumerate(words):
                input_ids[row, column] = torch.tensor(word_to_char_ids(word, max_characters))
        return {"input_ids": input_ids, "attention_mask": (input_ids != 0).any(dim=-1).long()}

    padding_row = encode([["a", "b", "c"], ["x"]])
    padding_row["input_ids"][1], padding_row["attention_mask"][1] = 0, 0
    only_padding = encode([["a", "b"]])
    only_padding["input_ids"][:], only_padding["attention_mask"][:] = 0, 0
    no_words = {"input_ids": torch.zeros(2, 0, max_characters, dtype=torch.long)}
    no_words["attention_mask"] = torch.zeros(2, 0, dtype=torch.long)
    return [
        encode([["a"]]),
        encode([["x" * (3 * max_characters), "é" * max_characters], ["a", "ß" * (max_characters - 2)]]),
        padding_row,
        only_padding,
        no_words,
    ]


def test_onnx_cli_fixture_model(converted_fixture, tmp_path):
    require_onnx_extra()
    output = tmp_path / "fixture.onnx"
    assert onnx_export.main([str(converted_fixture), str(output)]) == 0
    model = AutoModel.from_pretrained(converted_fixture).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted_fixture)
    sentences = [[["One"]], [["The", "bank", "closed", "its", "doors", "."], ["Hi"], ["A", "b", "c", "d"]]]
    batches = []
    for batch in sentences:
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        batches.append({key: encoded[key].long() for key in ("input_ids", "attention_mask")})
    check_onnx_file(output, model, batches)


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()  # drop what came before (save_pretrained's progress bars)
    status = onnx_export.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.err


def test_onnx_cli_refusals(tmp_path, capsys):
    model_dir = tmp_path / "tiny"
    tiny_model("clips-skip").save_pretrained(model_dir)
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"keep me")
    cases = [
        ((str(model_dir), str(existing)), "exists; pass --overwrite"),
        ((str(model_dir), str(tmp_path)), "is a folder"),
        ((str(tmp_path / "missing"), str(tmp_path / "new.onnx")), "has no config.json"),
    ]
    for argv, message in cases:
        status, err = run_cli(capsys, *argv)
        assert status == 1
        assert err.startswith("elmo-export-onnx: error: ") and message in err and err.count("\n") == 1
    assert existing.read_bytes() == b"keep me"
    assert not (tmp_path / "new.onnx").exists()


def highest_opset() -> int:
    return pytest.importorskip("onnx").defs.onnx_opset_version()


# (the arguments after MODEL_DIR, given the folder and tmp_path; a change to the folder; what the error says)
BAD_RUNS = {
    "opset-too-low": (lambda model, tmp: [tmp / "new.onnx", "--opset", "13"], None, "--opset must be from 18"),
    "opset-too-high": (
        lambda model, tmp: [tmp / "new.onnx", "--opset", str(highest_opset() + 1)],
        None,
        "(the installed onnx's highest), got",
    ),
    "tolerance-nan": (
        lambda model, tmp: [tmp / "new.onnx", "--tolerance", "nan"],
        None,
        "--tolerance must be a finite number >= 0, got nan",
    ),
    "tolerance-negative": (
        lambda model, tmp: [tmp / "new.onnx", "--tolerance", "-1"],
        None,
        "--tolerance must be a finite number >= 0, got -1",
    ),
    "a-file-in-the-way": (lambda model, tmp: [tmp / "a-file" / "x.onnx"], None, "a-file is not a folder"),
    "the-model's-own-weights": (
        lambda model, tmp: [model / "model.safetensors", "--overwrite"],
        None,
        "model.safetensors is a file of the model folder",
    ),
    "missing-weight": (
        lambda model, tmp: [tmp / "new.onnx"],
        lambda state: state.pop("bilm.layers.1.weight_hh"),
        "lacks the weight 'bilm.layers.1.weight_hh'",
    ),
    "weight-of-another-shape": (
        lambda model, tmp: [tmp / "new.onnx"],
        lambda state: state.__setitem__("bilm.layers.0.bias", torch.zeros(2, 7)),
        "the weight 'bilm.layers.0.bias' has shape (2, 7), but its config.json implies (2, 64)",
    ),
    "nan-weight": (
        lambda model, tmp: [tmp / "new.onnx"],
        lambda state: state["char_encoder.projection.weight"].view(-1).__setitem__(3, float("nan")),
        "the weight 'char_encoder.projection.weight' has non-finite values",
    ),
    "damaged-weights": (lambda model, tmp: [tmp / "new.onnx"], "damage", "cannot load"),
}


@pytest.mark.parametrize("case", BAD_RUNS.values(), ids=BAD_RUNS.keys())
def test_onnx_cli_refuses_bad_arguments_and_folders_before_exporting(tmp_path, capsys, case):
    """Refused before the export (seconds, not a minute), one line, nothing written, the model folder untouched: a
    missing weight would otherwise be exported as random values, a NaN one fail the check a minute later."""
    require_onnx_extra()
    arguments, damage, message = case
    model_dir = tmp_path / "tiny"
    tiny_model("clips-skip").save_pretrained(model_dir)
    if damage == "damage":
        (model_dir / "model.safetensors").write_bytes(b"not safetensors at all")
    elif damage is not None:
        state = load_file(model_dir / "model.safetensors")
        damage(state)
        save_file(state, model_dir / "model.safetensors", {"format": "pt"})
    (tmp_path / "a-file").write_text("in the way")
    before = {path.name: path.read_bytes() for path in model_dir.iterdir()}
    status, err = run_cli(capsys, str(model_dir), *map(str, arguments(model_dir, tmp_path)))
    assert status == 1
    assert err.startswith("elmo-export-onnx: error: ") and message in err and err.count("\n") == 1, err
    assert {path.name: path.read_bytes() for path in model_dir.iterdir()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "tiny"]


def test_onnx_cli_refuses_a_stateful_folder(tmp_path, capsys):
    require_onnx_extra()
    model = tiny_model("clips-skip")
    model.config.stateful = True
    model.save_pretrained(tmp_path / "stateful")
    status, err = run_cli(capsys, str(tmp_path / "stateful"), str(tmp_path / "out.onnx"))
    assert status == 1 and "stateful" in err and err.count("\n") == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["stateful"]


def test_onnx_cli_names_missing_packages(tmp_path, capsys, monkeypatch):
    """Only the missing packages are named (json is always there), with the extra that installs them."""
    monkeypatch.setattr(onnx_export, "ONNX_PACKAGES", ("json", "no_such_package_for_elmo"))
    tiny_model("clips-skip").save_pretrained(tmp_path / "tiny")
    status, err = run_cli(capsys, str(tmp_path / "tiny"), str(tmp_path / "out.onnx"))
    assert status == 1 and err == (
        "elmo-export-onnx: error: no_such_package_for_elmo not installed (install the onnx extra: pip install -e "
        "'.[onnx]' in a checkout, or see docs/install.md).\n"
    )


def test_onnx_cli_failed_check_leaves_nothing(tmp_path, capsys, monkeypatch):
    """A file that fails the onnxruntime check is not moved into place: the old OUT stays, no temporary remains."""
    require_onnx_extra()
    monkeypatch.setattr(onnx_export, "export_to_file", lambda model, path, opset=None: path.write_bytes(b"partial"))
    monkeypatch.setattr(onnx_export, "max_difference", lambda model, path: 0.5)
    tiny_model("clips-skip").save_pretrained(tmp_path / "tiny")
    output = tmp_path / "out" / "model.onnx"
    output.parent.mkdir()
    output.write_bytes(b"previous")
    status, err = run_cli(capsys, str(tmp_path / "tiny"), str(output), "--overwrite")
    assert status == 1 and "differ from PyTorch's by 0.5" in err and "was not written" in err
    assert output.read_bytes() == b"previous"
    assert [path.name for path in output.parent.iterdir()] == ["model.onnx"]


def test_onnx_cli_failure_removes_the_parent_folders_it_created(tmp_path, capsys, monkeypatch):
    require_onnx_extra()

    def exporter_fails(model, path, opset=None):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(onnx_export, "export_to_file", exporter_fails)
    tiny_model("clips-skip").save_pretrained(tmp_path / "tiny")
    (tmp_path / "existing").mkdir()
    status, err = run_cli(capsys, str(tmp_path / "tiny"), str(tmp_path / "existing" / "new" / "deeper" / "m.onnx"))
    assert status == 1 and "export failed: RuntimeError: unsupported operator" in err
    assert list((tmp_path / "existing").iterdir()) == []


def test_onnx_cli_refuses_a_quantized_folder_before_exporting(converted_fixture, tmp_path, capsys):
    """A quantized biLM runs CPU kernels that torch.export cannot trace: refused from config.json in one line that
    names quantization (not the exporter's multi-line report), before loading or exporting, nothing written."""
    AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8")).save_pretrained(
        tmp_path / "int8"
    )
    status, err = run_cli(capsys, str(tmp_path / "int8"), str(tmp_path / "out" / "int8.onnx"))
    assert status == 1 and err.startswith("elmo-export-onnx: error: ") and err.count("\n") == 1, err
    assert f"{tmp_path / 'int8'} holds a quantized biLM ('int8')" in err and "export the float32 folder" in err, err
    assert "\x1b" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["int8"]


def test_onnx_cli_errors_are_one_line_without_colour_codes(tmp_path, capsys, monkeypatch):
    """The exporter's messages carry terminal colour codes and further lines: the error line has neither."""
    require_onnx_extra()

    def exporter_fails(model, path, opset=None):
        raise RuntimeError(
            "Failed to export. \x1b[96mThis is step 1/3\x1b[0m of exporting.\nNext steps: \x1b[1mmore\x1b[0m"
        )

    monkeypatch.setattr(onnx_export, "export_to_file", exporter_fails)
    tiny_model("clips-skip").save_pretrained(tmp_path / "tiny")
    status, err = run_cli(capsys, str(tmp_path / "tiny"), str(tmp_path / "out.onnx"))
    assert status == 1
    assert (
        err
        == "elmo-export-onnx: error: export failed: RuntimeError: Failed to export. This is step 1/3 of exporting.\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tiny"]
