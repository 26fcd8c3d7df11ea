"""
simple_elmo's `ElmoModel` (`simple_elmo/elmo_helpers.py`, release 0.9.2) on this project's biLM: `load`,
`get_elmo_vectors` and `get_elmo_vector_average` with its signatures, shapes, float64 outputs and numbers.

The rules it reproduces, as simple_elmo runs bilm-tf:
- every call starts from zero LSTM states (simple_elmo opens a new TensorFlow session per call);
- a call runs its texts in chunks of `max_batch_size`, in order; the states live in `max_batch_size` rows, and row
  `r` of a chunk continues from row `r` of the chunk before (a smaller last chunk uses the first rows; the states
  of the rows it leaves out are kept, as bilm-tf's state variables are);
- `warmup=True` first runs the first chunk once and discards its outputs (only its states remain);
- the layers of a chunk span its longest text: at a shorter text's padded positions the LSTM layers are zero and
  layer 0 holds the character CNN's output for a padded word (bilm-tf masks nothing there), while positions beyond
  the chunk's longest text, up to the call's longest text, are zero;
- `layers="average"` is the plain mean of the layers, `"top"` the last one, `"all"` every one;
- `get_elmo_vector_average` averages a text's vectors over its chunk's padded length, then divides by their L2 norm.
"""

import logging
import os
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ..foundation.checks import TokenListWording, check_count, check_token_lists
from ..lstm_states import ElmoLstmStates
from .characters import SPECIAL_TOKENS_ONLY, SimpleElmoCharacters, cached_words
from .errors import SimpleElmoError
from .model_files import load_model_files

logger = logging.getLogger(__name__)

LAYER_CHOICES = ("average", "top", "all")
NO_SOFTMAX = (
    "needs a TensorFlow training checkpoint with the language model's softmax (simple_elmo's load(full=True)); "
    "this drop-in reads the HDF5 weights, which hold no softmax, so it has no get_elmo_substitutes."
)


TEXTS_WORDING = TokenListWording(
    batch="texts must be a list of texts, each a list of tokens (e.g. [sentence.split()]), got {type}.",
    batch_is_str="texts must be a list of texts, each a list of tokens (e.g. [sentence.split()]), got a str.",
    text_is_str="texts[{index}] is a str, not a list of tokens (simple_elmo would read each character as a word): "
    "pass text.split() or your tokenizer's tokens.",
    text="texts[{index}] must be a list of str tokens, got {type}.",
    token="texts[{index}][{position}] must be a str token, got {type}.",
)


def check_texts(texts: object) -> list[list[str]]:
    """`texts` as a list of texts, each a list (or tuple) of str tokens; refused in one line otherwise (simple_elmo
    reads a str as a sequence of one-character tokens)."""
    checked = check_token_lists(texts, TEXTS_WORDING, SimpleElmoError, batch_types=Sequence)
    if not checked:
        raise SimpleElmoError("texts is empty: give at least one text (a list of tokens).")
    return checked


class ElmoModel:
    """
    simple_elmo's `ElmoModel`: `model = ElmoModel(); model.load(directory)`, then `model.get_elmo_vectors(texts)` or
    `model.get_elmo_vector_average(texts)`, texts being lists of tokens. After `load`, `bilm` is the project's
    [`ElmoModel`] (the torch module), and `batch_size`, `max_chars`, `vector_size` and `n_layers` are set as in
    simple_elmo.
    """

    def __init__(self) -> None:
        self.bilm = None
        self.batch_size: int | None = None
        self.max_chars: int | None = None
        self.vector_size: int | None = None
        self.n_layers: int | None = None
        self.stateful = True
        self.default_layers = "average"
        self._characters: SimpleElmoCharacters | None = None
        self._padding_embedding: torch.Tensor | None = None

    def load(
        self,
        directory: str | os.PathLike,
        max_batch_size: int = 32,
        limit: int | None = 100,
        full: bool = False,
        *,
        top: bool | None = None,
        stateful: bool = True,
    ) -> str:
        """
        Load the model of `directory` (see `model_files`): a folder, a `.zip` archive, a converted folder or a Hub id.
        `max_batch_size`: texts per chunk (and rows of LSTM states); `limit`: how many words of the vocabulary to
        cache (`characters`). `full=True` (a TensorFlow checkpoint with the softmax) is refused. `top` is the
        argument of simple_elmo before 0.6 (accepted with a warning: `top=True` makes `layers="top"` the default);
        `stateful=False` (new) runs every chunk from zero states.
        """
        check_count(
            "max_batch_size",
            max_batch_size,
            1,
            SimpleElmoError,
            " (simple_elmo before 0.6 took top as the second argument: pass layers='top' to the methods instead.)"
            if isinstance(max_batch_size, bool)
            else "",
        )
        if limit is not None and type(limit) is not int:
            raise SimpleElmoError(f"limit must be an int (or None: the whole vocabulary), got {limit!r}.")
        if full:
            raise NotImplementedError(f"load(full=True) {NO_SOFTMAX}")
        if type(stateful) is not bool:
            raise SimpleElmoError(f"stateful must be True or False, got {stateful!r}.")
        default_layers = "average" if top is None else self._pre_06_default_layers(top)
        loaded = load_model_files(directory)
        config = loaded.bilm.config
        self.max_chars = config.max_characters_per_token
        try:
            lines = loaded.vocabulary_lines() if loaded.vocabulary_lines else SPECIAL_TOKENS_ONLY
            self._characters = SimpleElmoCharacters(cached_words(lines, limit), self.max_chars)
        except (ValueError, OSError, EOFError) as error:  # UnicodeDecodeError is a ValueError
            raise SimpleElmoError(f"{loaded.vocabulary_name}: cannot read the vocabulary ({error}).") from None
        self.bilm = loaded.bilm
        self.batch_size, self.stateful, self.default_layers = max_batch_size, stateful, default_layers
        self.vector_size = 2 * config.projection_dim
        self.n_layers = config.num_hidden_layers + 1
        with torch.inference_mode():  # bilm-tf's layer 0 at a padded word: the CNN of an all-zero character row
            padded_word = self.bilm.char_encoder(torch.zeros(1, self.max_chars, dtype=torch.long))[0]
        self._padding_embedding = torch.cat([padded_word, padded_word])
        logger.info("Loaded the model of %s.", os.fspath(directory))
        return "The model is now loaded."

    @staticmethod
    def _pre_06_default_layers(top: object) -> str:
        """The `layers` of calls without one after simple_elmo's pre-0.6 `load(top=...)`, with a warning."""
        if type(top) is not bool:
            raise SimpleElmoError(f"top must be True or False, got {top!r}.")
        layers = "top" if top else "average"
        warnings.warn(
            f"load(top={top}) is simple_elmo's API before 0.6 (0.9.2 rejects it): calls without layers= return "
            f"the {'top layer' if top else 'average of the layers'}, as they did then. Pass layers={layers!r} to "
            "get_elmo_vectors / get_elmo_vector_average instead.",
            FutureWarning,
            stacklevel=3,
        )
        return layers

    def _check_call(self, warmup: object, layers: object, session: object) -> str:
        """Refuse arguments simple_elmo cannot take or that make no sense here; `layers` with its default."""
        if self.bilm is None:
            raise SimpleElmoError("No model loaded: call load(directory) first.")
        if session is not None:
            raise SimpleElmoError(
                "session= takes a TensorFlow session, and there is none here: leave it out (each call starts from "
                "zero LSTM states, as a call without a session does in simple_elmo)."
            )
        if type(warmup) is not bool:
            raise SimpleElmoError(f"warmup must be True or False, got {warmup!r}.")
        layers = self.default_layers if layers is None else layers
        if layers not in LAYER_CHOICES:
            raise SimpleElmoError(f"layers must be one of {', '.join(map(repr, LAYER_CHOICES))}, got {layers!r}.")
        return layers

    def _chunk_layers(self, texts: list[Sequence[str]], warmup: bool) -> Iterator[tuple[int, torch.Tensor]]:
        """Per chunk of `batch_size` texts, its first row and its layers (texts, n_layers, longest text of the chunk,
        vector_size), float32, run as simple_elmo runs them (module docstring)."""
        states = ElmoLstmStates(self.bilm.config)
        if warmup and self.stateful:  # stateless, the warm-up would change nothing
            self._layers(texts[: self.batch_size], states)
        for start in range(0, len(texts), self.batch_size):
            chunk_states = states if self.stateful else ElmoLstmStates(self.bilm.config)
            yield start, self._layers(texts[start : start + self.batch_size], chunk_states)

    def _layers(self, chunk: list[Sequence[str]], states: ElmoLstmStates) -> torch.Tensor:
        """The layers of one chunk (see `_chunk_layers`), continuing from `states` (updated)."""
        char_ids = self._characters(chunk)
        lengths = torch.tensor([len(text) for text in chunk])
        mask = torch.arange(char_ids.shape[1]) < lengths[:, None]  # (texts, longest)
        with torch.inference_mode():
            output = self.bilm(char_ids, attention_mask=mask, output_hidden_states=True, states=states)
            layers = torch.stack(output.hidden_states, dim=1)
            layers[:, 0] = torch.where(mask[..., None], layers[:, 0], self._padding_embedding)
        return layers

    @staticmethod
    def _selected(layers: torch.Tensor, choice: str) -> torch.Tensor:
        """(texts, n_layers, words, dim) -> the `layers` choice: (texts, words, dim), or all of them for "all"."""
        if choice == "top":
            return layers[:, -1]
        if choice == "average":
            return layers.mean(dim=1)
        return layers

    def get_elmo_vectors(
        self, texts: list[list[str]], warmup: bool = True, layers: str | None = None, session: None = None
    ) -> np.ndarray:
        """
        The vectors of every token: float64 (texts, longest text, vector_size), or (texts, n_layers, longest text,
        vector_size) for `layers="all"`. `layers`: "average" (default; "top" after `load(top=True)`), "top" or "all".
        `session` exists for simple_elmo's signature and must stay `None`.
        """
        layers = self._check_call(warmup, layers, session)
        texts = check_texts(texts)
        longest = max(len(text) for text in texts)
        layer_axis = (self.n_layers,) if layers == "all" else ()
        vectors = np.zeros((len(texts), *layer_axis, longest, self.vector_size))
        for start, chunk_layers in self._chunk_layers(texts, warmup):
            selected = self._selected(chunk_layers, layers)
            vectors[start : start + selected.shape[0], ..., : selected.shape[-2], :] = selected.numpy()
        return vectors

    def get_elmo_vector_average(
        self, texts: list[list[str]], warmup: bool = True, layers: str | None = None, session: None = None
    ) -> np.ndarray:
        """
        One L2-normalised vector per text: float64 (texts, vector_size), the mean of its chunk's vectors over the
        chunk's padded length divided by its norm; for `layers="all"` (texts, n_layers, vector_size), made as
        simple_elmo makes it: each chunk's (texts, n_layers, words, dim) is *reshaped* (not transposed) to (texts,
        words, n_layers, dim), averaged over the second axis and divided by the norm of the whole (n_layers, dim).
        A text whose averaged vector is zero (no words, and no padded layer 0 in its chunk) gets NaNs, as in
        simple_elmo, with a `RuntimeWarning`.
        """
        layers = self._check_call(warmup, layers, session)
        texts = check_texts(texts)
        averages = []
        for _, chunk_layers in self._chunk_layers(texts, warmup):
            vectors = self._selected(chunk_layers, layers).double().numpy()
            if layers == "all":
                vectors = vectors.reshape(vectors.shape[0], vectors.shape[2], self.n_layers, self.vector_size)
            with np.errstate(invalid="ignore", divide="ignore"):
                means = vectors.sum(axis=1) / vectors.shape[1]
                norms = np.linalg.norm(means.reshape(means.shape[0], -1), axis=1)
                averages.append(means / norms.reshape(-1, *[1] * (means.ndim - 1)))
        averages = np.concatenate(averages)
        undefined = np.isnan(averages.reshape(len(texts), -1)).any(axis=1).nonzero()[0]
        if len(undefined):
            warnings.warn(
                f"texts[{undefined[0]}] ({len(undefined)} text(s) in all) averages to a zero vector, so its "
                "normalised average is NaN, as in simple_elmo (a text without words).",
                RuntimeWarning,
                stacklevel=2,
            )
        return averages

    def get_elmo_substitutes(self, data: object, topn: int = 3, nodelimiters: bool = True) -> None:
        """Refused: see `NO_SOFTMAX`."""
        raise NotImplementedError(f"get_elmo_substitutes {NO_SOFTMAX}")
