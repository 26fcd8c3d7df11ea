"""Implementations chosen by name (`elmo_implementations`): a new one is one registered object. A float64 reference
registered from this file, with no change to `modeling_elmo.py`, is picked up by every path (`ElmoModel`, the heads,
pretraining, `torch.export`), by name or as a default; calls it does not support (gradients) take the reference."""

import collections
import copy
import gc
import json
import weakref

import pytest
import torch
from model_inputs import random_model
from torch import nn
from torch.export import Dim

from modeling_elmo import (
    ElmoConfig,
    ElmoForPreTraining,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
)
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.elmo_implementations import (
    ALL_ELMO_IMPLEMENTATIONS,
    ElmoCall,
    ImplementationUnavailable,
    LstmWeights,
)

SENTENCES = [["the", "bank", "closed"], ["river"], ["a", "café", "by", "the", "river"]]


class Float64Implementation:
    """Every product and the recurrence in float64, rounded to the inputs' dtype; counts its calls."""

    embeds_unique_words = True

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def supports(self, call: ElmoCall) -> bool:
        return not call.needs_grad

    def linear(self, module: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        self.calls["linear"] += 1
        return nn.functional.linear(inputs.double(), module.weight.double(), module.bias.double()).to(inputs.dtype)

    def max_pooled_convolution(self, conv: nn.Conv1d, chars: torch.Tensor) -> torch.Tensor:
        self.calls["max_pooled_convolution"] += 1
        pooled = nn.functional.conv1d(chars.double().transpose(1, 2), conv.weight.double(), conv.bias.double())
        return pooled.max(dim=-1).values.to(chars.dtype)

    def lstm_layer(self, weights: LstmWeights, inputs, batch_sizes, initial_state):
        self.calls["lstm_layer"] += 1
        exact = copy.deepcopy(weights.owner).double()
        outputs, (hidden, cell) = exact.forward_reference(
            inputs.double(), batch_sizes, tuple(state.double() for state in initial_state)
        )
        return outputs.to(inputs.dtype), (hidden.to(inputs.dtype), cell.to(inputs.dtype))


@pytest.fixture
def float64():
    """The float64 implementation, registered as "float64" for the test."""
    implementation = Float64Implementation()
    ALL_ELMO_IMPLEMENTATIONS.register("float64", implementation)
    yield implementation
    ALL_ELMO_IMPLEMENTATIONS.unregister("float64")


def _batch(config: ElmoConfig) -> dict[str, torch.Tensor]:
    width = max(map(len, SENTENCES))
    input_ids = torch.zeros(len(SENTENCES), width, config.max_characters_per_token, dtype=torch.long)
    attention_mask = torch.zeros(len(SENTENCES), width, dtype=torch.long)
    for row, words in enumerate(SENTENCES):
        input_ids[row, : len(words)] = torch.tensor(
            [word_to_char_ids(w, config.max_characters_per_token) for w in words]
        )
        attention_mask[row, : len(words)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask}


@pytest.fixture
def config(random_checkpoint) -> ElmoConfig:
    """A small random model's config, with a language-model vocabulary for pretraining."""
    config = random_model(random_checkpoint).config
    config.lm_vocab_size = 20
    return config


def _model(config: ElmoConfig, cls: type[nn.Module] = ElmoModel) -> nn.Module:
    torch.manual_seed(0)
    return cls(config).eval()


def _max_difference(left, right) -> float:
    return float(max((a - b).abs().max() for a, b in zip(left, right, strict=True)))


def test_elmo_model_takes_it_by_name_and_is_close_to_the_reference(float64, config):
    model = _model(config)
    batch = _batch(model.config)
    with torch.no_grad():
        expected = model(**batch, output_hidden_states=True).hidden_states
        model.set_implementation("float64")
        found = model(**batch, output_hidden_states=True).hidden_states
    num_layers, config = model.config.num_hidden_layers, model.config
    assert float64.calls["lstm_layer"] == num_layers
    assert float64.calls["max_pooled_convolution"] == len(config.char_filters)  # one char-CNN call: distinct words
    assert float64.calls["linear"] == 2 * config.num_highway_layers + 1
    assert 0 < _max_difference(found, expected) <= 1e-5


def test_a_registered_default_serves_models_that_chose_none(float64, config):
    ALL_ELMO_IMPLEMENTATIONS.register("float64", float64, default=True)
    model = _model(config)
    with torch.no_grad():
        model(**_batch(model.config))
    assert float64.calls["lstm_layer"] == model.config.num_hidden_layers
    model.set_implementation("eager")  # a choice by name wins over the defaults
    float64.calls.clear()
    with torch.no_grad():
        model(**_batch(model.config))
    assert not float64.calls


@pytest.mark.parametrize("head", [ElmoForTokenClassification, ElmoForSequenceClassification])
def test_heads_take_it(float64, config, head):
    model = _model(config, head)
    model.set_implementation("float64")
    with torch.no_grad():
        model(**_batch(model.config))
    assert float64.calls["lstm_layer"] == model.config.num_hidden_layers


def test_pretraining_takes_it_and_gradients_take_the_reference(float64, config):
    model = _model(config, ElmoForPreTraining)
    model.set_implementation("float64")
    windows = _batch(model.config)["input_ids"][:, :2]
    labels = torch.zeros(windows.shape[:2], dtype=torch.long)
    with torch.no_grad():
        model(windows, windows.flip(1), labels=labels, backward_labels=labels)
    assert float64.calls["lstm_layer"] == model.config.num_hidden_layers
    float64.calls.clear()
    model.train()(windows, windows.flip(1), labels=labels, backward_labels=labels).loss.backward()
    assert not float64.calls  # gradients needed: not supported, so the reference ran


def test_export_takes_it(float64, config):
    model = _model(config)
    model.set_implementation("float64")
    batch = _batch(model.config)
    batch_dim, words = Dim("batch"), Dim("words")
    with torch.no_grad():  # an inference export: the implementation supports calls without gradients
        program = torch.export.export(
            model,
            (),
            {**batch, "output_hidden_states": True},
            dynamic_shapes={
                "input_ids": {0: batch_dim, 1: words},
                "attention_mask": {0: batch_dim, 1: words},
                "output_hidden_states": None,
            },
        )
    assert float64.calls["max_pooled_convolution"] >= len(model.config.char_filters)  # the char CNN, traced
    exported = program.module()(**batch, output_hidden_states=True).hidden_states
    with torch.no_grad():
        expected = model(**batch, output_hidden_states=True).hidden_states
    assert _max_difference(exported, expected) <= 1e-5


def test_unknown_names_are_refused_and_change_nothing(float64, config):
    model = _model(config)
    model.set_implementation("float64")
    with pytest.raises(ValueError, match=r"Unknown implementation 'float32x': registered are .*'float64'"):
        model.set_implementation("float32x")
    assert {layer.implementation for layer in model.bilm.layers} == {"float64"}


class CudaOnlyImplementation:
    """A backend for CUDA calls only, registered as a default there: counts every question and call it gets."""

    embeds_unique_words = True

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def supports(self, call: ElmoCall) -> bool:
        self.calls["supports"] += 1
        return call.device.type == "cuda"

    def lstm_layer(self, weights, inputs, batch_sizes, initial_state):
        self.calls["lstm_layer"] += 1
        raise AssertionError("a CUDA-only backend ran a CPU call")


def _hidden_states(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return model(**batch, output_hidden_states=True).hidden_states


def test_a_backend_for_another_device_is_never_asked_about_cpu_calls(config):
    """Registered as the default for CUDA calls (as "triton" is where Triton is installed), a backend changes nothing
    on a CPU: never asked, never run, the same bits."""
    model = _model(config)
    batch = _batch(model.config)
    expected = _hidden_states(model, batch)
    cuda_only = CudaOnlyImplementation()
    ALL_ELMO_IMPLEMENTATIONS.register("cuda_only", cuda_only, default=True, device_types=("cuda",))
    try:
        found = _hidden_states(model, batch)
        assert "cuda_only" in ALL_ELMO_IMPLEMENTATIONS.defaults_for("cuda")
        assert "cuda_only" not in ALL_ELMO_IMPLEMENTATIONS.defaults_for("cpu")
    finally:
        ALL_ELMO_IMPLEMENTATIONS.unregister("cuda_only")
    assert not cuda_only.calls
    assert all(torch.equal(left, right) for left, right in zip(found, expected, strict=True))


def test_triton_installed_on_a_cpu_machine_changes_nothing(config, monkeypatch):
    """The real Triton backend registered as it is where Triton is installed: CPU calls never ask it, same bits."""
    from modeling_elmo.engine import triton_implementation

    model = _model(config)
    batch = _batch(model.config)
    expected = _hidden_states(model, batch)
    asked = []
    monkeypatch.setattr(triton_implementation.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(
        triton_implementation.TritonImplementation, "supports", lambda self, call: asked.append(call) or False
    )
    triton_implementation.register_triton_implementations(ALL_ELMO_IMPLEMENTATIONS)
    try:
        assert "triton" in ALL_ELMO_IMPLEMENTATIONS.defaults
        found = _hidden_states(model, batch)
    finally:
        monkeypatch.undo()
        triton_implementation.register_triton_implementations(ALL_ELMO_IMPLEMENTATIONS)
    assert asked == []
    assert all(torch.equal(left, right) for left, right in zip(found, expected, strict=True))


def test_the_choice_is_resolved_once_per_forward_call(float64, config):
    """One question per part of the model per call, however many layers and character-CNN chunks."""
    asked = collections.Counter()
    supports = float64.supports
    float64.supports = lambda call: asked.update([call.part]) or supports(call)
    model = _model(config)
    model.set_implementation("float64")
    _hidden_states(model, _batch(model.config))
    assert model.config.num_hidden_layers > 1
    assert asked == {"char_cnn": 1, "lstm": 1}


class UnavailableImplementation:
    """A backend that accepts every inference call of the biLM, then finds it cannot compute it."""

    embeds_unique_words = True

    def supports(self, call: ElmoCall) -> bool:
        return call.part == "lstm" and not call.needs_grad

    def __init__(self) -> None:
        self.asked = 0

    def lstm_layer(self, weights, inputs, batch_sizes, initial_state):
        self.asked += 1
        raise ImplementationUnavailable("no kernel for this device")


def test_a_backend_that_cannot_compute_a_call_hands_it_to_the_next_candidate(config, monkeypatch):
    """The call goes back through the registry: the defaults of the device (here the CPU engine, which is seen to
    compute each layer: issue 46), same bits."""
    model = _model(config)
    batch = _batch(model.config)
    expected = _hidden_states(model, batch)
    cpu, computed = ALL_ELMO_IMPLEMENTATIONS.get_interface("cpu", None, "cpu")[0], []
    lstm_layer = cpu.lstm_layer

    def counted(*args, **kwargs):
        computed.append(1)
        return lstm_layer(*args, **kwargs)

    monkeypatch.setattr(cpu, "lstm_layer", counted)
    unavailable = UnavailableImplementation()
    ALL_ELMO_IMPLEMENTATIONS.register("unavailable", unavailable)
    try:
        model.set_implementation("unavailable")
        found = _hidden_states(model, batch)
    finally:
        model.set_implementation(None)
        ALL_ELMO_IMPLEMENTATIONS.unregister("unavailable")
    assert all(torch.equal(left, right) for left, right in zip(found, expected, strict=True))
    layers = model.config.num_hidden_layers
    assert unavailable.asked == layers and len(computed) == layers  # asked first, then the CPU engine, layer by layer


def test_public_names_are_the_users_and_benchmark_knobs_are_not_registered():
    names = set(ALL_ELMO_IMPLEMENTATIONS.names())
    assert {"eager", "reference", "cpu", "triton", "triton_tf32", "triton_bf16"} <= names
    assert not {"cpu_views", "cpu_bmm", "cpu_auto", "cpu_packed", "cpu_threads"} & names
    assert "cpu_threads" in ALL_ELMO_IMPLEMENTATIONS  # elmo-embed's setting, registered but not listed


def test_the_choice_is_held_in_the_config_settable_at_loading_and_not_saved(config, tmp_path):
    model = _model(config)
    model.save_pretrained(tmp_path / "saved")
    loaded = ElmoModel.from_pretrained(tmp_path / "saved", elmo_implementation="eager")
    assert loaded.config._elmo_implementation == "eager"
    assert {layer.implementation for layer in loaded.bilm.layers} == {"eager"}
    loaded.save_pretrained(tmp_path / "again")
    saved = json.loads((tmp_path / "again" / "config.json").read_text())
    assert not any("implementation" in key for key in saved)
    assert ElmoModel.from_pretrained(tmp_path / "again").config._elmo_implementation is None
    with pytest.raises(ValueError, match=r"^Unknown implementation 'cpu_views'"):
        ElmoModel.from_pretrained(tmp_path / "saved", elmo_implementation="cpu_views")


def test_what_a_backend_keeps_for_a_layer_goes_with_the_layer(config):
    """The CPU engine's packed weights are kept per layer (`PerLayer`, keyed weakly by `LstmWeights.owner`): nothing
    it keeps holds on to the layer."""
    cpu = ALL_ELMO_IMPLEMENTATIONS.get_interface("cpu", None)[0]
    model = _model(config)
    _hidden_states(model, _batch(model.config))
    layers = [weakref.ref(layer) for layer in model.bilm.layers]
    assert all(layer() in cpu._engines for layer in layers)
    del model
    gc.collect()
    assert [layer() for layer in layers] == [None] * len(layers)
