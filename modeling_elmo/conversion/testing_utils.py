"""Random ELMo checkpoints in the exact original format (options JSON + bilm-tf HDF5 layout), for tests and
benchmarks. Matrices are stored TensorFlow-style as (in, out); LSTM gate columns are in TF order (i, j, f, o). Also
random model folders in ELMoForManyLangs' released format (`write_random_efml_model`), for tests, benchmarks and the
docs' examples."""

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
import torch

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


# ---- ELMoForManyLangs model folders ---------------------------------------------------------------------------------

CHAR_SPECIALS = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]  # EFML's training order, after the corpus's
WORD_SPECIALS = ["<oov>", "<bos>", "<eos>", "<pad>"]  # ids 0..3 in EFML's training
# CJK, Cyrillic, Arabic, Latin with accents, U+3000 (a line whose token `strip()` removes)
NON_LATIN_CHARS = list(dict.fromkeys("北京大学日本語中文приветмирاللغةالعربيةéàçñÅ")) + ["\u3000"]
NON_LATIN_WORDS = ["北京", "大学", "日本語", "привет", "мир", "اللغة", "العربية", "café"]


def small_efml_architecture(word_dim: int, max_chars: int = 9, cell_clip: float = 3, proj_clip: float = 3) -> dict:
    """An architecture JSON like EFML's packaged ones, at toy sizes."""
    return {
        "encoder": {
            "name": "elmo",
            "projection_dim": 6,
            "cell_clip": cell_clip,
            "proj_clip": proj_clip,
            "dim": 10,
            "n_layers": 2,
        },
        "token_embedder": {
            "name": "cnn",
            "activation": "relu",
            "filters": [[1, 4], [2, 3], [3, 5]],
            "n_highway": 2,
            "word_dim": word_dim,
            "char_dim": 5,
            "max_characters_per_token": max_chars,
        },
        "classifier": {"name": "sampled_softmax", "n_samples": 8192},
        "dropout": 0.1,
    }


def _write_lexicon(path: Path, tokens: list[str], rng: random.Random) -> None:
    """`token<TAB>id` lines with ids 0..n-1 in token order, written in shuffled line order (EFML ignores the order)."""
    lines = [f"{token}\t{index}\n" for index, token in enumerate(tokens)]
    rng.shuffle(lines)
    path.write_text("".join(lines), encoding="utf-8")


def write_random_efml_model(
    folder: Path,
    *,
    chars: list[str] = NON_LATIN_CHARS,
    words: list[str] | None = NON_LATIN_WORDS,
    architecture: dict | None = None,
    seed: int = 0,
    config_path: str = "arch.json",
) -> Path:
    """Write a random-weight model folder in ELMoForManyLangs' released format (`config.json`, `char.dic`, `word.dic`
    when `words` is given, the architecture JSON and the `token_embedder.pkl` / `encoder.pkl` pickles) and return
    it. The default toy architecture gives vectors of 12 dimensions; the weights are N(0, 0.5)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    architecture = architecture or small_efml_architecture(word_dim=7 if words is not None else 0)
    embedder_cfg, encoder_cfg = architecture["token_embedder"], architecture["encoder"]
    char_tokens = list(dict.fromkeys(chars)) + CHAR_SPECIALS
    _write_lexicon(folder / "char.dic", char_tokens, rng)
    if words is not None:
        _write_lexicon(folder / "word.dic", WORD_SPECIALS + list(dict.fromkeys(words)), rng)
    (folder / Path(config_path).name).write_text(json.dumps(architecture), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"config_path": config_path, "batch_size": 32}), encoding="utf-8")

    def normal(*shape: int, scale: float = 0.5) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    features = sum(num for _, num in embedder_cfg["filters"])
    projection, cell = encoder_cfg["projection_dim"], encoder_cfg["dim"]
    embedder = {"char_emb_layer.embedding.weight": normal(len(char_tokens), embedder_cfg["char_dim"])}
    if words is not None:
        embedder["word_emb_layer.embedding.weight"] = normal(
            len(WORD_SPECIALS) + len(dict.fromkeys(words)), embedder_cfg["word_dim"]
        )
    for index, (width, num) in enumerate(embedder_cfg["filters"]):
        embedder[f"convolutions.{index}.weight"] = normal(num, embedder_cfg["char_dim"], width)
        embedder[f"convolutions.{index}.bias"] = normal(num)
    for index in range(embedder_cfg["n_highway"]):
        embedder[f"highways._layers.{index}.weight"] = normal(2 * features, features, scale=0.3)
        embedder[f"highways._layers.{index}.bias"] = normal(2 * features)
    embedder["projection.weight"] = normal(
        projection, (embedder_cfg["word_dim"] if words is not None else 0) + features
    )
    embedder["projection.bias"] = normal(projection)
    encoder = {}
    for layer in range(encoder_cfg["n_layers"]):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = normal(4 * cell, projection)
            encoder[f"{prefix}.state_linearity.weight"] = normal(4 * cell, projection)
            encoder[f"{prefix}.state_linearity.bias"] = normal(4 * cell)
            encoder[f"{prefix}.state_projection.weight"] = normal(projection, cell, scale=1.0)
    # the released pickles use the legacy (non-zip) serialization of 2018 PyTorch
    torch.save(embedder, folder / "token_embedder.pkl", _use_new_zipfile_serialization=False)
    torch.save(encoder, folder / "encoder.pkl", _use_new_zipfile_serialization=False)
    return folder
