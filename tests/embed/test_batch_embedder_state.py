"""What `ElmoBatchEmbedder` keeps between calls (issue 41, item 4): at most `MODEL_CACHE_SIZE` models, the least
recently used dropped first; a word cache of each embedder's own; and calls from several Python threads at once that
give what the calls give one after the other."""

import contextlib
from types import SimpleNamespace

import pytest
from python_threads import at_once, frequent_thread_switches

from modeling_elmo.embed import ElmoBatchEmbedder, batch_embedder

THREADS = 3
CALLS = 2  # per thread, all at once
WORDS = "the bank closed its doors river boats go by a café of".split()


@pytest.fixture
def no_models_loaded(monkeypatch):
    monkeypatch.setattr(batch_embedder, "_LOADED", {})


def test_the_model_cache_keeps_the_most_recently_used_models(monkeypatch, no_models_loaded):
    loads = []

    def load_model(model, dtype, device, progress=True, quantization=None):
        loads.append(model)
        tokenizer = SimpleNamespace(name=f"tokenizer of {model}")
        return tokenizer, SimpleNamespace(name=model, set_word_cache=lambda size: None)

    monkeypatch.setattr(batch_embedder, "load_model", load_model)
    embedders = {name: ElmoBatchEmbedder(name) for name in ("a", "b", "c")}
    for name in ("a", "b", "a", "c", "a", "b"):
        tokenizer, model = embedders[name].loaded()
        assert model.name == name and len(batch_embedder._LOADED) <= 2
    assert loads == ["a", "b", "c", "b"]  # "a", used last before "c" came, stayed; "b" was dropped, then reloaded
    assert batch_embedder.MODEL_CACHE_SIZE == 2  # as documented
    assert ElmoBatchEmbedder("a", word_cache=0).loaded()[1] is embedders["a"].loaded()[1]  # one per model


def test_each_quantization_of_a_model_is_a_model_of_its_own(monkeypatch, no_models_loaded):
    loads = []

    def load_model(model, dtype, device, progress=True, quantization=None):
        loads.append((model, quantization))
        return SimpleNamespace(), SimpleNamespace(name=f"{model} {quantization}")

    monkeypatch.setattr(batch_embedder, "load_model", load_model)
    for quantization in (None, "int8", "bf16", "int8"):
        assert ElmoBatchEmbedder("a", quantization=quantization).loaded()[1].name == f"a {quantization}"
    assert loads == [("a", None), ("a", "int8"), ("a", "bf16")]  # "int8" again: still loaded (the exact one went)


def test_each_embedder_has_a_word_cache_of_its_own(converted_fixture, no_models_loaded, monkeypatch):
    first, second = ElmoBatchEmbedder(converted_fixture, "top"), ElmoBatchEmbedder(converted_fixture, "top")
    first({"id": [0, 1], "text": ["the bank closed", "river boats"]})
    encoder = first.loaded()[1].char_encoder
    assert second.loaded()[1].char_encoder is encoder  # one model for both
    computed, compute = [], encoder._embed_by_length
    monkeypatch.setattr(
        encoder, "_embed_by_length", lambda ids, *rest: computed.append(len(ids)) or compute(ids, *rest)
    )
    first({"id": [0], "text": ["the river"]})
    assert computed == []  # in its cache: the words and the sentence boundaries
    second({"id": [0], "text": ["the river"]})
    assert computed == [4]  # its own cache is empty: both words and both boundaries run through the CNN
    assert encoder.word_cache is None  # no cache left on the shared model


def _batches() -> list[dict]:
    """One batch per Python thread, with words no other thread's batch has: each word's cached row, computed
    alongside the words of its own batch, is the same whatever order the threads run in."""
    return [
        {"id": [0, 1, 2], "words": [[f"{thread}{word}" for word in WORDS[start:]] for start in (0, 3, 7)]}
        for thread in range(THREADS)
    ]


def _primed(converted_fixture, word_cache: int) -> ElmoBatchEmbedder:
    """An embedder whose word cache holds `<S>` and `</S>`, which every batch has (so no thread's batch computes
    them: their last bits would depend on which came first)."""
    embedder = ElmoBatchEmbedder(converted_fixture, "all", threads=1, batch_size=2, word_cache=word_cache)
    embedder({"id": [0], "text": ["x"]})
    return embedder


@pytest.fixture
def calls_overlap(monkeypatch):
    """The thread setting no longer makes the calls take turns (issue 46: with it, the test could not catch what the
    embedder's own locks must prevent), and the threads switch often."""
    monkeypatch.setattr(batch_embedder, "num_threads", lambda count: contextlib.nullcontext())
    with frequent_thread_switches():
        yield


@pytest.mark.parametrize("word_cache", [0, 1000], ids=["no-word-cache", "word-cache"])
def test_threads_calling_one_embedder_at_once_get_its_one_at_a_time_results(
    converted_fixture, word_cache, calls_overlap
):
    batches = _batches()
    one_at_a_time = _primed(converted_fixture, word_cache)
    alone = [one_at_a_time(batch) for batch in batches]
    embedder = _primed(converted_fixture, word_cache)
    results = at_once(lambda index: [embedder(batches[index]) for _ in range(CALLS)], THREADS)
    for index, tables in enumerate(results):
        assert len(tables) == CALLS and all(table.equals(alone[index]) for table in tables), f"thread {index}"
