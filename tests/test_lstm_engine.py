"""The CPU inference engine (`lstm_engine`) against the layer's reference recurrence, and the engine's defaults being
predictable: the same bits whatever the load and however many Python threads call the model, and no process-wide
setting changed by a call."""

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import random_model as _model
from test_fast_paths import ARCHITECTURE_CASES, _max_difference, _sentences

from modeling_elmo import ElmoModel
from modeling_elmo.lstm_engine import LstmEngine

TOLERANCE = 1e-6


def _disable_engine(model: ElmoModel) -> None:
    for layer in model.bilm.layers:
        layer.engine = None


def _hidden_states(model: ElmoModel, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        return model(ids, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("architecture", ARCHITECTURE_CASES.values(), ids=ARCHITECTURE_CASES.keys())
def test_engine_and_reference_recurrence_agree(random_checkpoint, monkeypatch, architecture):
    model = _model(random_checkpoint, seed=30, **architecture)
    ids = _char_ids(_sentences(seed=31, count=7, max_words=20))
    runs = []
    run = LstmEngine.run
    monkeypatch.setattr(LstmEngine, "run", lambda self, *args: runs.append(1) or run(self, *args))
    with_engine = _hidden_states(model, ids)
    assert len(runs) == len(model.bilm.layers)
    _disable_engine(model)
    without_engine = _hidden_states(model, ids)
    assert len(runs) == len(model.bilm.layers)  # the reference recurrence only
    assert _max_difference(with_engine, without_engine) <= TOLERANCE


def test_engine_runs_on_cpu_only_and_without_gradients(random_checkpoint):
    layer = _model(random_checkpoint, seed=37).bilm.layers[0]
    inputs = torch.zeros(2, 3, layer.weight_ih.shape[1])
    with torch.no_grad():
        assert LstmEngine.applies(layer, inputs)
        assert not LstmEngine.applies(layer, inputs.to("meta"))  # any other device: the reference recurrence
    with torch.enable_grad():
        assert not LstmEngine.applies(layer, inputs)  # the layer's parameters require gradients
        assert LstmEngine.applies(layer.requires_grad_(False), inputs)
        assert not LstmEngine.applies(layer, inputs.requires_grad_())
