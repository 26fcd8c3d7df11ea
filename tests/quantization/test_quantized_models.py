"""Quantized ELMo the Transformers way (`ElmoQuantizationConfig`, docs/speed.md "Quantization"): loading, the stated
tolerances on the fixture, the save/load round trip, the gradient rule and the heads."""

import json
import os
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from modeling_elmo import ElmoModel, ElmoQuantizationConfig
from modeling_elmo.quantization.quantized_layer import ElmoQuantizedLstmLayer

METHODS = ["int8", "int8_weight_only", "bf16"]
# docs/speed.md, "Quantization": max and mean abs difference from float32 of each biLM layer on the fixture
TOLERANCES = {"int8": (0.1, 0.01), "int8_weight_only": (0.04, 0.005), "bf16": (0.04, 0.005)}
STORAGE = {"int8": torch.int8, "int8_weight_only": torch.int8, "bf16": torch.bfloat16}


@pytest.fixture(scope="module")
def fixture_batch(converted_fixture, fixture_dir):
    """The fixture's reference sentences, tokenized."""
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    sentences = [sentence.split() for group in groups for sentence in group]
    tokenizer = AutoTokenizer.from_pretrained(converted_fixture)
    return tokenizer(sentences, is_split_into_words=True, return_tensors="pt", padding=True)


@pytest.fixture(scope="module")
def float32_layers(converted_fixture, fixture_batch):
    with torch.no_grad():
        return AutoModel.from_pretrained(converted_fixture)(**fixture_batch, output_hidden_states=True).hidden_states


def _layers(model, batch) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return model(**batch, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("method", ["int4", "INT8", "", None, 8, torch.int8, ["int8"]])
def test_an_unknown_method_is_refused_in_one_line_naming_the_valid_ones(method):
    with pytest.raises(
        ValueError, match=r"^quantization method must be one of 'int8', 'int8_weight_only', 'bf16', got"
    ):
        ElmoQuantizationConfig(method)


def test_the_config_and_quantizer_are_registered_with_transformers():
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING, AutoQuantizationConfig

    from modeling_elmo.quantization import ElmoQuantizer

    config = AutoQuantizationConfig.from_dict({"quant_method": "elmo", "method": "bf16"})
    assert isinstance(config, ElmoQuantizationConfig) and config.method == "bf16"
    assert AUTO_QUANTIZER_MAPPING["elmo"] is ElmoQuantizer


@pytest.mark.parametrize("method", METHODS)
def test_fixture_outputs_within_the_stated_tolerance_and_no_float32_weights_kept(
    converted_fixture, fixture_batch, float32_layers, method
):
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig(method))
    assert model.config.quantization_config.method == method and model.is_quantized
    for layer in model.bilm.layers:
        assert isinstance(layer, ElmoQuantizedLstmLayer)
        assert {name for name, _ in layer.named_parameters()} == {"bias"}  # the weights are only the quantized ones
        assert all(getattr(layer, name).dtype == STORAGE[method] for name in ("weight_ih", "weight_hh", "weight_proj"))
    mask = fixture_batch["attention_mask"].bool()
    max_tolerance, mean_tolerance = TOLERANCES[method]
    found = _layers(model, fixture_batch)
    assert torch.equal(found[0], float32_layers[0])  # the character CNN is not quantized
    for quantized, exact in zip(found[1:], float32_layers[1:], strict=True):
        difference = (quantized - exact)[mask].abs()
        assert 0 < difference.max() <= max_tolerance and difference.mean() <= mean_tolerance


# docs/speed.md, "Quantization": how far a sentence's vectors may move with its batch, on the fixture (outputs up to 7)
BATCH_TOLERANCES = {"int8": 1e-4, "int8_weight_only": 0.02, "bf16": 1e-4}


@pytest.mark.parametrize("method", METHODS)
def test_a_sentence_gets_the_same_vectors_in_any_batch(converted_fixture, fixture_dir, method):
    """Each of the fixture's sentences alone, three at a time and among 32, every layer: within the method's batch
    tolerance (docs/speed.md, "Quantization": `"int8"` and `"bf16"` give the same vector in any batch;
    `"int8_weight_only"` runs a single row on another kernel)."""
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    sentences = [sentence.split() for group in groups for sentence in group]
    sentences = (sentences * 2)[:32]
    tokenizer = AutoTokenizer.from_pretrained(converted_fixture)
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig(method))

    def layers_of(rows: list[list[str]]) -> list[torch.Tensor]:
        batch = tokenizer(rows, is_split_into_words=True, return_tensors="pt", padding=True)
        layers = torch.stack(_layers(model, batch), dim=1)  # (rows, layers, words, dim)
        return [layers[row, :, : len(words)] for row, words in enumerate(rows)]

    together = layers_of(sentences)
    for size in (1, 3):
        for start in range(0, len(sentences), size):
            for found, expected in zip(layers_of(sentences[start : start + size]), together[start:], strict=False):
                assert (found - expected).abs().max() <= BATCH_TOLERANCES[method], (size, start)


@pytest.mark.parametrize("method", METHODS)
def test_a_saved_quantized_folder_loads_back_with_the_same_bits(converted_fixture, fixture_batch, tmp_path, method):
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig(method))
    model.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())["quantization_config"]
    assert saved == {"quant_method": "elmo", "method": method}
    loaded = AutoModel.from_pretrained(tmp_path / "saved")
    assert (
        isinstance(loaded.bilm.layers[0], ElmoQuantizedLstmLayer)
        and loaded.config.quantization_config == model.config.quantization_config
    )
    before, after = model.state_dict(), loaded.state_dict()
    assert before.keys() == after.keys()
    assert all(before[key].dtype == after[key].dtype and torch.equal(before[key], after[key]) for key in before)
    expected, found = _layers(model, fixture_batch), _layers(loaded, fixture_batch)
    assert all(torch.equal(left, right) for left, right in zip(expected, found, strict=True))


@pytest.mark.parametrize(
    ("auto_class", "kwargs"),
    [
        (AutoModelForTokenClassification, {"num_labels": 3}),
        (AutoModelForSequenceClassification, {"num_labels": 2}),
        (AutoModelForPreTraining, {"lm_vocab_size": 11}),
    ],
)
def test_every_head_loads_with_a_quantized_bilm(converted_fixture, fixture_batch, auto_class, kwargs):
    model = auto_class.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"), **kwargs)
    assert all(isinstance(layer, ElmoQuantizedLstmLayer) for layer in model.elmo.bilm.layers)
    assert not any(parameter.requires_grad for parameter in model.elmo.parameters())  # the quantized biLM is frozen
    if auto_class is not AutoModelForPreTraining:
        with torch.no_grad():
            logits = model(**fixture_batch).logits
        assert logits.shape[0] == fixture_batch["input_ids"].shape[0] and torch.isfinite(logits).all()


def test_a_gradient_through_the_quantized_weights_is_refused_in_one_line(converted_fixture, fixture_batch):
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
    model.requires_grad_(True)  # a user unfreezing the biLM to fine-tune it
    with pytest.raises(
        RuntimeError, match=r"^The biLM's weights are quantized \('int8'\): no gradient flows"
    ) as error:
        model(**fixture_batch)
    assert "\n" not in str(error.value)


def test_a_head_over_the_frozen_quantized_bilm_trains(converted_fixture, fixture_batch, tmp_path):
    from transformers import Trainer, TrainingArguments

    model = AutoModelForTokenClassification.from_pretrained(
        converted_fixture, num_labels=3, quantization_config=ElmoQuantizationConfig("int8")
    ).train()
    Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[]))  # accepts the model
    labels = torch.zeros_like(fixture_batch["attention_mask"]).masked_fill(fixture_batch["attention_mask"] == 0, -100)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    optimizer = torch.optim.SGD([parameter for parameter in model.parameters() if parameter.requires_grad], lr=0.5)
    model(**fixture_batch, labels=labels).loss.backward()
    optimizer.step()
    changed = {name for name, parameter in model.named_parameters() if not torch.equal(parameter, before[name])}
    assert changed and all(not name.startswith("elmo.") for name in changed)


def test_off_cpu_placement_and_other_dtypes_are_refused(converted_fixture):
    with pytest.raises(ValueError, match="runs on CPUs only"):
        AutoModel.from_pretrained(
            converted_fixture, quantization_config=ElmoQuantizationConfig("int8"), device_map={"": "cuda:0"}
        )
    with pytest.raises(ValueError, match="keeps its other weights in float32"):
        AutoModel.from_pretrained(
            converted_fixture, quantization_config=ElmoQuantizationConfig("int8"), dtype=torch.bfloat16
        )


@pytest.mark.parametrize("method", METHODS)
def test_the_card_of_a_quantized_model_says_so_and_by_which_method(converted_fixture, tmp_path, method):
    from huggingface_hub import ModelCard

    from modeling_elmo.hub.model_card import render_base_model_card

    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig(method))
    model.save_pretrained(tmp_path / "saved")
    for config in (model.config, AutoModel.from_pretrained(tmp_path / "saved").config):  # object, then saved dict
        card = ModelCard(render_base_model_card(config, sources={}, max_abs_difference=None))
        assert "quantized" in card.data.tags
        assert f'## Quantized\n\nThis biLM is **quantized** (`ElmoQuantizationConfig(method="{method}")`)' in card.text
    plain = ModelCard(
        render_base_model_card(
            AutoModel.from_pretrained(converted_fixture).config, sources={}, max_abs_difference=None
        )
    )
    assert "quantized" not in plain.data.tags and "## Quantized" not in plain.text


@pytest.fixture(scope="module")
def int8_folder(converted_fixture, tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantized") / "int8"
    AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8")).save_pretrained(
        folder
    )
    return folder


@pytest.mark.parametrize("load", [AutoModel.from_pretrained, ElmoModel.from_pretrained])  # a config, config.json
def test_a_saved_quantized_folder_refuses_another_quantization_in_one_line(int8_folder, load, capfd):
    """Refused before Transformers would warn that it uses the folder's own (issue 52, point 5c); the folder's own
    asked again loads without that warning."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"^This folder is saved quantized .*'int8'.*cannot change that") as error:
            load(int8_folder, quantization_config=ElmoQuantizationConfig("bf16"))
        with pytest.raises(ValueError, match=r"^This folder is saved quantized .*'int8'.*cannot change that"):
            load(int8_folder, quantization_config={"quant_method": "elmo", "method": "bf16"})
        same = load(int8_folder, quantization_config=ElmoQuantizationConfig("int8"))
    assert "\n" not in str(error.value)
    assert same.config.quantization_config.method == "int8"
    said = [str(warning.message) for warning in warned] + capfd.readouterr().err.splitlines()
    assert not [message for message in said if "quantization_config" in message], said


def test_a_saved_quantized_folder_without_the_quantizer_says_to_install_the_package(int8_folder, monkeypatch):
    """Where elmo-transformers' quantizer is not registered (the folder's remote code without the package: tested for
    real in test_a_saved_quantized_folder_loaded_without_the_package_says_to_install_it), one error, not Transformers'
    size-mismatch table (issue 52, point 5b)."""
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    monkeypatch.delitem(AUTO_QUANTIZER_MAPPING, "elmo")
    for load in (AutoModel.from_pretrained, ElmoModel.from_pretrained):
        with pytest.raises(ImportError, match=r"saved quantized by elmo-transformers \(quantization method 'int8'\)"):
            load(int8_folder)


# a user without this package: tests/without_package.py hides it, the folder's own code loads it
LOAD_WITHOUT_PACKAGE = """
import sys
sys.path.insert(0, sys.argv[1])
from without_package import use_site_packages_without_package
use_site_packages_without_package(sys.argv[2])
from transformers import AutoModel
AutoModel.from_pretrained(sys.argv[3], trust_remote_code=True)
"""


@pytest.mark.integration
def test_a_saved_quantized_folder_loaded_without_the_package_says_to_install_it(int8_folder, tmp_path):
    site_packages = sysconfig.get_paths()["purelib"]
    tests = str(Path(__file__).resolve().parents[1])
    environment = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LOAD_WITHOUT_PACKAGE, tests, site_packages, str(int8_folder)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and "saved quantized by elmo-transformers" in last, result.stderr[-3000:]
    assert "(quantization method 'int8')" in last and "elmo-transformers @ git+https://" in last
    assert "cannot be loaded unquantized" in last
    assert "mismatch" not in result.stderr.lower() and "Unknown quantization type" not in result.stderr


def test_a_quantized_model_refuses_to_be_exported_in_one_line(converted_fixture, fixture_batch):
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
    with pytest.raises(ValueError, match=r"^A quantized ElmoModel \(int8\) cannot be exported"):
        torch.export.export(model, (fixture_batch["input_ids"],), {"attention_mask": fixture_batch["attention_mask"]})


def test_a_model_loaded_under_inference_mode_runs_and_renews_its_kernels_on_a_reload(
    converted_fixture, fixture_batch, tmp_path
):
    """Inference tensors keep no version counter; a state loaded into the model later is what the kernels use."""
    with torch.inference_mode():
        model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
        first = model(**fixture_batch).last_hidden_state
    other = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
    with torch.no_grad():
        for layer in other.bilm.layers:
            layer.weight_hh_scale.mul_(2)
        expected = other(**fixture_batch).last_hidden_state
    with torch.inference_mode():  # inference tensors are written in place only there, with no version bump
        model.load_state_dict(other.state_dict())
        found = model(**fixture_batch).last_hidden_state
    assert torch.equal(found, expected) and not torch.equal(found, first)


def test_a_quantized_model_cast_to_another_dtype_refuses_to_run_in_one_line(converted_fixture, fixture_batch):
    model = AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8"))
    model.to(torch.bfloat16)  # the float32 scales and biases become bfloat16: not the saved bits any more
    with pytest.raises(
        ValueError, match=r"^A quantized biLM \('int8'\) was cast to other dtypes .*casting is refused"
    ):
        model(**fixture_batch)
