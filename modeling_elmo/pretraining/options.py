"""bilm-tf's training options (the dict `bilm.training.train` takes, e.g. in `bin/train_elmo.py`) as
`PretrainingOptions`: the model's `ElmoConfig` and the training settings.

Keys read (everything else is ignored, as bilm-tf ignores it):
- `char_cnn` and `lstm`: the architecture, read and checked by the converter's `config_from_options` (so the same
  options file trains and converts). `char_cnn.n_characters` may be 261 (bilm-tf's training files) or 262.
- `dropout`, `all_clip_norm_val`, `n_epochs`, `batch_size`, `unroll_steps`, `n_negative_samples_batch`,
  `n_tokens_vocab` (required); `n_train_tokens` (optional).
- `bidirectional` (optional; must be `true`: only biLMs are trained), `sample_softmax` (optional, default `true`;
  `false` trains with the full softmax, and then `n_negative_samples_batch` may be left out),
  `share_embedding_softmax` (optional; must be false, as bilm-tf requires for character input).
Every missing key, wrong type or out-of-range value raises `PretrainingOptionsError` naming the file and the key.
JSON booleans must be `true`/`false` and integers must be integers (`128`, not `128.0` or `true`).
"""

import dataclasses
import math
import os
from typing import Any

from ..configuration_elmo import ElmoConfig, ElmoConfigError, Rule
from ..formats.original_checkpoint import OriginalCheckpointError, config_from_options, json_excerpt, read_options_json
from ..foundation.errors import ToolInputError


class PretrainingOptionsError(ToolInputError, ValueError):
    """A training options file or dict that cannot be used: the message names the file and the key."""


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


_POSITIVE_INT = Rule("a positive integer", lambda value: _is_int(value) and value >= 1)
_BOOLEAN = Rule("a boolean", lambda value: type(value) is bool)
_MISSING = object()

# Training keys: rule, and whether the key is optional.
_TRAINING_KEYS: dict[str, tuple[Rule, bool]] = {
    "dropout": (Rule("a number from 0 up to (not including) 1", lambda v: _is_number(v) and 0 <= v < 1), False),
    "all_clip_norm_val": (Rule("a positive number", lambda value: _is_number(value) and value > 0), False),
    "n_epochs": (_POSITIVE_INT, False),
    "batch_size": (_POSITIVE_INT, False),
    "unroll_steps": (_POSITIVE_INT, False),
    "n_negative_samples_batch": (_POSITIVE_INT, False),
    "n_tokens_vocab": (
        Rule("an integer >= 3 (the vocabulary holds <S>, </S> and <UNK>)", lambda v: _is_int(v) and v >= 3),
        False,
    ),
    "n_train_tokens": (dataclasses.replace(_POSITIVE_INT, nullable=True), True),
    "bidirectional": (_BOOLEAN, True),
    "sample_softmax": (_BOOLEAN, True),
    "share_embedding_softmax": (_BOOLEAN, True),
}
# The new ElmoConfig fields and the option each comes from (for the messages of the config's own checks).
_CONFIG_FIELDS = {
    "lm_vocab_size": "n_tokens_vocab",
    "lm_dropout": "dropout",
    "lm_num_negative_samples": "n_negative_samples_batch",
}


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """
    bilm-tf's training options, checked.

    Args:
        config (`ElmoConfig`): The model: architecture from `char_cnn`/`lstm`, plus `lm_vocab_size` (`n_tokens_vocab`),
            `lm_dropout` (`dropout`) and `lm_num_negative_samples` (`n_negative_samples_batch`, `None` for the full
            softmax when `sample_softmax` is false).
        n_characters (`int`): `char_cnn.n_characters` as given (261 or 262), written back by `to_dict`.
        dropout (`float`): Dropout of the biLM (bilm-tf: on the LSTM inputs and outputs).
        all_clip_norm_val (`float`): Gradient clipping by global norm.
        n_epochs (`int`), batch_size (`int`), unroll_steps (`int`): The training schedule and batch shape
            (batch_size rows per process, windows of unroll_steps positions).
        n_negative_samples_batch (`int`, *optional*): Negatives of the sampled softmax per batch (`None` only
            when `sample_softmax` is false and the key is absent).
        n_tokens_vocab (`int`): Size of the word vocabulary (the softmax).
        n_train_tokens (`int`, *optional*): Input positions of the corpus, for the epoch length.
        sample_softmax (`bool`): Train with the sampled softmax (bilm-tf's default) or the full softmax.
    """

    config: ElmoConfig
    n_characters: int
    dropout: float
    all_clip_norm_val: float
    n_epochs: int
    batch_size: int
    unroll_steps: int
    n_negative_samples_batch: int | None
    n_tokens_vocab: int
    n_train_tokens: int | None = None
    sample_softmax: bool = True

    @property
    def max_characters_per_token(self) -> int:
        return self.config.max_characters_per_token

    @classmethod
    def from_dict(cls, options: dict, source: str = "options") -> "PretrainingOptions":
        """Check bilm-tf's training options dict (read from `source`, named in the messages)."""
        if not isinstance(options, dict):
            raise PretrainingOptionsError(
                f"{source}: the training options must be a JSON object, got {json_excerpt(options)}"
            )
        values = {}
        for key, (rule, _) in _TRAINING_KEYS.items():
            value = options.get(key, _MISSING)
            if value is _MISSING:
                values[key] = None
                continue
            problem = rule.problem(value, nullable=rule.nullable, null="null", shown=json_excerpt(value))
            if problem:
                raise PretrainingOptionsError(f"{source}: {key} {problem}")
            values[key] = value
        if values["bidirectional"] is False:
            raise PretrainingOptionsError(
                f"{source}: bidirectional is false, but elmo-pretrain trains bidirectional LMs only (ELMo is a biLM); "
                "remove the key or set it to true."
            )
        if "char_cnn" not in options:
            raise PretrainingOptionsError(
                f"{source}: no 'char_cnn' section: these are the options of a token-input (word-embedding) LM, but "
                "elmo-pretrain trains character-input biLMs only; add a 'char_cnn' section (see bilm-tf's "
                "bin/train_elmo.py)."
            )
        if values["share_embedding_softmax"]:
            raise PretrainingOptionsError(
                f"{source}: share_embedding_softmax must be false: a character-input biLM has no word embedding to "
                "share with the softmax (bilm-tf refuses it too)."
            )
        sample_softmax = values["sample_softmax"] is not False
        for key, (_, optional) in _TRAINING_KEYS.items():
            needed = not optional and (key != "n_negative_samples_batch" or sample_softmax)
            if needed and values[key] is None:
                raise PretrainingOptionsError(f"{source}: missing key '{key}' in the training options.")
        negatives, n_tokens_vocab = values["n_negative_samples_batch"], values["n_tokens_vocab"]
        if sample_softmax and negatives > n_tokens_vocab:
            raise PretrainingOptionsError(
                f"{source}: n_negative_samples_batch ({negatives}) must not exceed n_tokens_vocab ({n_tokens_vocab}): "
                "the negatives are distinct words; lower it, or set sample_softmax to false for the full softmax."
            )
        try:
            config = config_from_options(options, source=source)
        except OriginalCheckpointError as error:
            raise PretrainingOptionsError(str(error)) from None
        new_fields = {
            "lm_vocab_size": n_tokens_vocab,
            "lm_dropout": values["dropout"],
            "lm_num_negative_samples": negatives if sample_softmax else None,
        }
        for name, value in new_fields.items():
            try:
                setattr(config, name, value)
            except ElmoConfigError as error:
                raise PretrainingOptionsError(f"{source}: {_CONFIG_FIELDS[name]} {error.problem}") from None
        return cls(
            config=config,
            n_characters=options["char_cnn"]["n_characters"],
            dropout=values["dropout"],
            all_clip_norm_val=values["all_clip_norm_val"],
            n_epochs=values["n_epochs"],
            batch_size=values["batch_size"],
            unroll_steps=values["unroll_steps"],
            n_negative_samples_batch=negatives,
            n_tokens_vocab=n_tokens_vocab,
            n_train_tokens=values["n_train_tokens"],
            sample_softmax=sample_softmax,
        )

    def to_dict(self) -> dict[str, Any]:
        """The options in bilm-tf's training layout (what `from_dict` reads back to equal options)."""
        config = self.config
        lstm = {
            "dim": config.lstm_cell_size,
            "projection_dim": config.projection_dim,
            "n_layers": config.num_hidden_layers,
            "use_skip_connections": config.use_skip_connections,
        }
        for key, value in (("cell_clip", config.cell_clip), ("proj_clip", config.proj_clip)):
            if value is not None:  # absent means no clipping in bilm-tf
                lstm[key] = value
        options = {
            "bidirectional": True,
            "char_cnn": {
                "activation": config.char_activation,
                "embedding": {"dim": config.char_embedding_dim},
                "filters": [list(spec) for spec in config.char_filters],
                "max_characters_per_token": config.max_characters_per_token,
                "n_characters": self.n_characters,
                "n_highway": config.num_highway_layers,
            },
            "dropout": self.dropout,
            "lstm": dict(sorted(lstm.items())),
            "all_clip_norm_val": self.all_clip_norm_val,
            "n_epochs": self.n_epochs,
            "batch_size": self.batch_size,
            "n_tokens_vocab": self.n_tokens_vocab,
            "unroll_steps": self.unroll_steps,
        }
        if self.n_negative_samples_batch is not None:
            options["n_negative_samples_batch"] = self.n_negative_samples_batch
        if not self.sample_softmax:
            options["sample_softmax"] = False
        if self.n_train_tokens is not None:
            options["n_train_tokens"] = self.n_train_tokens
        return options


def read_pretraining_options(path: str | os.PathLike) -> PretrainingOptions:
    """Read bilm-tf's training options JSON file (UTF-8, with or without a byte-order mark)."""
    source = os.fspath(path)
    if os.path.isdir(source):
        raise PretrainingOptionsError(f"{source}: is a directory, not an options JSON file.")
    if not os.path.exists(source):
        raise PretrainingOptionsError(f"{source}: options file not found.")
    options = read_options_json(source, PretrainingOptionsError)
    return PretrainingOptions.from_dict(options, source=source)
