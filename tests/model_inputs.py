"""Inputs, models and spies shared by the fast-path tests: character ids built straight from the character-id rules,
ElmoModels with random weights written in the original format, records of oneDNN's linear calls, and the CPU
engine's settings of a model (`set_lstm_inference`: a `CpuImplementation` registered and chosen with
`set_implementation`)."""

import contextlib
from collections.abc import Iterator

import torch

import modeling_elmo.engine.lstm_engine as lstm_engine
from modeling_elmo import ElmoModel
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from modeling_elmo.engine import CpuImplementation
from modeling_elmo.formats.original_checkpoint import load_original_checkpoint


def char_ids(sentences: list[list[str]]) -> torch.Tensor:
    """Right-padded character ids (batch, max_words, 50)."""
    ids = torch.zeros(len(sentences), max(map(len, sentences)), 50, dtype=torch.long)
    for row, words in enumerate(sentences):
        ids[row, : len(words)] = torch.tensor([word_to_char_ids(word) for word in words])
    return ids


def random_model(random_checkpoint, seed: int = 0, **architecture) -> ElmoModel:
    """An ElmoModel in eval mode loaded from a random original-format checkpoint (the `random_checkpoint` fixture)."""
    config, state = load_original_checkpoint(*random_checkpoint(seed=seed, **architecture))
    model = ElmoModel(config)
    model.load_state_dict(state)
    return model.eval()


def quantized_copy(model: ElmoModel, method: str, folder) -> ElmoModel:
    """`model` saved to `folder` and loaded back quantized by `method` (`ElmoQuantizationConfig`), in eval mode."""
    from modeling_elmo import ElmoQuantizationConfig

    model.save_pretrained(folder)
    return ElmoModel.from_pretrained(folder, quantization_config=ElmoQuantizationConfig(method)).eval()


def record_onednn_calls(monkeypatch, lstm_only: bool = False) -> list[torch.Size]:
    """The input shape of every oneDNN linear call from now on (with `lstm_only`, only those made inside the biLM's
    inference engine, `LstmEngine.run`: its products and their measurement, not the char CNN's)."""
    calls, inside = [], []
    linear, run = torch.ops.mkldnn._linear_pointwise, lstm_engine.LstmEngine.run

    def spy(inputs, *args):
        if inside or not lstm_only:
            calls.append(inputs.shape)
        return linear(inputs, *args)

    def flagged_run(self, *args):
        inside.append(self)
        try:
            return run(self, *args)
        finally:
            inside.pop()

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
    monkeypatch.setattr(lstm_engine.LstmEngine, "run", flagged_run)
    return calls


def drop_thread_probe_calls(monkeypatch, calls: list) -> None:
    """Drop from `calls` what the thread-count probes of the automatic threads add to them (`same_results_at`, once
    per process and shape: the step products of a block, or the whole model for a call)."""
    probe = lstm_engine.same_results_at

    def probe_uncounted(*args):
        start = len(calls)
        try:
            return probe(*args)
        finally:
            del calls[start:]

    monkeypatch.setattr(lstm_engine, "same_results_at", probe_uncounted)


def engine_of(layer: torch.nn.Module) -> lstm_engine.LstmEngine:
    """The `LstmEngine` that runs `layer` under its model's chosen CPU implementation (the default: "cpu")."""
    implementation = ALL_ELMO_IMPLEMENTATIONS.get_interface(layer.implementation or "cpu", None)[0]
    return implementation.engine(layer.weights())


def _set_engine(model: ElmoModel, **changes: object) -> None:
    """Choose a CPU implementation with the model's current settings but `changes` (checked first)."""
    engine = engine_of(model.bilm.layers[0])
    settings = {"products": engine.products, "threads": engine.threads}
    settings.update(changes)
    implementation = CpuImplementation(**settings)
    name = "test:{products}/{threads}".format(**settings)
    ALL_ELMO_IMPLEMENTATIONS.register(name, implementation)
    model.set_implementation(name)


def set_lstm_inference(model: ElmoModel, products: str = "onednn", threads: int | str | None = None) -> None:
    """The step products and threads of the model's CPU engine (`lstm_engine.check_settings`)."""
    _set_engine(model, products=products, threads=threads)


@contextlib.contextmanager
def reference_implementation(model: ElmoModel, enabled: bool = True) -> Iterator[None]:
    """Within the block, the "reference" implementation (if `enabled`; otherwise not: the default instead of it);
    the previous choice restored after."""
    previous = model.bilm.layers[0].implementation
    if enabled or previous == "reference":
        model.set_implementation("reference" if enabled else None)
    try:
        yield
    finally:
        model.set_implementation(previous)
