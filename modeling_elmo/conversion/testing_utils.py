"""Random ELMo checkpoints in the exact original format (options JSON + bilm-tf HDF5 layout), for tests and
benchmarks. Matrices are stored TensorFlow-style as (in, out); LSTM gate columns are in TF order (i, j, f, o)."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from ..configuration_elmo import ORIGINAL_CHAR_FILTERS


@dataclass
class OriginalArchitecture:
    """The numbers of an original options JSON."""

    dim: int = 64
    projection_dim: int = 16
    n_layers: int = 2
    use_skip_connections: bool = True
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    char_dim: int = 4
    filters: list[list[int]] = field(default_factory=lambda: [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]])
    n_highway: int = 2
    activation: str = "relu"
    max_characters_per_token: int = 50

    def to_options(self) -> dict:
        return {
            "lstm": {
                "dim": self.dim,
                "projection_dim": self.projection_dim,
                "n_layers": self.n_layers,
                "use_skip_connections": self.use_skip_connections,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
            },
            "char_cnn": {
                "embedding": {"dim": self.char_dim},
                "filters": self.filters,
                "n_highway": self.n_highway,
                "n_characters": 262,
                "max_characters_per_token": self.max_characters_per_token,
                "activation": self.activation,
            },
        }


_FULL_SIZE = {"char_dim": 16, "filters": ORIGINAL_CHAR_FILTERS}
ARCHITECTURES = {
    "original": OriginalArchitecture(dim=4096, projection_dim=512, n_highway=2, **_FULL_SIZE),
    "medium": OriginalArchitecture(dim=2048, projection_dim=256, n_highway=1, **_FULL_SIZE),
    "small": OriginalArchitecture(dim=1024, projection_dim=128, n_highway=1, **_FULL_SIZE),
    "tiny": OriginalArchitecture(),
}


def _glorot(rng: np.random.Generator, *shape: int) -> np.ndarray:
    fan_in, fan_out = int(np.prod(shape[:-1])), shape[-1]
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def write_random_original_checkpoint(
    directory: str | Path,
    architecture: OriginalArchitecture | None = None,
    seed: int = 0,
    write_projection: bool = True,
) -> tuple[Path, Path]:
    """Write `options.json` and `lm_weights.hdf5` with random weights; returns their paths.

    `write_projection=False` omits `CNN_proj` when the filters already sum to `projection_dim`, as bilm-tf does.
    """
    arch = architecture or OriginalArchitecture()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    options_path, weights_path = directory / "options.json", directory / "lm_weights.hdf5"
    options_path.write_text(json.dumps(arch.to_options(), indent=2))
    total_filters = sum(n for _, n in arch.filters)
    with h5py.File(weights_path, "w") as handle:
        handle["char_embed"] = rng.uniform(-1, 1, size=(261, arch.char_dim)).astype(np.float32)
        for index, (width, num) in enumerate(arch.filters):
            handle[f"CNN/W_cnn_{index}"] = _glorot(rng, 1, width, arch.char_dim, num)
            handle[f"CNN/b_cnn_{index}"] = rng.normal(0, 0.1, size=num).astype(np.float32)
        for index in range(arch.n_highway):
            for gate, bias in (("carry", -2.0), ("transform", 0.0)):
                handle[f"CNN_high_{index}/W_{gate}"] = _glorot(rng, total_filters, total_filters)
                handle[f"CNN_high_{index}/b_{gate}"] = np.full(total_filters, bias, np.float32)
        if write_projection or total_filters != arch.projection_dim:
            handle["CNN_proj/W_proj"] = _glorot(rng, total_filters, arch.projection_dim)
            handle["CNN_proj/b_proj"] = rng.normal(0, 0.1, size=arch.projection_dim).astype(np.float32)
        for direction in range(2):
            for layer in range(arch.n_layers):
                cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                handle[f"{cell}/W_0"] = _glorot(rng, 2 * arch.projection_dim, 4 * arch.dim)
                handle[f"{cell}/B"] = rng.normal(0, 0.1, size=4 * arch.dim).astype(np.float32)
                handle[f"{cell}/W_P_0"] = _glorot(rng, arch.dim, arch.projection_dim)
    return options_path, weights_path


__all__ = ["ARCHITECTURES", "OriginalArchitecture", "write_random_original_checkpoint"]
