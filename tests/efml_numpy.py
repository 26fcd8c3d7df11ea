"""ELMoForManyLangs (EFML) for the tests: random-weight model folders in EFML's exact format (its state-dict key names,
`char.dic` / `word.dic`, `config.json` + architecture JSON, pickles of plain dicts of tensors) and an independent NumPy
transcription of its `Embedder.sents2elmo(output_layer=-2)` from zero states, reading those files itself."""

import json
import random
from pathlib import Path

import numpy as np
import torch

CHAR_SPECIALS = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]  # EFML's training order, after the corpus's
WORD_SPECIALS = ["<oov>", "<bos>", "<eos>", "<pad>"]  # ids 0..3 in EFML's training
# CJK, Cyrillic, Arabic, Latin with accents, U+3000 (a line whose token `strip()` removes)
NON_LATIN_CHARS = list(dict.fromkeys("北京大学日本語中文приветмирاللغةالعربيةéàçñÅ")) + ["\u3000"]
NON_LATIN_WORDS = ["北京", "大学", "日本語", "привет", "мир", "اللغة", "العربية", "café"]


def small_architecture(word_dim: int, max_chars: int = 9, cell_clip: float = 3, proj_clip: float = 3) -> dict:
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


def write_efml_model(
    folder: Path,
    *,
    chars: list[str] = NON_LATIN_CHARS,
    words: list[str] | None = NON_LATIN_WORDS,
    architecture: dict | None = None,
    seed: int = 0,
    config_path: str = "arch.json",
) -> Path:
    """Write a random-weight EFML model folder (word embedding when `words` is given) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    architecture = architecture or small_architecture(word_dim=7 if words is not None else 0)
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


# ---- the NumPy transcription ----------------------------------------------------------------------------------------


def _read_dic(path: Path) -> dict[str, int]:
    lexicon = {}
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields = ["\u3000", fields[0]]
        lexicon[fields[0]] = int(fields[1])
    return lexicon


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _lstm(weights: dict, prefix: str, inputs: np.ndarray, cell_clip: float, proj_clip: float) -> np.ndarray:
    w_in, w_state = weights[f"{prefix}.input_linearity.weight"], weights[f"{prefix}.state_linearity.weight"]
    b_state, w_proj = weights[f"{prefix}.state_linearity.bias"], weights[f"{prefix}.state_projection.weight"]
    cell_size = w_proj.shape[1]
    memory, state, outputs = np.zeros(cell_size), np.zeros(w_proj.shape[0]), []
    for x in inputs:
        gates = w_in @ x + w_state @ state + b_state
        i, f, g, o = (gates[k * cell_size : (k + 1) * cell_size] for k in range(4))
        memory = _sigmoid(i) * np.tanh(g) + _sigmoid(f) * memory
        if cell_clip:
            memory = np.clip(memory, -cell_clip, cell_clip)
        state = w_proj @ (_sigmoid(o) * np.tanh(memory))
        if proj_clip:
            state = np.clip(state, -proj_clip, proj_clip)
        outputs.append(state)
    return np.stack(outputs)


def efml_numpy_layers(folder: Path, sentence: list[str]) -> np.ndarray:
    """EFML's layers for one sentence from fresh states, float64: (n_layers + 1, len(sentence), 2 * projection_dim)."""
    config_path = json.loads((folder / "config.json").read_text())["config_path"]
    architecture = json.loads((folder / Path(config_path).name).read_text())
    embedder_cfg, encoder_cfg = architecture["token_embedder"], architecture["encoder"]
    max_chars = embedder_cfg["max_characters_per_token"]
    chars = _read_dic(folder / "char.dic")
    words = _read_dic(folder / "word.dic") if embedder_cfg["word_dim"] > 0 else None
    load = lambda name: {k: v.double().numpy() for k, v in torch.load(folder / name, weights_only=True).items()}  # noqa: E731
    embedder, encoder = load("token_embedder.pkl"), load("encoder.pkl")

    tokens = ["<bos>"] + [w if len(w) + 2 <= max_chars else w[: max_chars - 2] for w in sentence] + ["<eos>"]
    char_rows = np.full((len(tokens), max_chars), chars["<pad>"])
    for row, token in enumerate(tokens):
        inner = [chars[token]] if token in ("<bos>", "<eos>") else [chars.get(c, chars["<oov>"]) for c in token]
        char_rows[row, : len(inner) + 2] = [chars["<eow>"], *inner, chars["<bow>"]]  # EFML's crossed markers
    embedded = embedder["char_emb_layer.embedding.weight"][char_rows]  # (tokens, chars, char_dim)
    pooled = []
    for index, (width, _) in enumerate(embedder_cfg["filters"]):
        kernel, bias = embedder[f"convolutions.{index}.weight"], embedder[f"convolutions.{index}.bias"]
        windows = np.stack([embedded[:, p : p + width] for p in range(max_chars - width + 1)], axis=1)
        convolved = np.einsum("tpwc,ncw->tpn", windows, kernel) + bias
        pooled.append(
            np.maximum(convolved.max(axis=1), 0)
            if embedder_cfg["activation"] == "relu"
            else np.tanh(convolved.max(axis=1))
        )
    hidden = np.concatenate(pooled, axis=-1)
    size = hidden.shape[-1]
    for index in range(embedder_cfg["n_highway"]):
        projected = (
            hidden @ embedder[f"highways._layers.{index}.weight"].T + embedder[f"highways._layers.{index}.bias"]
        )
        gate = _sigmoid(projected[:, size:])
        hidden = gate * hidden + (1 - gate) * np.maximum(projected[:, :size], 0)
    if words is not None:
        word_rows = [words.get(token, words["<oov>"]) for token in tokens]
        hidden = np.concatenate([embedder["word_emb_layer.embedding.weight"][word_rows], hidden], axis=-1)
    token_embedding = hidden @ embedder["projection.weight"].T + embedder["projection.bias"]

    clips = encoder_cfg["cell_clip"], encoder_cfg["proj_clip"]
    layers = [np.concatenate([token_embedding, token_embedding], axis=-1)]
    forward_in = backward_in = token_embedding
    for layer in range(encoder_cfg["n_layers"]):
        forward = _lstm(encoder, f"forward_layer_{layer}", forward_in, *clips)
        backward = _lstm(encoder, f"backward_layer_{layer}", backward_in[::-1], *clips)[::-1]
        if layer > 0:
            forward, backward = forward + forward_in, backward + backward_in
        layers.append(np.concatenate([forward, backward], axis=-1))
        forward_in, backward_in = forward, backward
    return np.stack(layers)[:, 1:-1]
