"""Implementations chosen by name (`elmo_implementations`): a new one is one registered object. A float64 reference
registered from this file, with no change to `modeling_elmo.py`, is picked up by every path (`ElmoModel`, the heads,
pretraining, `torch.export`), by name or as a default; calls it does not support (gradients) take the reference."""

import collections
import contextlib
import dataclasses
import gc
import json
import types
import weakref
from collections.abc import Iterator

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
from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS, ElmoCall, ImplementationUnavailable
from modeling_elmo.engine import triton_implementation
from modeling_elmo.engine.char_cnn_engine import CharCnnEngine
from modeling_elmo.lstm_cell import LayerKey, LstmWeights
from modeling_elmo.reference_implementations import reference_lstm_layer

SENTENCES = [["the", "bank", "closed"], ["river"], ["a", "café", "by", "the", "river"]]


class Float64Implementation:
    """Every product and the recurrence in float64, rounded to the inputs' dtype; counts its calls."""

    embeds_unique_words = True

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def supports(self, call: ElmoCall) -> bool:
        return not call.needs_grad

    def linear(self, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        self.calls["linear"] += 1
        return nn.functional.linear(inputs.double(), weight.double(), bias.double()).to(inputs.dtype)

    def max_pooled_convolution(self, chars: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        self.calls["max_pooled_convolution"] += 1
        pooled = nn.functional.conv1d(chars.double().transpose(1, 2), weight.double(), bias.double())
        return pooled.max(dim=-1).values.to(chars.dtype)

    def lstm_layer(self, weights: LstmWeights, inputs, batch_sizes, initial_state):
        self.calls["lstm_layer"] += 1
        matrices = ("weight_ih", "weight_hh", "bias", "weight_proj")
        exact = dataclasses.replace(weights, **{name: getattr(weights, name).double() for name in matrices})
        outputs, (hidden, cell) = reference_lstm_layer(
            exact, inputs.double(), batch_sizes, tuple(state.double() for state in initial_state)
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


@contextlib.contextmanager
def chosen(model: nn.Module, name: str, implementation: object) -> Iterator[None]:
    """`implementation` registered as `name` and chosen by `model` for the block; both undone after."""
    ALL_ELMO_IMPLEMENTATIONS.register(name, implementation)
    try:
        model.set_implementation(name)
        yield
    finally:
        model.set_implementation(None)
        ALL_ELMO_IMPLEMENTATIONS.unregister(name)


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
    with chosen(model, "unavailable", unavailable):
        found = _hidden_states(model, batch)
    assert all(torch.equal(left, right) for left, right in zip(found, expected, strict=True))
    layers = model.config.num_hidden_layers
    assert unavailable.asked == layers and len(computed) == layers  # asked first, then the CPU engine, layer by layer


def test_every_selectable_name_is_listed_and_benchmark_knobs_are_not_registered():
    names = set(ALL_ELMO_IMPLEMENTATIONS.names())
    assert {"eager", "reference", "cpu", "cpu_threads", "triton", "triton_tf32", "triton_bf16"} <= names
    assert not {"cpu_views", "cpu_bmm", "cpu_auto", "cpu_packed"} & names
    assert all(name in names for name in ("eager_tf32", "cpu_threads"))  # elmo-embed's setting is listed too


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
    """The CPU engine's packed weights are kept per layer (`PerLayer`, keyed weakly by `LstmWeights.key`): nothing
    it keeps holds on to the layer."""
    cpu = ALL_ELMO_IMPLEMENTATIONS.get_interface("cpu", None)[0]
    model = _model(config)
    _hidden_states(model, _batch(model.config))
    layers = [weakref.ref(layer) for layer in model.bilm.layers]
    keys = [weakref.ref(layer.implementation_key) for layer in model.bilm.layers]
    assert all(key() in cpu._engines for key in keys)
    del model
    gc.collect()
    assert [layer() for layer in layers] == [None] * len(layers)
    assert [key() for key in keys] == [None] * len(keys)  # and what the engine kept for them is dropped


class UnavailableCharCnn:
    """A backend that accepts every inference call of the character CNN, then finds it cannot compute its products."""

    embeds_unique_words = True

    def __init__(self) -> None:
        self.asked: collections.Counter[str] = collections.Counter()

    def supports(self, call: ElmoCall) -> bool:
        return call.part == "char_cnn" and not call.needs_grad

    def linear(self, inputs, weight, bias):
        self.asked["linear"] += 1
        raise ImplementationUnavailable("no kernel for this device")

    def max_pooled_convolution(self, chars, weight, bias):
        self.asked["max_pooled_convolution"] += 1
        raise ImplementationUnavailable("no kernel for this device")


def test_a_char_cnn_backend_that_cannot_compute_hands_each_product_to_the_next_candidate(config, monkeypatch):
    """As the biLM's layers: the character CNN's products go back through the registry, to the CPU engine here (seen
    to compute each product), same bits as without the backend."""
    model = _model(config)
    batch = _batch(model.config)
    model.set_word_cache(None)  # every call runs the character CNN
    expected = _hidden_states(model, batch)
    computed = collections.Counter()
    for name in ("linear", "max_pooled_convolution"):
        product = getattr(CharCnnEngine, name)
        monkeypatch.setattr(
            CharCnnEngine,
            name,
            staticmethod(lambda *args, name=name, product=product: computed.update([name]) or product(*args)),
        )
    unavailable = UnavailableCharCnn()
    with chosen(model, "unavailable_char_cnn", unavailable):
        found = _hidden_states(model, batch)
    assert all(torch.equal(left, right) for left, right in zip(found, expected, strict=True))
    assert unavailable.asked["max_pooled_convolution"] == len(config.char_filters) > 0
    assert unavailable.asked["linear"] == 2 * config.num_highway_layers + 1
    assert computed == unavailable.asked  # each product, asked first, then computed by the CPU engine


class RecordingImplementation(Float64Implementation):
    """The float64 backend, recording every argument it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.arguments: list[object] = []

    def linear(self, *args):
        self.arguments += args
        return super().linear(*args)

    def max_pooled_convolution(self, *args):
        self.arguments += args
        return super().max_pooled_convolution(*args)

    def lstm_layer(self, weights, *args):
        self.arguments += [*args, *(getattr(weights, field.name) for field in dataclasses.fields(weights))]
        return super().lstm_layer(weights, *args)


def test_backends_receive_tensors_and_settings_never_a_module_or_a_bound_method(config):
    """Issue 46: every argument a backend gets (and every field of a layer's `LstmWeights`) is a tensor, a number, a
    list of row counts, a state or the layer's key; on f901fb0 `LstmWeights` carried the layer and its bound cell,
    and the character CNN's products received `nn.Linear` / `nn.Conv1d`."""
    recording, model = RecordingImplementation(), _model(config)
    model.set_word_cache(None)
    with chosen(model, "recording", recording):
        _hidden_states(model, _batch(model.config))
    assert recording.calls["lstm_layer"] == config.num_hidden_layers and recording.calls["linear"] > 0
    kinds = set()
    for argument in recording.arguments:
        values = argument if isinstance(argument, tuple | list) else [argument]
        kinds |= {type(value) for value in values}
    assert not any(issubclass(kind, nn.Module) or kind is types.MethodType for kind in kinds), kinds
    assert kinds <= {torch.Tensor, nn.Parameter, int, float, bool, type(None), LayerKey}, kinds


@pytest.mark.parametrize("name", ["float32x", 3])
def test_an_unknown_name_is_refused_in_the_config_and_before_loading(tmp_path, name):
    listed = r"registered are .*'cpu'.*'eager'.*'reference'"
    with pytest.raises(ValueError, match=rf"^Unknown implementation {name!r}: {listed}") as error:
        ElmoConfig(elmo_implementation=name)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=rf"^Unknown implementation {name!r}: {listed}"):
        ElmoModel.from_pretrained(tmp_path / "no such folder", elmo_implementation=name)  # refused before reading


def test_a_name_that_cannot_run_here_is_refused_in_the_config_listing_those_that_can(monkeypatch):
    monkeypatch.setattr(triton_implementation, "triton_unavailable", lambda: "Triton is not installed (x)")
    with pytest.raises(ValueError, match=r"^Implementation 'triton_bf16' needs Triton: Triton is not installed") as e:
        ElmoConfig(elmo_implementation="triton_bf16")
    assert "'cpu'" in str(e.value) and "'triton'" not in str(e.value) and "\n" not in str(e.value)
    assert ElmoConfig(elmo_implementation="cpu")._elmo_implementation == "cpu"
