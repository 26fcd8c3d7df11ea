"""ELMoForManyLangs' `Embedder` on this project's `ElmoModel`: `Embedder(model_dir, batch_size=64)` and
`sents2elmo(sents, output_layer=-1)` with its shapes, dtypes, tokenization and numbers; every sentence from zero LSTM
states unless `stateful=True` (docs/migrate-elmoformanylangs.md)."""

import os
from collections.abc import Iterable, Sequence
from operator import index
from typing import Any

import numpy as np
import torch
from torch import nn

from ..foundation.checks import TokenListWording, check_count, check_token_lists
from ..lstm_states import ElmoLstmStates
from ..modeling_elmo import ElmoModel
from .loading import load_embedder_model

MEAN_OF_LAYERS, ALL_LAYERS = -1, -2


class SentenceInputError(ValueError, TypeError):
    """Input that `sents2elmo` refuses (a string where a list of tokens is expected, a token that is not a string);
    both a `ValueError` and a `TypeError`, the message names the sentence."""


class EmbedderEncoder:
    """What `Embedder.model.encoder` offers ELMoForManyLangs code: the LSTM states carried between batches
    (`states`, `None` unless the embedder is stateful) and `reset_states()`, which forgets them."""

    def __init__(self, model: ElmoModel, stateful: bool) -> None:
        self.bilm = model.bilm
        self.states = ElmoLstmStates(model.config) if stateful else None

    @property
    def stateful(self) -> bool:
        return self.states is not None

    def reset_states(self) -> None:
        """Forget the carried states: the next batch starts from zero states (a no-op when not stateful)."""
        if self.states is not None:
            self.states.reset()


class EmbedderModel(nn.Module):
    """
    `Embedder.model`: the biLM (`elmo`, an [`ElmoModel`]), with ELMoForManyLangs' names for its parts:
    `token_embedder` (the character CNN) and `encoder` (`EmbedderEncoder`: the carried states, `reset_states()`).
    """

    def __init__(self, elmo: ElmoModel, stateful: bool) -> None:
        super().__init__()
        self.elmo = elmo
        self.encoder = EmbedderEncoder(elmo, stateful)

    @property
    def token_embedder(self) -> nn.Module:
        return self.elmo.char_encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`input_ids` (batch, words, `input_ids_width`), `attention_mask` (batch, words) -> every layer (n_layers + 1,
        batch, words, 2 * projection_dim), `<bos>`/`<eos>` dropped; from and into `encoder.states` when stateful."""
        output = self.elmo(input_ids, attention_mask, output_hidden_states=True, states=self.encoder.states)
        return torch.stack(output.hidden_states)


# A string where a list is expected, or a token that is not a string, is refused in one line (ELMoForManyLangs
# splits a string into characters silently).
SENTENCES_WORDING = TokenListWording(
    batch="sents must be a list of sentences, each a list of str tokens, got a {type}.",
    batch_is_str="sents must be a list of sentences, each a list of str tokens, got a {type}"
    " (ELMoForManyLangs would read each character as a sentence).",
    text_is_str="sents[{index}] is a str ({head!r}), not a list of tokens: ELMoForManyLangs would split it into "
    "characters; pass sentence.split() (words) or list(sentence) (characters).",
    text="sents[{index}] must be a list of str tokens, got a {type}.",
    token="sents[{index}][{position}] must be a str token, got {value!r}.",
)


def _checked_output_layer(output_layer: Any, num_layers: int) -> int:
    """`output_layer` as an int in -2, -1, 0 .. num_layers - 1, else one line naming it."""
    try:
        layer = None if isinstance(output_layer, bool) else index(output_layer)
    except TypeError:
        layer = None
    if layer is None or not ALL_LAYERS <= layer < num_layers:
        raise ValueError(
            f"output_layer must be -2 (all layers), -1 (their mean) or 0..{num_layers - 1} (one layer), got "
            f"{output_layer!r}."
        )
    return layer


def efml_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """ELMoForManyLangs' `create_batches` order without its shuffle of the batches: the sentence indices sorted by
    decreasing length (ties in input order), in groups of `batch_size`; a batch's rows in that order."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


class Embedder:
    """
    ELMoForManyLangs' `Embedder`: the biLM of `model_dir` (an ELMoForManyLangs model folder, or a folder converted
    with `elmo-convert` or a Hub id), `batch_size` sentences per batch, on the GPU when one is available (`use_cuda`).

    Every sentence starts from zero LSTM states (what a freshly loaded ELMoForManyLangs `Embedder` computes for a call
    that fits one batch), so a sentence's vectors do not depend on the others. `stateful=True` carries the states as
    ELMoForManyLangs does, from batch to batch and call to call, row by row, with its batches in their sorted order
    (`efml_batches`: its random shuffle of the batch order is not reproduced); `model.encoder.reset_states()` forgets
    them.
    """

    def __init__(self, model_dir: str | os.PathLike, batch_size: int = 64, *, stateful: bool = False) -> None:
        self.batch_size = check_count("batch_size", batch_size)
        self.model_dir = model_dir
        self.stateful = bool(stateful)
        self.model, self.config = self.get_model()

    def get_model(self) -> tuple[EmbedderModel, dict[str, Any]]:
        """Load `model_dir`: returns the model and the architecture JSON (a dict); sets `use_cuda`, the tokenizer and
        `char_lexicon` / `word_lexicon` (token -> ELMoForManyLangs id, `None` without one)."""
        self.use_cuda = torch.cuda.is_available()
        loaded = load_embedder_model(self.model_dir)
        self.tokenizer = loaded.tokenizer
        self.char_lexicon, self.word_lexicon = loaded.char_lexicon, loaded.word_lexicon
        model = EmbedderModel(loaded.model, self.stateful)
        if self.use_cuda:
            model.cuda()
        return model.eval(), loaded.config

    @property
    def num_layers(self) -> int:
        """Layers per word: the token embedding and one per biLM layer."""
        return self.model.elmo.config.num_hidden_layers + 1

    def sents2elmo(self, sents: Iterable[Sequence[str]], output_layer: int = MEAN_OF_LAYERS) -> list[np.ndarray]:
        """
        One float32 array per sentence, in input order: `output_layer=-1` the mean of the layers (len, 2P), `-2` all
        of them (n_layers + 1, len, 2P), `k` layer `k` (len, 2P); 2P is 1024 for the released models. Words longer
        than `max_characters_per_token - 2` characters are cut to that length. An empty sentence gives an empty
        array ((0, 2P), or (n_layers + 1, 0, 2P) for -2) and takes no part in the batches.
        """
        sentences = check_token_lists(sents, SENTENCES_WORDING, SentenceInputError, text_types=Sequence)
        layer = _checked_output_layer(output_layer, self.num_layers)
        batch_size = check_count("batch_size", self.batch_size)
        width = 2 * self.model.elmo.config.projection_dim
        results: list[np.ndarray | None] = [None] * len(sentences)
        for position, sentence in enumerate(sentences):
            if not sentence:
                results[position] = np.zeros((self.num_layers, 0, width), dtype=np.float32)
        running = [position for position, sentence in enumerate(sentences) if sentence]
        for batch in efml_batches([len(sentences[position]) for position in running], batch_size):
            rows = [running[member] for member in batch]
            for position, layers in zip(rows, self._embed_batch([sentences[row] for row in rows]), strict=True):
                results[position] = layers
        return [self._select(layers, layer) for layers in results]

    def _embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """Every layer of each sentence of one batch: (n_layers + 1, len, 2P) float32 each."""
        batch = self.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        device = next(self.model.parameters()).device
        with torch.no_grad():
            layers = self.model(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float().cpu()
        return [layers[:, row, : len(sentence)].numpy() for row, sentence in enumerate(sentences)]

    @staticmethod
    def _select(layers: np.ndarray, output_layer: int) -> np.ndarray:
        if output_layer == MEAN_OF_LAYERS:  # what EFML's np.average computes (which fails on an empty sentence)
            return layers.mean(axis=0)
        if output_layer == ALL_LAYERS:
            return layers
        return layers[output_layer]


__all__ = ["Embedder", "EmbedderModel", "SentenceInputError", "efml_batches"]
