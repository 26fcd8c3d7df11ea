"""Inputs, models and spies shared by the fast-path tests: character ids built straight from the character-id rules,
ElmoModels with random weights written in the original format, and records of oneDNN's linear calls."""

import torch

import modeling_elmo.lstm_engine as lstm_engine
from modeling_elmo import ElmoModel
from modeling_elmo.character_ids import word_to_char_ids
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
