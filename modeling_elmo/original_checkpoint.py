"""Read an original ELMo checkpoint (bilm-tf / AllenNLP options JSON + HDF5 weights) into an `ElmoConfig` and a
state dict of `ElmoModel` parameter names. Every problem is reported as `OriginalCheckpointError` naming the file,
the JSON key or the HDF5 dataset."""

import json
import os

import h5py
import numpy as np
import torch

from .configuration_elmo import ElmoConfig

FORGET_BIAS = 1.0  # added by TensorFlow's LSTMCell at run time, not stored in the HDF5
LSTM_CELL_PATH = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


class OriginalCheckpointError(ValueError):
    """An original options file or weight file that cannot be converted."""


_MISSING = object()


def _require(options: dict, path: str, source: str):
    value = options_get(options, path, _MISSING)
    if value is _MISSING:
        raise OriginalCheckpointError(f"{source}: missing key '{path}' in the options JSON.")
    return value


def _require_int(options: dict, path: str, source: str, default: int | None = None) -> int:
    value = _require(options, path, source) if default is None else options_get(options, path, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
        raise OriginalCheckpointError(f"{source}: '{path}' must be a non-negative integer, got {value!r}.")
    return int(value)


def options_get(options: dict, path: str, default):
    """`options[a][b]...` for the dotted `path`, or `default` when a key is absent."""
    for key in path.split("."):
        if not isinstance(options, dict) or key not in options:
            return default
        options = options[key]
    return options


def config_from_options(options: dict, source: str = "options") -> ElmoConfig:
    """Map the original options (`lstm`, `char_cnn` sections) to an `ElmoConfig`."""
    filters = _require(options, "char_cnn.filters", source)
    if not isinstance(filters, list) or not filters or not all(isinstance(f, list) and len(f) == 2 for f in filters):
        raise OriginalCheckpointError(f"{source}: 'char_cnn.filters' must be a list of [width, num_filters] pairs.")
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for f in filters for v in f):
        raise OriginalCheckpointError(f"{source}: 'char_cnn.filters' entries must be positive integers: {filters}.")
    activation = _require(options, "char_cnn.activation", source)
    if activation not in ("relu", "tanh"):
        raise OriginalCheckpointError(f"{source}: 'char_cnn.activation' must be 'relu' or 'tanh', got {activation!r}.")
    n_characters = _require_int(options, "char_cnn.n_characters", source)
    if n_characters not in (261, 262):
        raise OriginalCheckpointError(f"{source}: 'char_cnn.n_characters' must be 261 or 262, got {n_characters}.")
    return ElmoConfig(
        char_vocab_size=262,
        max_characters_per_token=_require_int(options, "char_cnn.max_characters_per_token", source),
        char_embedding_dim=_require_int(options, "char_cnn.embedding.dim", source),
        char_filters=[list(f) for f in filters],
        num_highway_layers=_require_int(options, "char_cnn.n_highway", source, default=0),
        char_activation=activation,
        lstm_cell_size=_require_int(options, "lstm.dim", source),
        projection_dim=_require_int(options, "lstm.projection_dim", source),
        num_hidden_layers=_require_int(options, "lstm.n_layers", source),
        cell_clip=options_get(options, "lstm.cell_clip", None),
        proj_clip=options_get(options, "lstm.proj_clip", None),
        use_skip_connections=bool(options_get(options, "lstm.use_skip_connections", False)),
    )


def read_options(path: str | os.PathLike) -> ElmoConfig:
    """Parse an options JSON file into an `ElmoConfig`."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            options = json.load(handle)
    except FileNotFoundError as error:
        raise OriginalCheckpointError(f"Options file not found: {path}") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise OriginalCheckpointError(f"{path}: not valid JSON ({error}).") from error
    if not isinstance(options, dict):
        raise OriginalCheckpointError(f"{path}: the options JSON must be an object with 'lstm' and 'char_cnn'.")
    try:
        return config_from_options(options, source=path)
    except OriginalCheckpointError:
        raise
    except (ValueError, TypeError) as error:  # strict config validation
        raise OriginalCheckpointError(f"{path}: invalid architecture: {error}") from error


class _WeightReader:
    """Reads datasets from an open HDF5 file, checking each one's shape against the options."""

    def __init__(self, handle: h5py.File, path: str):
        self.handle = handle
        self.path = path

    def __call__(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        dataset = self.handle.get(name)
        if not isinstance(dataset, h5py.Dataset):
            raise OriginalCheckpointError(f"{self.path}: dataset '{name}' is missing (expected shape {shape}).")
        if dataset.shape != shape:
            raise OriginalCheckpointError(
                f"{self.path}: dataset '{name}' has shape {dataset.shape}, but the options imply {shape}."
            )
        try:
            array = np.asarray(dataset[...], dtype=np.float32)
        except (OSError, ValueError) as error:
            raise OriginalCheckpointError(f"{self.path}: cannot read dataset '{name}' ({error}).") from error
        return torch.from_numpy(array)

    def has(self, name: str) -> bool:
        return isinstance(self.handle.get(name), h5py.Dataset)


def _char_encoder_weights(read: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    char_dim, filters_total, proj = config.char_embedding_dim, config.num_char_filters, config.projection_dim
    embeddings = read("char_embed", (config.char_vocab_size - 1, char_dim))
    state = {"char_encoder.char_embeddings.weight": torch.cat([torch.zeros(1, char_dim), embeddings])}
    for index, (width, num_filters) in enumerate(config.char_filters):
        kernel = read(f"CNN/W_cnn_{index}", (1, width, char_dim, num_filters))
        state[f"char_encoder.convolutions.{index}.weight"] = kernel[0].permute(2, 1, 0).contiguous()
        state[f"char_encoder.convolutions.{index}.bias"] = read(f"CNN/b_cnn_{index}", (num_filters,))
    for index in range(config.num_highway_layers):
        for gate in ("carry", "transform"):
            prefix = f"char_encoder.highways.{index}.{gate}"
            state[f"{prefix}.weight"] = read(f"CNN_high_{index}/W_{gate}", (filters_total, filters_total)).T
            state[f"{prefix}.bias"] = read(f"CNN_high_{index}/b_{gate}", (filters_total,))
    if read.has("CNN_proj/W_proj") or filters_total != proj:
        state["char_encoder.projection.weight"] = read("CNN_proj/W_proj", (filters_total, proj)).T
        state["char_encoder.projection.bias"] = read("CNN_proj/b_proj", (proj,))
    else:  # bilm-tf writes no projection when the filters already have projection_dim outputs
        state["char_encoder.projection.weight"] = torch.eye(proj)
        state["char_encoder.projection.bias"] = torch.zeros(proj)
    return state


def _bilm_weights(read: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    proj, cell = config.projection_dim, config.lstm_cell_size
    forget_gate = torch.zeros(4, cell)
    forget_gate[2] = FORGET_BIAS  # TF gate order (i, j, f, o)
    state = {}
    for layer in range(config.num_hidden_layers):
        directions = []
        for direction in range(2):
            path = LSTM_CELL_PATH.format(direction=direction, layer=layer)
            kernel = read(f"{path}/W_0", (2 * proj, 4 * cell))
            directions.append(
                (
                    kernel[:proj],
                    kernel[proj:],
                    read(f"{path}/B", (4 * cell,)) + forget_gate.flatten(),
                    read(f"{path}/W_P_0", (cell, proj)),
                )
            )
        for index, name in enumerate(("weight_ih", "weight_hh", "bias", "weight_proj")):
            state[f"bilm.layers.{layer}.{name}"] = torch.stack([weights[index] for weights in directions]).contiguous()
    return state


def read_weights(path: str | os.PathLike, config: ElmoConfig) -> dict[str, torch.Tensor]:
    """Read the HDF5 weights into a float32 state dict of `ElmoModel` names, checking every shape."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise OriginalCheckpointError(f"Weights file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise OriginalCheckpointError(
            f"{path}: not a readable HDF5 file (truncated or wrong format?): {error}"
        ) from error
    with handle:
        read = _WeightReader(handle, path)
        return {**_char_encoder_weights(read, config), **_bilm_weights(read, config)}


def load_original_checkpoint(
    options_path: str | os.PathLike, weights_path: str | os.PathLike
) -> tuple[ElmoConfig, dict[str, torch.Tensor]]:
    """Read an original checkpoint: `(config, state_dict)` ready for `ElmoModel(config).load_state_dict`."""
    config = read_options(options_path)
    return config, read_weights(weights_path, config)
