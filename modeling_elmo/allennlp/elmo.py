"""AllenNLP's `Elmo` and `ElmoTokenEmbedder`: scalar mixes of the biLM's layers, with dropout, for a downstream
model."""

import logging
import os

import torch
from torch import nn

from ..conversion.presets import PRESETS
from ..foundation.checks import check_count
from .bilm import _ElmoBiLm
from .boundaries import remove_sentence_boundaries
from .checkpoint import ConfigurationError
from .scalar_mix import ScalarMix

logger = logging.getLogger(__name__)
DEFAULT_OPTIONS_FILE, DEFAULT_WEIGHT_FILE = PRESETS["original"].source_urls()


def _check_arguments(num_output_representations: object, dropout: object, scalar_mix_parameters: object) -> None:
    check_count("num_output_representations", num_output_representations, 0, ConfigurationError)
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0 <= dropout <= 1:
        raise ConfigurationError(f"dropout must be a probability in [0, 1], got {dropout!r}.")
    if scalar_mix_parameters is not None and (
        not isinstance(scalar_mix_parameters, list | tuple)
        or not all(isinstance(value, int | float) and not isinstance(value, bool) for value in scalar_mix_parameters)
    ):
        raise ConfigurationError(f"scalar_mix_parameters must be a list of numbers, got {scalar_mix_parameters!r}.")


class Elmo(nn.Module):
    """
    ELMo representations: `num_output_representations` scalar mixes of the biLM's layers (each with its own
    weights, trainable unless `scalar_mix_parameters` fixes them), with dropout. `forward(inputs)` takes character
    ids (batch, timesteps, 50) from `batch_to_ids` (or more leading dimensions) and returns `{"elmo_representations":
    [(batch, timesteps, 2 * projection_dim)] * num_output_representations, "mask": (batch, timesteps)}`.

    `options_file` and `weight_file` name an original checkpoint (paths or URLs); `weight_file=None` reads a
    converted folder or Hub id from `options_file`. `stateful=False` (keyword only, not in AllenNLP) makes the biLM
    start every call from zero states, so a sentence's vectors no longer depend on earlier batches.
    """

    def __init__(
        self,
        options_file: str | os.PathLike | None,
        weight_file: str | os.PathLike | None,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: list[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: list[float] | None = None,
        module: nn.Module | None = None,
        *,
        stateful: bool = True,
    ) -> None:
        super().__init__()
        _check_arguments(num_output_representations, dropout, scalar_mix_parameters)
        if module is not None:
            if options_file is not None or weight_file is not None:
                raise ConfigurationError("Don't provide options_file or weight_file with module.")
            self._elmo_lstm = module
        else:
            self._elmo_lstm = _ElmoBiLm(
                options_file,
                weight_file,
                requires_grad=requires_grad,
                vocab_to_cache=vocab_to_cache,
                stateful=stateful,
            )
        num_layers = self._elmo_lstm.num_layers
        if scalar_mix_parameters is not None and len(scalar_mix_parameters) != num_layers:
            raise ConfigurationError(
                f"scalar_mix_parameters has {len(scalar_mix_parameters)} values, but the biLM has {num_layers} "
                "layers to mix."
            )
        self._has_cached_vocab = vocab_to_cache is not None
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = nn.Dropout(p=dropout)
        self._scalar_mixes = []
        for index in range(num_output_representations):
            scalar_mix = ScalarMix(
                num_layers,
                do_layer_norm=do_layer_norm,
                initial_scalar_parameters=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
            )
            self.add_module(f"scalar_mix_{index}", scalar_mix)
            self._scalar_mixes.append(scalar_mix)

    def get_output_dim(self) -> int:
        return self._elmo_lstm.get_output_dim()

    def reset_states(self) -> None:
        """Forget the biLM's LSTM states (a stateful `Elmo` then continues as if new)."""
        self._elmo_lstm.reset_states()

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        """
        `inputs` (..., timesteps, 50) character ids; `word_inputs` (..., timesteps) word ids into `vocab_to_cache`.
        Returns `{"elmo_representations": [(..., timesteps, dim)], "mask": (..., timesteps)}` (timesteps + 2 with
        `keep_sentence_boundaries`).
        """
        if not isinstance(inputs, torch.Tensor) or inputs.dim() < 3:
            shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise ConfigurationError(f"inputs must be character ids shaped (batch_size, timesteps, 50), got {shape}.")
        original_shape = inputs.shape
        reshaped_inputs = inputs.reshape(-1, *original_shape[-2:]) if inputs.dim() > 3 else inputs
        reshaped_word_inputs = None
        if word_inputs is not None:
            if not isinstance(word_inputs, torch.Tensor):
                raise ConfigurationError(f"word_inputs must be a torch.Tensor, got {type(word_inputs).__name__}.")
            if not self._has_cached_vocab:
                logger.warning("Word inputs were passed to ELMo but it does not have a cached vocab.")
            elif word_inputs.dim() > 2:
                reshaped_word_inputs = word_inputs.reshape(-1, word_inputs.shape[-1])
            else:
                reshaped_word_inputs = word_inputs
        bilm_output = self._elmo_lstm(reshaped_inputs, reshaped_word_inputs)
        layers, mask_with_bos_eos = bilm_output["activations"], bilm_output["mask"]

        representations = []
        for scalar_mix in self._scalar_mixes:
            representation, mask = scalar_mix(layers, mask_with_bos_eos), mask_with_bos_eos
            if not self._keep_sentence_boundaries:
                representation, mask = remove_sentence_boundaries(representation, mask)
            representations.append(self._dropout(representation))
        if not self._scalar_mixes:  # AllenNLP fails here; the mask is still well defined
            mask = mask_with_bos_eos if self._keep_sentence_boundaries else mask_with_bos_eos[:, 2:]

        if word_inputs is not None and word_inputs.dim() > 2:
            leading = word_inputs.shape
        elif inputs.dim() > 3:
            leading = original_shape[:-1]
        else:
            return {"elmo_representations": representations, "mask": mask}
        return {
            "elmo_representations": [representation.view(*leading, -1) for representation in representations],
            "mask": mask.view(leading),
        }


class ElmoTokenEmbedder(nn.Module):
    """
    One ELMo representation (`Elmo` with `num_output_representations=1`), optionally projected to `projection_dim`:
    `forward(elmo_tokens)` -> (batch, timesteps, `get_output_dim()`).
    """

    def __init__(
        self,
        options_file: str | os.PathLike = DEFAULT_OPTIONS_FILE,
        weight_file: str | os.PathLike | None = DEFAULT_WEIGHT_FILE,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        requires_grad: bool = False,
        projection_dim: int | None = None,
        vocab_to_cache: list[str] | None = None,
        scalar_mix_parameters: list[float] | None = None,
        *,
        stateful: bool = True,
    ) -> None:
        super().__init__()
        if projection_dim is not None and (type(projection_dim) is not int or projection_dim < 0):
            raise ConfigurationError(f"projection_dim must be a positive int or None, got {projection_dim!r}.")
        self._elmo = Elmo(
            options_file,
            weight_file,
            1,
            do_layer_norm=do_layer_norm,
            dropout=dropout,
            requires_grad=requires_grad,
            vocab_to_cache=vocab_to_cache,
            scalar_mix_parameters=scalar_mix_parameters,
            stateful=stateful,
        )
        if projection_dim:
            self._projection = nn.Linear(self._elmo.get_output_dim(), projection_dim)
            self.output_dim = projection_dim
        else:
            self._projection = None
            self.output_dim = self._elmo.get_output_dim()

    def get_output_dim(self) -> int:
        return self.output_dim

    def reset_states(self) -> None:
        """Forget the biLM's LSTM states."""
        self._elmo.reset_states()

    def forward(self, elmo_tokens: torch.Tensor, word_inputs: torch.Tensor | None = None) -> torch.Tensor:
        representation = self._elmo(elmo_tokens, word_inputs)["elmo_representations"][0]
        return representation if self._projection is None else self._projection(representation)
