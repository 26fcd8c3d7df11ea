"""AllenNLP's `_ElmoCharacterEncoder` and `_ElmoBiLm` over the project's `ElmoModel`: the same engine and weights,
AllenNLP's inputs (character ids from `batch_to_ids`), outputs (with `<S>`/`</S>`) and statefulness."""

import logging
import os

import torch
from torch import nn

from ..lstm_states import ElmoLstmStates
from ..modeling_elmo import ElmoModel
from .boundaries import add_sentence_boundary_token_ids
from .characters import batch_to_ids
from .checkpoint import ConfigurationError, load_elmo_model

logger = logging.getLogger(__name__)
NUM_CHARACTER_IDS = 262  # 0 (padding) and the 261 characters of the original vocabulary, +1 shifted


def check_character_ids(name: str, ids: object, max_characters: int) -> torch.Tensor:
    """Refuse character ids that are not an integer tensor (batch, timesteps, `max_characters`) of values in
    [0, 262) whose rows are right-padded (no word after a padded one)."""
    if not isinstance(ids, torch.Tensor):
        raise ConfigurationError(f"{name} must be a torch.Tensor of character ids, got {type(ids).__name__}.")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ConfigurationError(f"{name} must hold integer character ids (torch.long), got dtype {ids.dtype}.")
    if ids.dim() != 3 or ids.shape[-1] != max_characters:
        raise ConfigurationError(
            f"{name} must have shape (batch_size, timesteps, {max_characters}), got {tuple(ids.shape)}."
        )
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= NUM_CHARACTER_IDS):
        raise ConfigurationError(f"{name} must hold ids in [0, {NUM_CHARACTER_IDS - 1}] (see batch_to_ids).")
    is_word = (ids > 0).any(dim=-1)
    holes = is_word[:, 1:] & ~is_word[:, :-1]
    if holes.any():
        row = int(holes.any(dim=1).nonzero()[0])
        raise ConfigurationError(f"{name} row {row} has a padded word before a real one: rows must be right-padded.")
    return ids


class _ElmoCharacterEncoder(nn.Module):
    """
    Context-independent token embeddings: character ids (batch, timesteps, 50) -> `{"token_embedding": (batch,
    timesteps + 2, projection_dim), "mask": (batch, timesteps + 2)}` with `<S>` and `</S>` added around each row.
    Padded positions hold the CNN of an all-padding word, as in AllenNLP (the mask tells them apart).
    """

    def __init__(self, options_file: str, weight_file: str | None, requires_grad: bool = False) -> None:
        super().__init__()
        self._setup(load_elmo_model(options_file, weight_file), requires_grad)

    @classmethod
    def of_model(cls, model: ElmoModel, requires_grad: bool) -> "_ElmoCharacterEncoder":
        """The character encoder of a loaded `model` (sharing its weights)."""
        encoder = cls.__new__(cls)
        nn.Module.__init__(encoder)
        encoder._setup(model, requires_grad)
        return encoder

    def _setup(self, model: ElmoModel, requires_grad: bool) -> None:
        self.char_encoder = model.char_encoder.requires_grad_(requires_grad)
        self.output_dim = model.config.projection_dim
        self.max_characters = model.config.max_characters_per_token
        self.requires_grad = requires_grad

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(self, inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        check_character_ids("inputs", inputs, self.max_characters)
        mask = (inputs > 0).sum(dim=-1) > 0
        begin, end = self.char_encoder.boundary_char_ids(inputs.device)  # the model's `<S>` and `</S>` rows
        ids, mask = add_sentence_boundary_token_ids(inputs, mask, begin, end)
        embeddings = self.char_encoder(ids.flatten(0, 1))  # (batch * (timesteps + 2), projection_dim)
        return {"mask": mask, "token_embedding": embeddings.view(*ids.shape[:2], -1)}


class _ElmoBiLm(nn.Module):
    """
    The biLM's layers for AllenNLP's `Elmo`: character ids (batch, timesteps, 50) [and word ids (batch, timesteps)
    with `vocab_to_cache`] -> `{"activations": num_layers tensors (batch, timesteps + 2, 2 * projection_dim),
    "mask": (batch, timesteps + 2)}`, `<S>` and `</S>` included; layer 0 is the token embedding twice, `[x; x]`.

    Stateful like AllenNLP: `states` (an `ElmoLstmStates`, passed to the model on every call) gives each batch row the
    LSTM states that row left in the previous call, with AllenNLP's row rules; `stateful=False` makes every call start
    from zero states instead. `reset_states()` forgets them.
    """

    def __init__(
        self,
        options_file: str | os.PathLike | None,
        weight_file: str | os.PathLike | None,
        requires_grad: bool = False,
        vocab_to_cache: list[str] | None = None,
        *,
        stateful: bool = True,
    ) -> None:
        super().__init__()
        self.model = load_elmo_model(options_file, weight_file)
        self.model.requires_grad_(requires_grad)
        self.states = ElmoLstmStates(self.model.config) if stateful else None
        # a view of the model's character encoder, kept out of the module tree so that its weights are listed once
        self.__dict__["_token_embedder"] = _ElmoCharacterEncoder.of_model(self.model, requires_grad)
        self.num_layers = self.model.config.num_hidden_layers + 1
        self.register_buffer("_word_char_ids", None, persistent=False)
        if vocab_to_cache:
            if requires_grad:
                logger.warning("Fine-tuning ELMo with vocab_to_cache: cached words are recomputed from characters.")
            self.create_cached_cnn_embeddings(vocab_to_cache)

    @property
    def stateful(self) -> bool:
        return self.states is not None

    @property
    def _elmo_lstm(self) -> "_ElmoBiLm":
        """AllenNLP's stateful LSTM (`bilm._elmo_lstm.reset_states()` in legacy code): the biLM itself."""
        return self

    def get_output_dim(self) -> int:
        return 2 * self.model.config.projection_dim

    def reset_states(self, mask: torch.Tensor | None = None) -> None:
        """Forget the LSTM states of every row, or of the rows where `mask` (batch,) is True."""
        if self.states is None:
            return
        if mask is None:
            self.states.reset()
            return
        if not self.states.num_rows:
            raise ConfigurationError("reset_states(mask): there are no LSTM states yet (no batch has run).")
        if not isinstance(mask, torch.Tensor) or mask.dim() != 1 or mask.shape[0] != self.states.num_rows:
            shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ConfigurationError(
                f"reset_states(mask): mask must have shape ({self.states.num_rows},), the batch size of the stored "
                f"states, got {shape}."
            )
        self.states.reset(mask.bool())

    def create_cached_cnn_embeddings(self, tokens: list[str]) -> None:
        """Accept word ids (index into `tokens`; 0 is padding) as `word_inputs` from now on."""
        if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
            raise ConfigurationError("vocab_to_cache must be a list of str.")
        self._word_char_ids = batch_to_ids([tokens])[0].to(self.model.device)

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        max_characters = self.model.config.max_characters_per_token
        check_character_ids("inputs", inputs, max_characters)
        char_ids = inputs
        if self._word_char_ids is not None and word_inputs is not None:
            char_ids = self._cached_word_char_ids(inputs, word_inputs)
        mask = (char_ids > 0).any(dim=-1)
        output = self.model(
            char_ids,
            attention_mask=mask,
            output_hidden_states=True,
            states=self.states,
            keep_sentence_boundaries=True,
            return_dict=True,
        )
        num_tokens = mask.sum(dim=1, keepdim=True) + 2
        mask_with_bos_eos = torch.arange(mask.shape[1] + 2, device=mask.device) < num_tokens
        return {"activations": list(output.hidden_states), "mask": mask_with_bos_eos}

    def _cached_word_char_ids(self, inputs: torch.Tensor, word_inputs: torch.Tensor) -> torch.Tensor:
        """The character ids of the cached words `word_inputs` (0: padding); AllenNLP's fallback, `inputs`, when a
        word id is out of the cache's range."""
        if not isinstance(word_inputs, torch.Tensor) or word_inputs.dtype.is_floating_point:
            raise ConfigurationError("word_inputs must be a torch.Tensor of integer word ids.")
        if word_inputs.shape != inputs.shape[:-1]:
            raise ConfigurationError(
                f"word_inputs has shape {tuple(word_inputs.shape)}, but inputs (character ids) have shape "
                f"{tuple(inputs.shape)}: word_inputs must be {tuple(inputs.shape[:-1])}."
            )
        vocab_size = self._word_char_ids.shape[0]
        if word_inputs.numel() and (int(word_inputs.min()) < 0 or int(word_inputs.max()) >= vocab_size):
            return inputs  # AllenNLP looks the words up, fails, and runs the CNN on the characters
        is_word = (word_inputs > 0).unsqueeze(-1)
        char_ids = torch.where(is_word, self._word_char_ids[word_inputs], 0)
        return check_character_ids("word_inputs", char_ids, char_ids.shape[-1])
