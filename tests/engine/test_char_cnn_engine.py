"""The CPU inference products of the character CNN (`char_cnn_engine`) against the reference ones of
`ElmoEagerImplementation` (PyTorch's convolution and linear layers): the same embeddings with the engine
enabled and disabled, on the fixture model and on random architectures, and the engine used only where it should."""

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import random_model as _model
from test_fast_paths import WORDS, _sentences

from modeling_elmo import ElmoModel
from modeling_elmo.engine.char_cnn_engine import CharCnnEngine
from modeling_elmo.engine.cpu_linear import onednn_linear_applies

TOLERANCE = 1e-6
ARCHITECTURES = {
    "tiny": {},
    "tanh-one-highway": {"n_highway": 1, "filters": [[1, 4], [2, 8], [5, 16]], "activation": "tanh"},
    "no-projection": {"projection_dim": 16, "filters": [[1, 8], [3, 8]], "write_projection": False},
}
requires_onednn = pytest.mark.skipif(
    not onednn_linear_applies(torch.zeros(1), torch.zeros(1)), reason="the engine runs on x86 CPUs with oneDNN only"
)


def _words(ids: torch.Tensor) -> torch.Tensor:
    """The words of a batch of character ids (batch, words, chars): (num_words, chars), padding left out."""
    flat = ids.flatten(0, 1)
    return flat[(flat != 0).any(dim=1)]


def _embeddings(model: ElmoModel, words: torch.Tensor, implementation: str) -> torch.Tensor:
    model.set_implementation(implementation)
    with torch.no_grad():
        return model.char_encoder(words)


def _count_engine_calls(monkeypatch) -> list[str]:
    calls = []
    for name in ("linear", "max_pooled_convolution"):
        product = getattr(CharCnnEngine, name)
        monkeypatch.setattr(
            CharCnnEngine,
            name,
            staticmethod(lambda *args, name=name, product=product: calls.append(name) or product(*args)),
        )
    return calls


@requires_onednn
def test_fixture_model_embeddings_agree_with_the_engine_disabled(converted_fixture, monkeypatch):
    model = ElmoModel.from_pretrained(converted_fixture).eval()
    words = _words(_char_ids([[*WORDS, "pneumonoultramicroscopicsilicovolcanoconiosis"], ["<S>", "a"]]))
    calls = _count_engine_calls(monkeypatch)
    fast = _embeddings(model, words, "cpu")
    config = model.config
    assert calls.count("max_pooled_convolution") == len(config.char_filters)
    assert calls.count("linear") == 2 * config.num_highway_layers + 1
    calls.clear()
    reference = _embeddings(model, words, "eager")
    assert not calls
    assert float((fast - reference).abs().max()) <= TOLERANCE


@requires_onednn
@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES.keys())
def test_random_model_embeddings_agree_with_the_engine_disabled(random_checkpoint, architecture):
    model = _model(random_checkpoint, seed=3, **architecture)
    words = _words(_char_ids(_sentences(seed=4, count=5, max_words=12)))
    fast = _embeddings(model, words, "cpu")
    reference = _embeddings(model, words, "eager")
    assert float((fast - reference).abs().max()) <= TOLERANCE
    model.set_implementation("cpu")
    with torch.no_grad():  # the path of ElmoModel: once per distinct word, each chunk cut after its longest word
        assert float((model.char_encoder.embed_words(words) - reference).abs().max()) <= TOLERANCE


def test_engine_stays_out_of_gradients_and_other_dtypes(random_checkpoint, monkeypatch):
    model = _model(random_checkpoint, seed=5)
    words = _words(_char_ids(_sentences(seed=6, count=3, max_words=6)))
    calls = _count_engine_calls(monkeypatch)
    embeddings = model.char_encoder(words)  # with autograd: the reference products, on the graph
    embeddings.sum().backward()
    assert model.char_encoder.convolutions[0].weight.grad is not None
    with torch.no_grad():
        model.char_encoder.double()(words)
    assert not calls
