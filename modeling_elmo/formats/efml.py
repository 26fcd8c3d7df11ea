"""Read an ELMoForManyLangs (HIT-SCIR, `elmoformanylangs`) model folder into an `ElmoConfig`, a state dict of
`ElmoModel` parameter names and its lexicons, without the `elmoformanylangs` package.

The folder holds `config.json` (training options; only `config_path` is read: the architecture JSON), `char.dic` and
`word.dic` (`token<TAB>id` lines) and `token_embedder.pkl` / `encoder.pkl` (PyTorch state dicts, read with
`torch.load(weights_only=True)`: plain tensors only). Every problem is an `EfmlFormatError`, one line naming the file,
key or shape. The facts of the format are listed in `docs/efml.md`.
"""

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..character_ids import LEXICON_CHAR_SPECIALS, LEXICON_WORD_SPECIALS
from ..configuration_elmo import ElmoConfig, ElmoConfigError
from ..foundation.errors import ToolError, one_line
from ..foundation.file_hash import sha256_of
from ..foundation.output_folder import reason_of

# The two architecture files packaged with elmoformanylangs 0.0.4 (`elmoformanylangs/configs/`), byte-identical;
# EFML falls back on them when a model folder lacks its `config_path`. Only the keys the embedder reads are kept.
PACKAGED_ARCHITECTURE = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
}
# sha256 of that file as packaged (both names; elmoformanylangs 0.0.4.post2 and the repository's HEAD agree)
PACKAGED_ARCHITECTURE_SHA256 = "b8ba837a062847327ae2fc2361b2154b75a8e884b59034390802cfa99a497d5a"
PACKAGED_ARCHITECTURES = {
    "cnn_50_100_512_4096_sample.json": PACKAGED_ARCHITECTURE,
    "cnn_0_100_512_4096_sample.json": PACKAGED_ARCHITECTURE,
}
TOKEN_EMBEDDER_FILE, ENCODER_FILE = "token_embedder.pkl", "encoder.pkl"


class EfmlFormatError(ToolError, ValueError):
    """An ELMoForManyLangs model folder that cannot be converted; the message names the file and the problem."""


@dataclass(frozen=True)
class EfmlArchitecture:
    """The architecture JSON's facts the embedder uses (`token_embedder` and `encoder` sections)."""

    char_dim: int
    word_dim: int
    filters: list[list[int]]
    n_highway: int
    activation: str
    max_characters_per_token: int
    projection_dim: int
    dim: int
    n_layers: int
    cell_clip: float | None
    proj_clip: float | None

    @property
    def num_filters(self) -> int:
        return sum(num for _, num in self.filters)


class EfmlModel(NamedTuple):
    """What `read_efml_model` returns: the config and state dict of an `ElmoModel`, the lexicons (tokens in EFML id
    order; `word_lexicon` is `None` without a word embedding), the raw EFML state dicts (for a reference computation),
    the architecture and `sources` (file name -> {"location", "sha256"}, plus where the architecture came from)."""

    config: ElmoConfig
    state_dict: dict[str, torch.Tensor]
    char_lexicon: list[str]
    word_lexicon: list[str] | None
    efml_state: dict[str, dict[str, torch.Tensor]]
    architecture: EfmlArchitecture
    sources: dict[str, dict[str, str]]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise EfmlFormatError(f"{path} is missing.") from error
    except OSError as error:
        raise EfmlFormatError(f"{path} is unreadable ({reason_of(error, with_file=False)}).") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise EfmlFormatError(f"{path} is not valid JSON ({one_line(error)}).") from error


def find_architecture(model_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The architecture JSON named by `model_dir/config.json`'s `config_path`, looked up as EFML does: the path
    joined to the model folder, its file name in the model folder, then the packaged file of that name. Returns the
    JSON and its source (`{"location", "sha256"}`)."""
    options = _read_json(model_dir / "config.json")
    config_path = options.get("config_path") if isinstance(options, dict) else None
    if not isinstance(config_path, str) or not config_path:
        raise EfmlFormatError(f"{model_dir / 'config.json'}: config_path must name the architecture JSON file.")
    name = Path(config_path).name
    for candidate in (model_dir / config_path, model_dir / name):
        if candidate.is_file():
            return _read_json(candidate), {"location": str(candidate), "sha256": sha256_of(candidate)}
    if name in PACKAGED_ARCHITECTURES:
        location = f"elmoformanylangs/configs/{name} (packaged with elmoformanylangs)"
        return PACKAGED_ARCHITECTURES[name], {"location": location, "sha256": PACKAGED_ARCHITECTURE_SHA256}
    raise EfmlFormatError(
        f"{model_dir / 'config.json'}: config_path {config_path!r} is found neither in the model folder nor among "
        f"the architecture files packaged with elmoformanylangs ({', '.join(PACKAGED_ARCHITECTURES)})."
    )


def _section_value(
    architecture: dict[str, Any], source: str, section: str, key: str, accepts, description: str
) -> Any:
    value = architecture.get(section, {}).get(key) if isinstance(architecture.get(section), dict) else None
    if isinstance(value, bool) or not accepts(value):
        raise EfmlFormatError(f"{source}: {section}.{key} must be {description}, got {value!r}.")
    return value


def parse_architecture(architecture: Any, source: str = "architecture JSON") -> EfmlArchitecture:
    """Check the architecture JSON (found at `source`): a `cnn` token embedder with a character embedding and an
    `elmo` encoder (the `lstm` variants exist in EFML's code, but no released model uses them)."""
    if not isinstance(architecture, dict):
        raise EfmlFormatError(f"{source}: must be an object with token_embedder and encoder sections.")

    def count(section: str, key: str, minimum: int = 1) -> int:
        return _section_value(
            architecture,
            source,
            section,
            key,
            lambda v: isinstance(v, int) and v >= minimum,
            f"an integer >= {minimum}",
        )

    def clip(key: str) -> float:
        number = lambda v: v is None or (isinstance(v, (int, float)) and 0 <= v < float("inf"))  # noqa: E731
        return _section_value(architecture, source, "encoder", key, number, "a finite number >= 0 (0, null: none)")

    for section, supported in (("token_embedder", "cnn"), ("encoder", "elmo")):
        name = _section_value(architecture, source, section, "name", lambda v: isinstance(v, str), "a string")
        if name.lower() != supported:
            raise EfmlFormatError(
                f"{source}: {section}.name {name!r} is not supported: only {supported!r} (the '{name}' "
                "variant exists in ELMoForManyLangs' code, but no released model uses it)."
            )
    if count("token_embedder", "char_dim", 0) == 0:
        raise EfmlFormatError(
            f"{source}: token_embedder.char_dim is 0 (a word-only model); only models with a character "
            "embedding are supported (every released one has one)."
        )
    filters = _section_value(
        architecture, source, "token_embedder", "filters",
        lambda v: isinstance(v, list) and v and all(
            isinstance(f, list) and len(f) == 2 and all(type(n) is int and n >= 1 for n in f) for f in v
        ),
        "a non-empty list of [width, number] pairs of positive integers",
    )  # fmt: skip
    activation = _section_value(
        architecture, source, "token_embedder", "activation", lambda v: v in ("relu", "tanh"), "'relu' or 'tanh'"
    )
    return EfmlArchitecture(
        char_dim=count("token_embedder", "char_dim"),
        word_dim=count("token_embedder", "word_dim", 0),
        filters=[list(f) for f in filters],
        n_highway=count("token_embedder", "n_highway", 0),
        activation=activation,
        max_characters_per_token=count("token_embedder", "max_characters_per_token", 3),
        projection_dim=count("encoder", "projection_dim"),
        dim=count("encoder", "dim"),
        n_layers=count("encoder", "n_layers"),
        cell_clip=clip("cell_clip"),
        proj_clip=clip("proj_clip"),
    )


def read_lexicon(path: Path, specials: tuple[str, ...]) -> list[str]:
    """A `char.dic` / `word.dic` as EFML reads it (lines as `str.splitlines`, then `line.strip().split('\\t')`; a line
    left with one field is the token U+3000; a repeated token keeps its last id), returned as the tokens in id order.
    Refused: a line without an integer id, two tokens with one id, ids that are not `0 .. len - 1`, a missing entry
    of `specials`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise EfmlFormatError(f"{path} is missing.") from error
    except OSError as error:
        raise EfmlFormatError(f"{path} is unreadable ({reason_of(error, with_file=False)}).") from error
    except UnicodeDecodeError as error:
        raise EfmlFormatError(f"{path} is not UTF-8 ({error.reason} at byte {error.start}).") from error
    lexicon: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):  # EFML's `codecs.open` splits lines the same way
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, "\u3000")  # EFML's reading of a line whose token strip() removed
        if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
            raise EfmlFormatError(f"{path}: line {number} is not 'token<TAB>id' ({line[:40]!r}).")
        lexicon[fields[0]] = int(fields[1])
    by_id: dict[int, str] = {}
    for token, index in lexicon.items():
        if index in by_id:
            raise EfmlFormatError(f"{path}: id {index} is given to two tokens, {by_id[index]!r} and {token!r}.")
        by_id[index] = token
    out_of_range = sorted(index for index in by_id if not 0 <= index < len(lexicon))
    if out_of_range:
        raise EfmlFormatError(
            f"{path}: id {out_of_range[0]} ({by_id[out_of_range[0]]!r}) is out of range: {len(lexicon)} tokens have "
            f"ids 0 to {len(lexicon) - 1}."
        )
    missing = [token for token in specials if token not in lexicon]
    if missing:
        raise EfmlFormatError(f"{path}: the entry {missing[0]!r} is missing (needed: {', '.join(specials)}).")
    return [by_id[index] for index in range(len(lexicon))]


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A `torch.save`d state dict read with `weights_only=True` (no arbitrary objects are unpickled): a dict of
    tensors, or `EfmlFormatError`."""
    if not path.is_file():
        raise EfmlFormatError(f"{path} is missing.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        reason = " ".join(str(error).split("Check the documentation")[0].split())[:200]
        raise EfmlFormatError(
            f"{path} is not a plain state dict of tensors (refused by weights_only: {reason})."
        ) from error
    except Exception as error:  # a truncated or foreign file: torch raises RuntimeError, EOFError, ...
        raise EfmlFormatError(f"{path} is not a readable PyTorch file ({type(error).__name__}: {error}).") from error
    if not isinstance(state, dict) or not all(
        isinstance(key, str) and isinstance(value, torch.Tensor) for key, value in state.items()
    ):
        raise EfmlFormatError(f"{path} is not a plain state dict (a dict of parameter names to tensors).")
    return state


def expected_shapes(architecture: EfmlArchitecture, n_chars: int, n_words: int | None) -> dict[str, dict]:
    """Per pickle, the state-dict keys of EFML's `ConvTokenEmbedder` and `ElmobiLm` and their shapes."""
    a, features = architecture, architecture.num_filters
    embedder = {"char_emb_layer.embedding.weight": (n_chars, a.char_dim)}
    if n_words is not None:
        embedder["word_emb_layer.embedding.weight"] = (n_words, a.word_dim)
    for index, (width, num) in enumerate(a.filters):
        embedder[f"convolutions.{index}.weight"] = (num, a.char_dim, width)
        embedder[f"convolutions.{index}.bias"] = (num,)
    for index in range(a.n_highway):
        embedder[f"highways._layers.{index}.weight"] = (2 * features, features)
        embedder[f"highways._layers.{index}.bias"] = (2 * features,)
    embedder["projection.weight"] = (a.projection_dim, (a.word_dim if n_words is not None else 0) + features)
    embedder["projection.bias"] = (a.projection_dim,)
    encoder = {}
    for layer in range(a.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = (4 * a.dim, a.projection_dim)
            encoder[f"{prefix}.state_linearity.weight"] = (4 * a.dim, a.projection_dim)
            encoder[f"{prefix}.state_linearity.bias"] = (4 * a.dim,)
            encoder[f"{prefix}.state_projection.weight"] = (a.projection_dim, a.dim)
    return {TOKEN_EMBEDDER_FILE: embedder, ENCODER_FILE: encoder}


def check_state_dict(path: Path, state: dict[str, torch.Tensor], shapes: dict[str, tuple]) -> None:
    """Refuse a state dict whose keys, shapes or values disagree with the architecture (one line, naming one)."""
    missing = [key for key in shapes if key not in state]
    unexpected = [key for key in state if key not in shapes]
    if missing:
        raise EfmlFormatError(f"{path} lacks {missing[0]!r}, which the architecture JSON and lexicons require.")
    if unexpected:
        raise EfmlFormatError(f"{path} has {unexpected[0]!r}, which the architecture JSON and lexicons do not have.")
    for key, shape in shapes.items():
        tensor = state[key]
        if tuple(tensor.shape) != shape:
            raise EfmlFormatError(
                f"{path}: {key} has shape {tuple(tensor.shape)}, but the architecture JSON and lexicons give {shape}."
            )
        if not tensor.is_floating_point():
            raise EfmlFormatError(f"{path}: {key} holds {tensor.dtype} values, not floating point ones.")
        if not torch.isfinite(tensor).all():
            raise EfmlFormatError(f"{path}: {key} holds NaN or infinite values.")


def _gates_to_ours(weight: torch.Tensor) -> torch.Tensor:
    """EFML's gate blocks (i, f, g, o) along dim 0 -> ours (TensorFlow's i, j, f, o: j is the new input g)."""
    i, f, g, o = weight.chunk(4, dim=0)
    return torch.cat([i, g, f, o], dim=0)


def _stacked(encoder: dict[str, torch.Tensor], prefixes: list[str], name: str) -> torch.Tensor:
    """`name` of the forward and the backward cell stacked (2, ...), gate blocks in our order (not the projection)."""
    tensors = [encoder[f"{prefix}.{name}"] for prefix in prefixes]
    if name != "state_projection.weight":
        tensors = [_gates_to_ours(tensor) for tensor in tensors]
    return torch.stack(tensors)


def to_elmo_state_dict(
    architecture: EfmlArchitecture, embedder: dict[str, torch.Tensor], encoder: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Map checked EFML state dicts onto `ElmoModel`'s parameters (float32). Embeddings get a zero row 0 (padding,
    ids shifted by one); EFML's highway `g * x + (1 - g) * relu(h)`, `g = sigmoid(second half)` becomes ours,
    `t * relu(h) + (1 - t) * x`, with `t = sigmoid(-second half)`: the gate's weight and bias are negated."""
    embedder = {key: value.float() for key, value in embedder.items()}
    encoder = {key: value.float() for key, value in encoder.items()}
    features = architecture.num_filters

    def padded(weight: torch.Tensor) -> torch.Tensor:
        return torch.cat([weight.new_zeros(1, weight.shape[1]), weight])

    state = {"char_encoder.char_embeddings.weight": padded(embedder["char_emb_layer.embedding.weight"])}
    if "word_emb_layer.embedding.weight" in embedder:
        state["char_encoder.word_embeddings.weight"] = padded(embedder["word_emb_layer.embedding.weight"])
    for index in range(len(architecture.filters)):
        for name in ("weight", "bias"):
            state[f"char_encoder.convolutions.{index}.{name}"] = embedder[f"convolutions.{index}.{name}"]
    for index in range(architecture.n_highway):
        weight, bias = embedder[f"highways._layers.{index}.weight"], embedder[f"highways._layers.{index}.bias"]
        prefix = f"char_encoder.highways.{index}"
        state[f"{prefix}.transform.weight"], state[f"{prefix}.transform.bias"] = weight[:features], bias[:features]
        state[f"{prefix}.transform_gate.weight"] = -weight[features:]
        state[f"{prefix}.transform_gate.bias"] = -bias[features:]
    state["char_encoder.projection.weight"] = embedder["projection.weight"]
    state["char_encoder.projection.bias"] = embedder["projection.bias"]
    for layer in range(architecture.n_layers):
        prefixes = [f"{direction}_layer_{layer}" for direction in ("forward", "backward")]
        state[f"bilm.layers.{layer}.weight_ih"] = _stacked(
            encoder, prefixes, "input_linearity.weight"
        ).mT  # (2, P, 4C)
        state[f"bilm.layers.{layer}.weight_hh"] = _stacked(
            encoder, prefixes, "state_linearity.weight"
        ).mT  # (2, P, 4C)
        state[f"bilm.layers.{layer}.bias"] = _stacked(encoder, prefixes, "state_linearity.bias")  # (2, 4C)
        state[f"bilm.layers.{layer}.weight_proj"] = _stacked(
            encoder, prefixes, "state_projection.weight"
        ).mT  # (2, C, P)
    return {key: value.contiguous() for key, value in state.items()}


def elmo_config(architecture: EfmlArchitecture, char_lexicon: list[str], word_lexicon: list[str] | None) -> ElmoConfig:
    """The `ElmoConfig` of an EFML model: lexicon ids shifted by one (0 is padding); the boundary tokens' character
    rows are EFML's `[<eow>, <bos>|<eos>, <bow>]` (its code fetches the word markers crossed), padded with `<pad>`."""
    a = architecture
    char_id = {token: index + 1 for index, token in enumerate(char_lexicon)}
    fields: dict[str, Any] = {
        "char_input": "lexicon",
        "char_vocab_size": len(char_lexicon) + 1,
        "max_characters_per_token": a.max_characters_per_token,
        "char_embedding_dim": a.char_dim,
        "char_filters": a.filters,
        "num_highway_layers": a.n_highway,
        "char_activation": a.activation,
        "lstm_cell_size": a.dim,
        "projection_dim": a.projection_dim,
        "num_hidden_layers": a.n_layers,
        "cell_clip": a.cell_clip or None,  # EFML clips only when non-zero
        "proj_clip": a.proj_clip or None,
        "use_skip_connections": True,
        "lstm_forget_bias": 0.0,
        "char_padding_id": char_id["<pad>"],
        "bos_char_ids": [char_id["<eow>"], char_id["<bos>"], char_id["<bow>"]],
        "eos_char_ids": [char_id["<eow>"], char_id["<eos>"], char_id["<bow>"]],
    }
    if word_lexicon is not None:
        word_id = {token: index + 1 for index, token in enumerate(word_lexicon)}
        fields.update(
            word_vocab_size=len(word_lexicon) + 1,
            word_embedding_dim=a.word_dim,
            bos_word_id=word_id.get("<bos>", word_id["<oov>"]),
            eos_word_id=word_id.get("<eos>", word_id["<oov>"]),
        )
    try:
        return ElmoConfig(**fields)
    except ElmoConfigError as error:
        raise EfmlFormatError(f"architecture JSON: unsupported value ({error}).") from error


def read_efml_model(model_dir: str | Path) -> EfmlModel:
    """Read and check an EFML model folder (see the module docstring); `EfmlFormatError` names any problem."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise EfmlFormatError(f"{model_dir} is not a directory (an ELMoForManyLangs model folder).")
    raw_architecture, architecture_source = find_architecture(model_dir)
    architecture = parse_architecture(raw_architecture, architecture_source["location"])
    char_lexicon = read_lexicon(model_dir / "char.dic", LEXICON_CHAR_SPECIALS)
    word_lexicon = read_lexicon(model_dir / "word.dic", LEXICON_WORD_SPECIALS) if architecture.word_dim > 0 else None
    shapes = expected_shapes(architecture, len(char_lexicon), None if word_lexicon is None else len(word_lexicon))
    efml_state = {}
    for name in (TOKEN_EMBEDDER_FILE, ENCODER_FILE):
        state = read_state_dict(model_dir / name)
        check_state_dict(model_dir / name, state, shapes[name])
        efml_state[name] = state
    config = elmo_config(architecture, char_lexicon, word_lexicon)
    state_dict = to_elmo_state_dict(architecture, efml_state[TOKEN_EMBEDDER_FILE], efml_state[ENCODER_FILE])
    files = [
        "config.json",
        "char.dic",
        *(["word.dic"] if word_lexicon is not None else []),
        TOKEN_EMBEDDER_FILE,
        ENCODER_FILE,
    ]
    sources = {name: {"location": str(model_dir / name), "sha256": sha256_of(model_dir / name)} for name in files}
    sources["architecture"] = architecture_source
    return EfmlModel(config, state_dict, char_lexicon, word_lexicon, efml_state, architecture, sources)


__all__ = ["EfmlFormatError", "EfmlModel", "read_efml_model"]
