"""ELMoForManyLangs (EFML) for the tests: random-weight model folders in EFML's exact format (written by
`modeling_elmo.conversion.testing_utils.write_random_efml_model`, which the docs use too) and an independent NumPy
transcription of its `Embedder.sents2elmo(output_layer=-2)` from zero states, reading those files itself."""

import json
from pathlib import Path

import numpy as np
import torch

from modeling_elmo.conversion.testing_utils import NON_LATIN_CHARS, NON_LATIN_WORDS
from modeling_elmo.conversion.testing_utils import small_efml_architecture as small_architecture
from modeling_elmo.conversion.testing_utils import write_random_efml_model as write_efml_model

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


__all__ = [
    "NON_LATIN_CHARS",
    "NON_LATIN_WORDS",
    "efml_numpy_layers",
    "small_architecture",
    "write_efml_model",
]
