"""Read an original ELMo checkpoint (bilm-tf / AllenNLP options JSON + HDF5 weights) into an `ElmoConfig` and a
state dict of `ElmoModel` parameter names, and bilm-tf's LM softmax (`softmax.hdf5`); and write the options and
weight files of that format (`elmo-export`). Every problem is reported as `OriginalCheckpointError` naming the file,
the JSON key or the HDF5 dataset."""

import contextlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import h5py
import numpy as np
import torch

from ..configuration_elmo import FIELD_RULES, ElmoConfig, ElmoConfigError, Rule
from ..foundation.errors import ToolError
from ..foundation.output_folder import reason_of

N_CHARACTERS = 262  # `char_cnn.n_characters` of the released options files (261 rows in the HDF5 plus padding)
LSTM_CELL_PATH = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
# Datasets in the model's own groups. One that the options leave unread means the options and the weights disagree
# (more layers, highway layers or filters than the options say); anything else in the file is ignored.
MODEL_DATASET = re.compile(r"^(char_embed|CNN|RNN_)")


class OriginalCheckpointError(ToolError, ValueError):
    """An original options file or weight file that cannot be converted."""


_MISSING = object()


class Option(NamedTuple):
    """A key of the options JSON, the `ElmoConfig` field it sets (checked with that field's rule) and its default
    (none: the key is required). A key that sets no field (`field=None`) carries its own `rule`."""

    key: str
    field: str | None
    default: Any = _MISSING
    rule: Rule | None = None


# bilm-tf trains with 261 characters and runs with 262 (a padding character); the HDF5 has 261 rows either way.
_N_CHARACTERS = Rule("261 or 262", lambda value: type(value) is int and value in (261, 262))
OPTIONS = (
    Option("lstm.dim", "lstm_cell_size"),
    Option("lstm.projection_dim", "projection_dim"),
    Option("lstm.n_layers", "num_hidden_layers"),
    Option("lstm.cell_clip", "cell_clip", default=None),
    Option("lstm.proj_clip", "proj_clip", default=None),
    Option("lstm.use_skip_connections", "use_skip_connections", default=False),
    Option("char_cnn.embedding.dim", "char_embedding_dim"),
    Option("char_cnn.filters", "char_filters"),
    Option("char_cnn.n_highway", "num_highway_layers", default=0),
    Option("char_cnn.n_characters", None, rule=_N_CHARACTERS),
    Option("char_cnn.max_characters_per_token", "max_characters_per_token"),
    Option("char_cnn.activation", "char_activation"),
)
_KEY_OF_FIELD = {option.field: option.key for option in OPTIONS if option.field}


def json_excerpt(value: Any, limit: int = 60) -> str:
    """`value` as JSON, shortened for an error message."""
    text = json.dumps(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _lookup(options: dict, key: str, source: str) -> Any:
    """`options[a][b]...` for the dotted `key`, or `_MISSING`; a section that is not an object is an error."""
    value = options
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(value, dict):
            section = ".".join(parts[:depth])
            raise OriginalCheckpointError(f"{source}: {section} must be a JSON object, got {json_excerpt(value)}")
        if part not in value:
            return _MISSING
        value = value[part]
    return value


def config_from_options(options: dict, source: str = "options") -> ElmoConfig:
    """Map the original options (`lstm`, `char_cnn` sections) to an `ElmoConfig`, checking every key's type and
    range."""
    if "char_cnn" not in options:
        raise OriginalCheckpointError(
            f"{source}: no 'char_cnn' section: token-embedding (word-input) biLMs are not supported; "
            "elmo-convert needs a character-input model (options with a 'char_cnn' section)."
        )
    fields = {}
    for option in OPTIONS:
        value = _lookup(options, option.key, source)
        value = option.default if value is _MISSING else value
        if value is _MISSING:
            raise OriginalCheckpointError(f"{source}: missing key '{option.key}' in the options JSON.")
        rule = option.rule or FIELD_RULES[option.field]
        nullable = rule.nullable and option.default is not _MISSING  # only an optional key may be null
        problem = rule.problem(value, nullable=nullable, null="null", shown=json_excerpt(value))
        if problem:
            raise OriginalCheckpointError(f"{source}: {option.key} {problem}")
        if option.field:
            fields[option.field] = value
    try:
        return ElmoConfig(char_vocab_size=262, **fields)
    except ElmoConfigError as error:  # a rule between keys: the filters must fit in a word
        raise OriginalCheckpointError(f"{source}: {_KEY_OF_FIELD[error.field]} {error.problem}") from None


def _require_file(path: str, kind: str) -> None:
    if not os.path.exists(path):
        raise OriginalCheckpointError(f"{kind} file not found: {path}")
    if not os.path.isfile(path):
        raise OriginalCheckpointError(f"{kind} path is not a file: {path}")


def read_options_json(path: str, error_type: type[ValueError] = OriginalCheckpointError) -> Any:
    """The JSON value of the options file `path` (UTF-8, with or without a byte-order mark); an unreadable file or
    malformed JSON raises `error_type` naming the path."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return json.load(handle)
    except OSError as error:
        raise error_type(f"{path}: cannot read the options file ({reason_of(error, with_file=False)}).") from error
    except UnicodeDecodeError as error:
        raise error_type(f"{path}: not UTF-8 text, so not an options JSON ({error.reason}).") from None
    except json.JSONDecodeError as error:
        raise error_type(f"{path}: not valid JSON ({error}).") from None
    except RecursionError:
        raise error_type(f"{path}: not valid JSON (nested too deeply).") from None


def read_options(path: str | os.PathLike) -> ElmoConfig:
    """Parse an options JSON file (UTF-8, with or without a byte-order mark) into an `ElmoConfig`."""
    path = os.fspath(path)
    _require_file(path, "Options")
    options = read_options_json(path)
    if not isinstance(options, dict):
        raise OriginalCheckpointError(
            f"{path}: the options JSON must be an object with 'lstm' and 'char_cnn', got {json_excerpt(options)}."
        )
    return config_from_options(options, source=path)


@contextlib.contextmanager
def _readable(path: str, what: str) -> Iterator[None]:
    """Report h5py's errors on a damaged file as an `OriginalCheckpointError` naming the file and `what` was read."""
    try:
        yield
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        raise OriginalCheckpointError(
            f"{path}: cannot read {what}; the file is damaged or truncated ({error})."
        ) from error


class _WeightReader:
    """Reads datasets from an open HDF5 file, checking each one's shape against the options, its dtype and values."""

    def __init__(self, handle: h5py.File, path: str):
        self.handle = handle
        self.path = path
        self.names_read: set[str] = set()

    def __call__(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        with _readable(self.path, f"dataset '{name}'"):
            dataset = self.handle.get(name)
        if isinstance(dataset, h5py.Group):
            raise OriginalCheckpointError(
                f"{self.path}: '{name}' is a group, but it must be a dataset of shape {shape}."
            )
        if not isinstance(dataset, h5py.Dataset):
            raise OriginalCheckpointError(f"{self.path}: dataset '{name}' is missing (expected shape {shape}).")
        if dataset.shape != shape:
            raise OriginalCheckpointError(
                f"{self.path}: dataset '{name}' has shape {dataset.shape}, but the options imply {shape}."
            )
        if dataset.dtype.kind != "f":
            raise OriginalCheckpointError(
                f"{self.path}: dataset '{name}' has dtype {dataset.dtype}, but weights must be floating point."
            )
        with _readable(self.path, f"dataset '{name}'"), np.errstate(over="ignore"):
            array = np.asarray(dataset[...], dtype=np.float32)
        non_finite = int(np.count_nonzero(~np.isfinite(array)))
        if non_finite:
            raise OriginalCheckpointError(
                f"{self.path}: dataset '{name}' has {non_finite} non-finite value(s) (NaN, infinite, or too large "
                "for float32)."
            )
        self.names_read.add(name)
        return torch.from_numpy(array)

    def has(self, name: str) -> bool:
        with _readable(self.path, f"dataset '{name}'"):
            return isinstance(self.handle.get(name), h5py.Dataset)

    def check_nothing_left(self) -> None:
        """Refuse model datasets the options did not account for: the options and the weights disagree."""
        names = []
        with _readable(self.path, "the list of datasets"):
            self.handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        left = [name for name in names if MODEL_DATASET.match(name) and name not in self.names_read]
        if left:
            more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
            raise OriginalCheckpointError(
                f"{self.path}: dataset '{left[0]}'{more} is not described by the options; the options and the "
                "weights disagree (compare n_layers, n_highway and filters)."
            )


def _char_encoder_weights(read: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    char_dim, filters_total, proj = config.char_embedding_dim, config.num_char_filters, config.projection_dim
    embeddings = read("char_embed", (config.char_vocab_size - 1, char_dim))
    state = {"char_encoder.char_embeddings.weight": torch.cat([torch.zeros(1, char_dim), embeddings])}
    for index, (width, num_filters) in enumerate(config.char_filters):
        kernel = read(f"CNN/W_cnn_{index}", (1, width, char_dim, num_filters))
        state[f"char_encoder.convolutions.{index}.weight"] = kernel[0].permute(2, 1, 0).contiguous()
        state[f"char_encoder.convolutions.{index}.bias"] = read(f"CNN/b_cnn_{index}", (num_filters,))
    for index in range(config.num_highway_layers):
        for original, name in (("carry", "transform_gate"), ("transform", "transform")):  # bilm-tf's W_carry: the gate
            prefix = f"char_encoder.highways.{index}.{name}"
            state[f"{prefix}.weight"] = read(f"CNN_high_{index}/W_{original}", (filters_total, filters_total)).T
            state[f"{prefix}.bias"] = read(f"CNN_high_{index}/b_{original}", (filters_total,))
    if read.has("CNN_proj/W_proj") or filters_total != proj:
        state["char_encoder.projection.weight"] = read("CNN_proj/W_proj", (filters_total, proj)).T
        state["char_encoder.projection.bias"] = read("CNN_proj/b_proj", (proj,))
    else:  # bilm-tf writes no projection when the filters already have projection_dim outputs
        state["char_encoder.projection.weight"] = torch.eye(proj)
        state["char_encoder.projection.bias"] = torch.zeros(proj)
    return state


def _bilm_weights(read: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    proj, cell = config.projection_dim, config.lstm_cell_size
    state = {}
    for layer in range(config.num_hidden_layers):
        directions = []
        for direction in range(2):
            path = LSTM_CELL_PATH.format(direction=direction, layer=layer)
            kernel = read(f"{path}/W_0", (2 * proj, 4 * cell))
            bias = read(f"{path}/B", (4 * cell,))
            directions.append((kernel[:proj], kernel[proj:], bias, read(f"{path}/W_P_0", (cell, proj))))
        for index, name in enumerate(("weight_ih", "weight_hh", "bias", "weight_proj")):
            state[f"bilm.layers.{layer}.{name}"] = torch.stack([weights[index] for weights in directions]).contiguous()
    return state


def read_weights(path: str | os.PathLike, config: ElmoConfig) -> dict[str, torch.Tensor]:
    """Read the HDF5 weights into a float32 state dict of `ElmoModel` names, checking every dataset."""
    path = os.fspath(path)
    _require_file(path, "Weights")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise OriginalCheckpointError(
            f"{path}: not a readable HDF5 file (truncated or wrong format?): {error}"
        ) from error
    with handle:
        read = _WeightReader(handle, path)
        state = {**_char_encoder_weights(read, config), **_bilm_weights(read, config)}
        read.check_nothing_left()
    return state


def load_original_checkpoint(
    options_path: str | os.PathLike, weights_path: str | os.PathLike
) -> tuple[ElmoConfig, dict[str, torch.Tensor]]:
    """Read an original checkpoint: `(config, state_dict)` ready for `ElmoModel(config).load_state_dict`."""
    config = read_options(options_path)
    return config, read_weights(weights_path, config)


def read_softmax(
    path: str | os.PathLike, error_type: type[Exception] = OriginalCheckpointError
) -> dict[str, torch.Tensor]:
    """bilm-tf's `softmax.hdf5` as float32 tensors: `W` (n_tokens_vocab, projection_dim) and `b` (n_tokens_vocab,);
    a missing dataset or a file that is not HDF5 raises `error_type` naming the file."""
    try:
        with h5py.File(path, "r") as handle:
            for name in ("W", "b"):
                if name not in handle:
                    raise error_type(f"{path}: no dataset {name!r} (a bilm-tf softmax.hdf5 has W and b).")
            return {name: torch.from_numpy(handle[name][...]).float() for name in ("W", "b")}
    except OSError as error:
        raise error_type(f"{path}: not a readable HDF5 file ({error}).") from None


def options_from_config(config: ElmoConfig, with_softmax: bool) -> dict:
    """bilm-tf's options JSON of `config`: the `lstm` and `char_cnn` sections of the released options files, and the
    training keys of the LM softmax when `with_softmax` (the config has `lm_vocab_size`)."""
    options = {
        "lstm": {
            "dim": config.lstm_cell_size,
            "projection_dim": config.projection_dim,
            "n_layers": config.num_hidden_layers,
            "cell_clip": config.cell_clip,
            "proj_clip": config.proj_clip,
            "use_skip_connections": config.use_skip_connections,
        },
        "char_cnn": {
            "embedding": {"dim": config.char_embedding_dim},
            "filters": [list(pair) for pair in config.char_filters],
            "n_highway": config.num_highway_layers,
            "n_characters": N_CHARACTERS,
            "max_characters_per_token": config.max_characters_per_token,
            "activation": config.char_activation,
        },
    }
    if with_softmax:
        options.update(bidirectional=True, n_tokens_vocab=config.lm_vocab_size, dropout=config.lm_dropout)
        if config.lm_num_negative_samples is None:  # full softmax: bilm-tf's `sample_softmax: false`
            options["sample_softmax"] = False
        else:
            options["n_negative_samples_batch"] = config.lm_num_negative_samples
    return options


def options_json_text(options: dict) -> str:
    """`options` as indented JSON, each `[width, num_filters]` pair on one line as in the released files."""
    return re.sub(r"\[\s+(\d+),\s+(\d+)\s+\]", r"[\1, \2]", json.dumps(options, indent=2)) + "\n"


def write_weights_hdf5(path: str | os.PathLike, datasets: dict[str, np.ndarray]) -> None:
    """float32 datasets, contiguous, as bilm-tf's `dump_weights` writes them."""
    with h5py.File(path, "w") as handle:
        for name, array in datasets.items():
            handle.create_dataset(name, data=array, dtype="float32")
