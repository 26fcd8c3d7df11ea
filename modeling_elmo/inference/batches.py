"""
One batch through an ELMo model, as every caller that embeds text runs it: `elmo-embed` and `ElmoBatchEmbedder`
(`embed/`) and `elmo serve` (`serve/`). A batch is a list of `Sentence`s (line index, text, words); `embed_batch`
computes their vectors in one forward pass (under `engine.tuned_call`, keyed by `tuning_key`), per word or pooled,
with every layer, the top one or their average; `replay_in_word_cache` puts a batch computed before an interruption
through the character CNN's word cache as the forward pass does (a resumed `elmo-embed` run computes the same bits).

torch and numpy are imported when the work starts.
"""

from __future__ import annotations  # torch and numpy types in annotations: imported when the work starts

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch


@dataclass(frozen=True)
class Sentence:
    index: int  # line number, 0-based: the dataset name in the output
    text: str  # the line without surrounding whitespace: the key in `sentence_to_index`
    words: list[str]


@dataclass(frozen=True)
class Batch:
    number: int  # 0-based, in the order of its window
    sentences: list[Sentence]
    window: int = 0  # the window of `window` lines it was cut from

    @property
    def name(self) -> str:
        """Window and batch number, zero-padded so that names sort in the order of the run."""
        return f"{self.window:08d}-{self.number:06d}"


def _encode(tokenizer, sentences: list[Sentence], device: torch.device) -> dict[str, torch.Tensor]:
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    return {key: encoded[key].to(device) for key in ("input_ids", "attention_mask")}


def embed_batch(model, tokenizer, batch: Batch, layers: str, pooling: str = "none") -> dict[int, np.ndarray]:
    """Float32 arrays of every sentence of `batch` by line index: per word, (num_layers + 1, words, width) for
    `layers="all"` (the character CNN's layer first), (words, width) for "top" and "average" (the mean of all
    layers); with `pooling="mean"` the mean over the sentence's words (the word axis removed; zeros for no words)."""
    import numpy as np
    import torch

    num_layers, width = model.config.num_hidden_layers + 1, model.config.hidden_size
    empty_shape = (num_layers, 0, width) if layers == "all" else (0, width)
    if pooling == "mean":
        empty_shape = empty_shape[:-2] + empty_shape[-1:]
    arrays = {sentence.index: np.zeros(empty_shape, np.float32) for sentence in batch.sentences if not sentence.words}
    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return arrays
    from ..engine import tuned_call

    encoded = _encode(tokenizer, sentences, model.device)
    with torch.inference_mode():  # this command owns its process: fewer threads where the machine is busy, same bits

        def compute():
            return model(**encoded, output_hidden_states=layers != "top")

        output = tuned_call(compute, encoded["attention_mask"], tuning_key(model))
        if layers == "top":
            values = output.last_hidden_state  # (batch, words, width)
        else:
            values = torch.stack(output.hidden_states, dim=1).float()  # (batch, layers, words, width)
            if layers == "average":
                values = values.mean(dim=1)
        values = values.float().cpu().numpy()
    for row, sentence in enumerate(sentences):
        words = values[row, ..., : len(sentence.words), :]  # ([layers,] words, width)
        arrays[sentence.index] = np.ascontiguousarray(words.mean(axis=-2) if pooling == "mean" else words)
    return arrays


def tuning_key(model) -> tuple:
    """What tells the calls of `model` (an `ElmoModel`) apart for `engine.tuned_call`: the shapes and dtypes of its
    parameters and buffers (quantized weights included) and its choice of implementation."""
    tensors = (*model.parameters(), *model.buffers())
    return tuple((tuple(tensor.shape), tensor.dtype) for tensor in tensors), model.config._elmo_implementation


def replay_in_word_cache(model, tokenizer, batch: Batch) -> None:
    """
    Put the words of a batch computed before an interruption through the character-CNN word cache as the model's
    forward pass does. A word's CNN output depends in its last bits on the words computed alongside it, so only a
    cache that sees every batch of its window in order (it is emptied at each window) holds the values of an
    uninterrupted run, and gives the window's later batches its exact results.
    """
    import torch

    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return
    encoded = _encode(tokenizer, sentences, model.device)
    words = encoded["input_ids"][encoded["attention_mask"].bool()]  # the forward pass's words, in another order
    with torch.inference_mode():
        model.char_encoder.embed_words(torch.cat([words, model.char_encoder.boundary_char_ids(model.device)]))
